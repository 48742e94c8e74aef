"""What a user reads from the partition: a directory listing and a piece of a rank's log."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class FileEntry(BaseModel):
    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mtime: float


class FileListing(BaseModel):
    path: str = Field(
        description="Partition-relative path of the listed directory ('' is the partition root)"
    )
    entries: list[FileEntry]
    total: int
    offset: int
    limit: int
    sort: str
    skipped: int = Field(
        0, description="Entries not listed: their names are not valid UTF-8 (see `note`)"
    )
    note: str | None = Field(None, description="Why entries were skipped, and what to do")


class LogSnapshot(BaseModel):
    rank: int
    text: str
    start_offset: int = Field(
        description="Byte offset of the first character of text in the rank's log"
    )
    offset: int = Field(description="Byte offset just after text: follow from here")
    truncated: bool = Field(description="True when older lines exist before text")
