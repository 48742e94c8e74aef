"""The user's partition of the shared file system: the only place that resolves user-given paths.

Every path from a client is partition-relative; it is resolved (symlinks included) and refused
unless the result stays inside the partition. Listings are paginated and sorted server-side; the
sorted listing of a directory is cached until the directory changes, so paging through 100k
entries costs one scan.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path, PurePosixPath
from typing import Literal

from .core.errors import InvalidRequest, NotFound, PathNotAllowed
from .core.models import FileEntry, FileListing

SORT_KEYS = ("name", "-name", "size", "-size", "mtime", "-mtime")
MAX_PAGE = 5000


def partition_dir(fs_root: Path, mode: str, user: str) -> Path:
    """The partition for a mode: 'shared', 'user' or an explicit path inside the root."""
    if mode == "shared":
        return fs_root / "shared"
    if mode == "user":
        if not user or user in (".", "..") or "/" in user or "\x00" in user:
            raise InvalidRequest(f"user name {user!r} cannot name a partition", field="user")
        return fs_root / user
    explicit = PurePosixPath(mode)
    candidate = Path(mode) if explicit.is_absolute() else fs_root / mode
    resolved = candidate.resolve()
    if not _inside(resolved, fs_root.resolve()):
        raise InvalidRequest(
            f"partition {mode!r} is outside the shared file system {fs_root}", field="partition"
        )
    return resolved


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


FileType = Literal["file", "directory", "symlink", "other"]
Row = tuple[str, FileType, int, float]
"""(name, type, size, mtime): cheap to scan and sort; models are built for one page only."""


@dataclass
class _Scan:
    key: tuple[int, int]
    rows: list[Row]


class Partition:
    """A directory tree that user paths cannot leave."""

    def __init__(self, root: Path, *, cache_size: int = 16) -> None:
        self.root = root
        self._real_root = root.resolve()
        self._cache: OrderedDict[tuple[str, str], _Scan] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._real_root = self.root.resolve()

    def resolve(self, relative: str, *, field: str = "path") -> Path:
        """The real path of a partition-relative path, or PathNotAllowed/InvalidRequest."""
        if "\x00" in relative:
            raise InvalidRequest("the path contains a NUL byte", field=field)
        if relative.startswith(("/", "\\")) or PurePosixPath(relative).is_absolute():
            raise PathNotAllowed(
                f"'{relative}' is absolute: give a path relative to your partition", field=field
            )
        parts = PurePosixPath(relative.replace("\\", "/")).parts
        if ".." in parts:
            raise PathNotAllowed(
                f"'{relative}' goes above your partition ('..' is not allowed)", field=field
            )
        candidate = (self._real_root.joinpath(*parts)).resolve()
        if not _inside(candidate, self._real_root):
            raise PathNotAllowed(f"'{relative}' points outside your partition", field=field)
        return candidate

    def relative(self, path: Path) -> str:
        return path.relative_to(self._real_root).as_posix() if path != self._real_root else ""

    def directory(self, relative: str, *, field: str = "path") -> Path:
        path = self.resolve(relative, field=field)
        if not path.exists():
            raise NotFound(f"'{relative or '/'}' does not exist in your partition", field=field)
        if not path.is_dir():
            raise InvalidRequest(f"'{relative}' is not a directory", field=field)
        return path

    def listing(
        self, relative: str = "", *, offset: int = 0, limit: int = 500, sort: str = "name"
    ) -> FileListing:
        if sort not in SORT_KEYS:
            raise InvalidRequest(f"sort must be one of {', '.join(SORT_KEYS)}", field="sort")
        if offset < 0:
            raise InvalidRequest("offset cannot be negative", field="offset")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}", field="limit")
        path = self.directory(relative)
        rows = self._sorted_rows(path, sort)
        make = FileEntry.model_construct  # values come from the OS: no validation needed
        return FileListing(
            path=self.relative(path),
            entries=[
                make(name=n, type=t, size=s, mtime=m)
                for n, t, s, m in rows[offset : offset + limit]
            ],
            total=len(rows),
            offset=offset,
            limit=limit,
            sort=sort,
        )

    def _sorted_rows(self, path: Path, sort: str) -> list[Row]:
        info = path.stat()
        key = (info.st_mtime_ns, info.st_ino)
        cache_key = (str(path), sort)
        with self._lock:
            cached = self._cache.get(cache_key)
            if cached is not None and cached.key == key:
                self._cache.move_to_end(cache_key)
                return cached.rows
        rows = scan_directory(path)
        field, reverse = sort.lstrip("-"), sort.startswith("-")
        if field == "name":
            rows.sort(key=lambda r: (r[1] != "directory", r[0].casefold()), reverse=reverse)
        else:
            rows.sort(key=itemgetter(2 if field == "size" else 3), reverse=reverse)
        with self._lock:
            self._cache[cache_key] = _Scan(key, rows)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return rows


_KINDS: dict[int, FileType] = {
    stat.S_IFDIR: "directory",
    stat.S_IFREG: "file",
    stat.S_IFLNK: "symlink",
}


def scan_directory(path: Path) -> list[Row]:
    """One scandir pass with one lstat per entry (symlinks are shown, not followed)."""
    rows: list[Row] = []
    append = rows.append
    kinds = _KINDS
    with os.scandir(path) as iterator:
        for item in iterator:
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            append(
                (
                    item.name,
                    kinds.get(stat.S_IFMT(info.st_mode), "other"),
                    info.st_size,
                    info.st_mtime,
                )
            )
    return rows
