"""The user's partition of the shared file system: the only place that resolves user-given paths.

Every path from a client, and every path-like template parameter, is partition-relative; it is
checked (text, length), resolved (symlinks included) and refused unless the result stays inside
the partition, before any file is opened. Files the server reads for a user (a template's config)
are opened through the same resolver without following a last symlink, and only when they are
regular files. Listings are paginated and sorted server-side: the name order of a directory is
cached while the directory is unchanged (so paging through 100k entries costs one scan), and the
entries shown are stat'ed again on every page, so a growing log shows its new size and time.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from .errors import (
    HyperPodError,
    InvalidRequest,
    NotFound,
    PathNotAllowed,
    StorageUnavailable,
)
from .models import FileEntry, FileListing, TemplateParam

SORT_KEYS = ("name", "-name", "size", "-size", "mtime", "-mtime")
MAX_PAGE = 5000
NAME_MAX = 255
"""Bytes in one path component (Linux `NAME_MAX`; Lustre and ext4 refuse longer names)."""
PATH_MAX = 4096
"""Bytes in a whole path, its final NUL included (Linux `PATH_MAX`)."""
MAX_TEXT_FILE = 1024 * 1024
"""The largest file the server reads for a user (a template's YAML config)."""
COARSE_MTIME_SECONDS = 2.0
"""A directory changed less than this long before a scan may change again within the same
timestamp tick (Lustre keeps whole seconds): such a scan is used once, never cached."""


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


def check_text(value: str, *, field: str, what: str = "the path") -> None:
    """Refuse text no file system call can take: NUL bytes and unpaired UTF-16 surrogates."""
    if "\x00" in value:
        raise InvalidRequest(f"{what} contains a NUL byte", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(
            f"{what} contains an unpaired UTF-16 surrogate (\\ud800-\\udfff): send valid Unicode",
            field=field,
        ) from None


ANSWERED_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO}
)
"""OS errors that are the file system's answer, not a bug, wherever they surface (see
`handlers.as_answer`)."""


def os_error(error: OSError, shown: str | None, *, field: str | None = None) -> HyperPodError:
    """An OS error on a partition path as an answer a person can act on (never a 500).

    `shown` is the partition-relative path as the user gave it (None: a file the server itself
    needs): messages never name a real path outside the partition."""
    name = "a file the server needs" if shown is None else f"'{shown or '/'}'"
    code = error.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(f"{name} does not exist in your partition", field=field)
    if code == errno.ELOOP:
        return InvalidRequest(
            f"{name} is a symlink loop (or goes through more than 40 symlinks)", field=field
        )
    if code == errno.ENAMETOOLONG:
        return InvalidRequest(
            f"{name} is too long for the file system "
            f"({NAME_MAX} bytes per name, {PATH_MAX - 1} in all)",
            field=field,
        )
    if code in (errno.EACCES, errno.EPERM):
        return PathNotAllowed(f"the server may not open {name}: permission denied", field=field)
    if code == errno.EROFS:
        return StorageUnavailable(
            f"the file system of {name} is read-only: ask your administrator to remount it "
            "writable",
            field=field,
        )
    if code in (errno.ENOSPC, errno.EDQUOT):
        return StorageUnavailable(
            f"the file system of {name} is full (or your quota is used up): free some space "
            "and retry",
            field=field,
        )
    return StorageUnavailable(
        f"the file system failed on {name}: {error.strerror or error}", field=field
    )


FileType = Literal["file", "directory", "symlink", "other"]
Row = tuple[str, FileType, int, float]
"""(name, type, size, mtime): cheap to scan and sort; models are built for one page only."""

_KINDS: dict[int, FileType] = {
    stat.S_IFDIR: "directory",
    stat.S_IFREG: "file",
    stat.S_IFLNK: "symlink",
}


def _row(name: str, info: os.stat_result) -> Row:
    return (name, _KINDS.get(stat.S_IFMT(info.st_mode), "other"), info.st_size, info.st_mtime)


@dataclass
class _Scan:
    key: tuple[int, ...]
    rows: list[Row]
    """Name order (directories first); sizes and times as of the scan."""
    skipped: int
    """Entries whose names are not UTF-8 (no JSON string can carry them)."""


class Partition:
    """A directory tree that user paths cannot leave."""

    def __init__(self, root: Path, *, cache_size: int = 16) -> None:
        self.root = root
        self._real_root = root.resolve()
        self._cache: OrderedDict[str, _Scan] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._real_root = self.root.resolve()

    # -- resolving --------------------------------------------------------------------------
    def resolve(self, relative: str, *, field: str = "path") -> Path:
        """The real path of a partition-relative path, or a 4xx error naming `field`.

        Refused without touching the file system: non-text, NUL, lone surrogates, absolute
        paths, any '..' component, a component over NAME_MAX bytes, a path over PATH_MAX.
        Then resolved with every symlink followed; loops and unreadable components answer 4xx;
        the result must be the partition or inside it. Missing tails are allowed (an output
        directory to be created), resolved as far as they exist."""
        if not isinstance(relative, str):
            raise InvalidRequest("the path must be a string", field=field)
        check_text(relative, field=field)
        if relative.startswith(("/", "\\")) or PurePosixPath(relative).is_absolute():
            raise PathNotAllowed(
                f"'{relative}' is absolute: give a path relative to your partition", field=field
            )
        parts = [part for part in relative.replace("\\", "/").split("/") if part not in ("", ".")]
        if ".." in parts:
            raise PathNotAllowed(
                f"'{relative}' goes above your partition ('..' is not allowed)", field=field
            )
        for part in parts:
            if len(part.encode("utf-8")) > NAME_MAX:
                raise InvalidRequest(
                    f"a name in the path is {len(part.encode('utf-8'))} bytes long: "
                    f"the file system allows {NAME_MAX}",
                    field=field,
                )
        joined = os.path.join(self._real_root, *parts)
        if len(joined.encode("utf-8")) >= PATH_MAX:
            raise InvalidRequest(
                f"the path is too long: {PATH_MAX - 1} bytes at most, partition included",
                field=field,
            )
        # Resolved as far as it exists, the rest lexically. What realpath leaves unresolved is
        # a symlink loop: the result is then still a symlink, or the kernel says ELOOP.
        real = os.path.realpath(joined)
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                raise OSError(errno.ELOOP, "symlink loop")
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as error:
            raise os_error(error, relative, field=field) from None
        candidate = Path(real)
        if not _inside(candidate, self._real_root):
            raise PathNotAllowed(f"'{relative}' points outside your partition", field=field)
        return candidate

    def relative(self, path: Path) -> str:
        return path.relative_to(self._real_root).as_posix() if path != self._real_root else ""

    def directory(self, relative: str, *, field: str = "path") -> Path:
        path = self.resolve(relative, field=field)
        try:
            info = path.stat()
        except OSError as error:
            raise os_error(error, relative, field=field) from None
        if not stat.S_ISDIR(info.st_mode):
            raise InvalidRequest(f"'{relative}' is not a directory", field=field)
        return path

    def exists(self, relative: str, *, field: str = "path") -> bool:
        """Whether a (confined) partition path exists; permission problems are errors."""
        path = self.resolve(relative, field=field)
        try:
            path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as error:
            raise os_error(error, relative, field=field) from None
        return True

    # -- reading a user's file ----------------------------------------------------------------
    def read_text(self, relative: str, *, field: str, limit: int = MAX_TEXT_FILE) -> str:
        """A UTF-8 text file of the partition: resolved first, opened without following a last
        symlink or blocking on a FIFO, checked again through the open descriptor, size-capped."""
        path = self.resolve(relative, field=field)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            raise os_error(error, relative, field=field) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidRequest(f"'{relative}' is not a regular file", field=field)
            opened = _descriptor_path(fd)
            if opened is not None and not _inside(opened, self._real_root):
                raise PathNotAllowed(f"'{relative}' points outside your partition", field=field)
            if info.st_size > limit:
                raise InvalidRequest(
                    f"'{relative}' is {info.st_size} bytes: at most {limit} are read", field=field
                )
            chunks = []
            left = limit + 1
            while left > 0 and (chunk := os.read(fd, min(left, 65536))):
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as error:
            raise os_error(error, relative, field=field) from None
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > limit:
            raise InvalidRequest(f"'{relative}' is larger than {limit} bytes", field=field)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidRequest(
                f"'{relative}' is not UTF-8 text (byte {error.start})", field=field
            ) from None

    def guard(self, path: Path, *, shown: str, field: str | None = None) -> Callable[[int], None]:
        """A check for a file the server opens by a path it built itself (a job's log): when
        that path names a place inside the partition, the open descriptor must really be inside,
        so that a symlink planted in the partition cannot redirect the server's read. Paths the
        server keeps outside the partition (a backend's spool) are its own and pass."""
        lexical = Path(os.path.abspath(path))
        inside = _inside(lexical, self._real_root)
        refused = PathNotAllowed(f"{shown} points outside your partition", field=field)
        if inside and not _inside(Path(os.path.realpath(lexical)), self._real_root):
            raise refused  # now, before anything (its size) is read through it

        def check(fd: int) -> None:
            if not inside:
                return
            opened = _descriptor_path(fd)
            if opened is None:
                opened = Path(os.path.realpath(lexical))
            if not _inside(opened, self._real_root):
                raise refused

        return check

    # -- a directory the server creates for a job ---------------------------------------------
    @contextmanager
    def new_directory(self, path: Path, *, shown: str) -> Iterator[Path]:
        """Create `path` (inside the partition) for the body to fill; if the body fails, remove
        it again (so no half-created directory stays), and report a storage error as 503."""
        if not _inside(path.parent.resolve(strict=False), self._real_root):
            raise PathNotAllowed(f"'{shown}' points outside your partition")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise os_error(error, shown) from None
        try:
            yield path
        except OSError as error:
            shutil.rmtree(path, ignore_errors=True)
            raise os_error(error, shown) from None
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise

    # -- listing ------------------------------------------------------------------------------
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
        try:
            scan = self._scan(path)
            field, reverse = sort.lstrip("-"), sort.startswith("-")
            if field == "name":
                rows = scan.rows[::-1] if reverse else scan.rows
                page = _restat(path, rows[offset : offset + limit])
            else:
                # The order depends on every entry's size or time: stat them all, now.
                fresh = _restat(path, scan.rows)
                fresh.sort(key=itemgetter(2 if field == "size" else 3), reverse=reverse)
                page = fresh[offset : offset + limit]
        except OSError as error:
            raise os_error(error, relative, field="path") from None
        make = FileEntry.model_construct  # values come from the OS: no validation needed
        note = None
        if scan.skipped:
            note = (
                f"{scan.skipped} entr{'y' if scan.skipped == 1 else 'ies'} not shown: "
                "the name is not valid UTF-8 (rename it, e.g. `convmv -f latin1 -t utf8`)"
            )
        return FileListing(
            path=self.relative(path),
            entries=[make(name=n, type=t, size=s, mtime=m) for n, t, s, m in page],
            total=len(scan.rows),
            offset=offset,
            limit=limit,
            sort=sort,
            skipped=scan.skipped,
            note=note,
        )

    def _scan(self, path: Path) -> _Scan:
        """The name-ordered scan of a directory, cached while the directory itself is unchanged
        (its entries' names change only with it; their sizes and times are read per page)."""
        info = path.stat()
        key = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_nlink)
        cache_key = str(path)
        with self._lock:
            cached = self._cache.get(cache_key)
            if cached is not None and cached.key == key:
                self._cache.move_to_end(cache_key)
                return cached
        rows, skipped = scan_directory(path)
        rows.sort(key=lambda r: (r[1] != "directory", r[0].casefold(), r[0]))
        scan = _Scan(key, rows, skipped)
        if time.time() - info.st_mtime >= COARSE_MTIME_SECONDS:
            with self._lock:
                self._cache[cache_key] = scan
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return scan


def _restat(path: Path, rows: list[Row]) -> list[Row]:
    """The rows with their current type, size and time (an entry gone since the scan keeps its
    scanned values: the directory changed, so the next page scans again)."""
    base = os.fspath(path)
    fresh: list[Row] = []
    append = fresh.append
    for row in rows:
        try:
            append(_row(row[0], os.lstat(os.path.join(base, row[0]))))
        except OSError:
            append(row)
    return fresh


def scan_directory(path: Path) -> tuple[list[Row], int]:
    """One scandir pass with one lstat per entry (symlinks are shown, not followed); entries
    whose names are not UTF-8 are counted, not returned."""
    rows: list[Row] = []
    skipped = 0
    append = rows.append
    with os.scandir(path) as iterator:
        for item in iterator:
            name = item.name
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:  # undecodable bytes, as surrogate escapes
                skipped += 1
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            append(_row(name, info))
    return rows, skipped


def _descriptor_path(fd: int) -> Path | None:
    """What an open descriptor really is (Linux /proc), or None where that cannot be known."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


# -- template parameters ----------------------------------------------------------------------
@lru_cache(maxsize=64)
def _partition_at(root: str) -> Partition:
    """The partition at a template context's root (its root resolved once)."""
    return Partition(Path(root))


def confine_params(
    root: str | Path, declared: Iterable[TemplateParam], values: dict[str, Any]
) -> dict[str, Any]:
    """Every path-like (`type: path`) template parameter through the partition resolver, before
    a template opens any file: '..', absolute escapes and symlinks out are refused naming
    `params.<name>` (whether a `must_exist` one exists is the service's check). A leading '/'
    means the partition root, as the templates read it. Returns the values with paths stripped
    of surrounding spaces (the form the templates then use)."""
    partition = _partition_at(str(root))
    result = dict(values)
    for param in declared:
        value = values.get(param.name)
        if param.type != "path" or value is None or value == "":
            continue
        field = f"params.{param.name}"
        text = str(value).strip()
        partition.resolve(text.lstrip("/"), field=field)
        result[param.name] = text
    return result


def read_yaml(root: str | Path, relative: str, *, field: str) -> Any:
    """A YAML file of the partition, read through the resolver. A syntax error names the line
    and column and what is wrong, never the file's lines."""
    try:
        text = _partition_at(str(root)).read_text(str(relative).strip().lstrip("/"), field=field)
    except NotFound as error:  # a request field names it: a bad request, not a missing route
        raise InvalidRequest(error.message, field=field) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidRequest(
            f"'{relative}' is not valid YAML: {error.problem or 'syntax error'}{where}",
            field=field,
        ) from None
    except yaml.YAMLError:
        raise InvalidRequest(f"'{relative}' is not valid YAML", field=field) from None
