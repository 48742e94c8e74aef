"""Bring your own job: the user's own manifest or sbatch script, checked, policed and tracked.

The core knows no file format: the backend reads the file it runs (`Orchestrator.prepare_file`:
a Kubernetes manifest, an sbatch script) and hands back a `PreparedFile`, what it would send with
every change it made marked. This module holds the request, the answer and what both sides share.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .errors import InvalidRequest, validation_error
from .models import Job

MAX_FILE_BYTES = 1024 * 1024
"""The largest file `apply` reads (a manifest or script is a few kB; 1 MiB is generous)."""
STORED_NAME = "applied"
"""The stored file in the job's directory (`.hyperpod/jobs/<id>/applied.<ext>`): resubmit reads it."""


class ApplyRequest(BaseModel):
    """`POST jobs/apply`: a file's text, or a job whose stored file is submitted again."""

    text: str = Field(
        "", description="The manifest or sbatch script, as it is (empty with `resubmit`)"
    )
    filename: str = Field(
        "", max_length=255, description="Its name, for messages and the stored copy"
    )
    fix: bool = Field(False, description="Accept the offered fixes (`fix` of a dry run)")
    dry_run: bool = Field(False, description="Check and preview only: nothing is created")
    resubmit: str | None = Field(
        None, description="A job id: submit its stored file again (not what the file says now)"
    )


class FileChange(BaseModel):
    """One change between the user's file and what is sent."""

    path: str = Field(description="Field path (`metadata.labels`) or `line N` of the script")
    action: Literal["added", "changed", "removed"]
    value: str = Field("", description="The new value, as sent")
    reason: str = Field(description="Why: ours (tracking, adoption), policy, or an accepted fix")


class FileProblem(BaseModel):
    """What the operator (or Slurm) would not run as the file says, with the fix offered."""

    path: str
    message: str
    fix: str = Field("", description="The fix in one line; `fix_diff` shows it")


class AppliedFile(BaseModel):
    """The answer of `apply`: what is (or would be) sent, every change marked, and the job."""

    format: Literal["manifest", "sbatch"]
    language: Literal["yaml", "shell"]
    filename: str
    text: str = Field(description="Exactly what is sent to the cluster")
    diff: str = Field(description="The user's file against what is sent (unified diff)")
    changes: list[FileChange]
    problems: list[FileProblem] = Field(
        description="What would not run; with `fix` their fixes are in `text`"
    )
    fix_diff: str = Field("", description="The fixes as a diff, to accept with `fix`")
    warnings: list[str] = []
    dry_run: bool
    job: Job | None = Field(None, description="The job created (none on a dry run)")


@dataclass
class FileContext:
    """What a backend needs to read a user's file: who, where, and the one partition check."""

    text: str
    filename: str
    job_id: str
    user: str
    fix: bool
    partition: str
    """The partition's root as the cluster sees it."""
    job_dir: str
    """The job's directory as the cluster sees it."""
    job_dir_local: Path
    """The same directory as this machine sees it (its owner: admin/owner.py)."""
    replaces: str | None = None
    """On a resubmit: the cluster id of the job resubmitted once it has ended (its object may be
    replaced by the new one of the same name)."""
    check_path: Callable[[str, str], None] = field(default=lambda path, where: None)
    """`check_path(cluster_path, field)`: raises PathNotAllowed unless the path (as the cluster
    sees it) is in the user's partition (core/partition.py)."""


@dataclass
class PreparedFile:
    """A backend's reading of a user's file: what it sends and the job it becomes."""

    format: Literal["manifest", "sbatch"]
    language: Literal["yaml", "shell"]
    original: str
    """The user's file, normalised the way the diff compares it."""
    text: str
    """What is sent."""
    changes: list[FileChange]
    problems: list[FileProblem]
    fixed: str = ""
    """`text` with the fixes of `problems` applied (empty without problems)."""
    name: str = "job"
    nodes: int = 1
    procs_per_node: int = 1
    """Ranks per node, where the file says (an sbatch script's tasks)."""
    gpus_per_node: int = 0
    command: list[str] = field(default_factory=list)
    image: str | None = None
    kind: str | None = None
    namespace: str | None = None
    queue: str | None = None
    warnings: list[str] = field(default_factory=list)
    payload: Any = None
    """The object the backend submits (a manifest dict, the script text)."""


def apply_request(body: Any) -> ApplyRequest:
    """A REST body (or the arguments of `apply`) as a checked request."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        request = ApplyRequest.model_validate(body)
    except ValidationError as error:
        raise validation_error(error) from None
    size = len(request.text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise InvalidRequest(
            f"the file is {size:,} bytes: at most {MAX_FILE_BYTES:,} are accepted "
            "(a manifest or sbatch script is a few kB)",
            field="text",
        )
    if not request.resubmit and not request.text.strip():
        raise InvalidRequest("the file is empty", field="text")
    if "\x00" in request.text:
        raise InvalidRequest("the file has a NUL byte: it is not a text file", field="text")
    return request


def unified(before: str, after: str, name: str) -> str:
    """`before` against `after` as a unified diff (empty when equal)."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{name} (yours)",
        tofile=f"{name} (sent)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def problems_message(problems: list[FileProblem], filename: str) -> str:
    """The refusal of a file with problems: each with its field and fix, and how to accept."""
    listed = "; ".join(
        f"{p.path}: {p.message}" + (f" (fix: {p.fix})" if p.fix else "") for p in problems
    )
    return (
        f"{filename or 'the file'} would not run as written: {listed}. "
        "Preview the fix (--dry-run) and accept it with --fix"
    )


def stored_suffix(format: str) -> str:
    return ".yaml" if format == "manifest" else ".sbatch"


__all__ = [
    "MAX_FILE_BYTES",
    "AppliedFile",
    "ApplyRequest",
    "FileChange",
    "FileContext",
    "FileProblem",
    "PreparedFile",
    "apply_request",
    "problems_message",
    "unified",
]
