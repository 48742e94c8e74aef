"""Whether a user may read a file: the POSIX permission check the kernel makes, done for any user.

The server may run as another user than the one whose queue it shows (root in a container, a
service account): a log of someone else's job is shown only when the cluster's own permissions
let this user read it, never because this process happens to be able to. A user this machine
cannot resolve to a POSIX account gets nothing (fail closed), whatever this process may read.
"""

from __future__ import annotations

import os
import pwd
import stat

from ..core.identity import Account, Identity


def _allowed(info: os.stat_result, uid: int, gids: frozenset[int], bit: int) -> bool:
    """POSIX permission bits as the kernel checks them for one user (owner, group, other)."""
    if uid == 0:
        return True
    if info.st_uid == uid:
        return bool(info.st_mode & bit)
    if info.st_gid in gids:
        return bool(info.st_mode & (bit >> 3))
    return bool(info.st_mode & (bit >> 6))


def readable_by(
    path: str | None, reader: Account | None, unknown: str = "this user is unknown here"
) -> tuple[bool, str | None]:
    """Can `reader` read `path`? Checked with the file's owner, group and mode (and every parent
    directory's search bit) as the kernel would, whatever user this server runs as. No account
    (a name this machine cannot resolve): refused with `unknown` as the reason."""
    if reader is None:
        return False, unknown
    if not path:
        return False, "the job writes no output file (not a batch job)"
    try:
        info = os.stat(path)
    except OSError:
        return False, f"no log yet at {path}"
    parent = os.path.dirname(os.path.abspath(path))
    blocked = _blocked_parent(parent, reader.uid, reader.gids)
    if blocked:
        return False, f"{reader.name} may not enter {blocked} (permissions)"
    if not _allowed(info, reader.uid, reader.gids, stat.S_IRUSR):
        return (
            False,
            f"{reader.name} may not read {path} (owner {_owner(info)}, "
            f"mode {info.st_mode & 0o777:o})",
        )
    if not os.access(path, os.R_OK):
        return False, f"{path} is not readable by this server"
    return True, None


def _blocked_parent(directory: str, uid: int, gids: frozenset[int]) -> str | None:
    """The first directory from / down to `directory` that the user may not search, if any."""
    parts = directory.strip("/").split("/") if directory.strip("/") else []
    current = "/"
    for part in ["", *parts]:
        current = os.path.join(current, part) if part else current
        try:
            if not _allowed(os.stat(current), uid, gids, stat.S_IXUSR):
                return current
        except OSError:
            return current
    return None


def _owner(info: os.stat_result) -> str:
    try:
        return pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        return str(info.st_uid)


def log_access(path: str | None, identity: Identity, mine: bool) -> tuple[bool, str | None]:
    """A queue row's log: my own jobs' logs (mine as the cluster sees it: `Identity`) are read by
    this server as it reads any of my jobs' (it runs as me); someone else's only where the file's
    permissions let my account read it, and never when my account is unknown here."""
    if not mine:
        return readable_by(path, identity.reader, identity.unresolved)
    if not path:
        return False, "the job writes no output file (not a batch job)"
    if not os.path.exists(path):
        return False, f"no log yet at {path}"
    if not os.access(path, os.R_OK):
        return False, f"{path} is not readable by this server"
    return True, None
