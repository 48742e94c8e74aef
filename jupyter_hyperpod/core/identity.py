"""Who the user is, as each system sees it, decided in ONE place and handed to the backends.

- `name`: the display name (`c.HyperPodSettings.user`; by default Studio's `UserProfileName`,
  else the OS user). It names the partition (`<root>/<name>`), the job store's rows and the
  Kubernetes label `hyperpod.jupyter.org/user` (Kubernetes records no creator on an object).
  Never compared with a POSIX name.
- `uid`: the POSIX uid this server runs as (`os.getuid()`): what munge signs for every Slurm
  command, so a Slurm job is mine when squeue's `user_id` / scontrol's `UserId=name(uid)` is this
  uid, and what a local job's processes run as.
- `reader`: the POSIX account whose file permissions decide whether someone else's log may be
  shown: the server's own account; for a server running as root (a container, a Space) the
  account `name` names, and none when this machine has no such account: every such decision
  then refuses (fail closed), whatever this process could read.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from typing import Any

from .environment import studio_user_profile


@dataclass(frozen=True)
class Account:
    """A POSIX account as the kernel checks it: uid and every group it is a member of."""

    name: str
    uid: int
    gids: frozenset[int]


@dataclass(frozen=True)
class Identity:
    name: str
    """Display name: partition, job store, Kubernetes label (Studio's UserProfileName)."""
    uid: int
    """The uid this server runs as: the user Slurm and the OS see."""
    login: str
    """The POSIX name of `uid` on this machine (the uid itself when it has none)."""
    reader: Account | None
    """Whose permissions decide reads of others' files; None: unknown here, refuse them."""
    source: str
    """Where `name` came from: 'settings', 'studio metadata' or 'os user'."""

    def owns_uid(self, uid: int | None) -> bool:
        """A cluster object owned by `uid` is mine (unknown owner: not mine)."""
        return uid is not None and uid == self.uid

    @property
    def unresolved(self) -> str:
        """Why others' files are refused when `reader` is None."""
        return (
            f"this server runs as {self.login} (uid {self.uid}) for user '{self.name}', which is "
            "not a POSIX account on this machine: whose permissions apply is unknown, so nobody "
            "else's files are shown (set c.HyperPodSettings.user to your POSIX user name, or run "
            "the server as that user)"
        )


def account_named(name: str) -> Account | None:
    """The POSIX account called `name`, with its groups (None when this machine has none)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
    return Account(name=entry.pw_name, uid=entry.pw_uid, gids=frozenset(groups))


def own_account() -> Account:
    """This process's account: its real uid and the groups the kernel checks for it."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return Account(name=name, uid=uid, gids=frozenset({os.getgid(), *os.getgroups()}))


def identity_of(settings: Any) -> Identity:
    """The identity of the user this server serves, from its settings and the OS."""
    name = str(settings.user)
    own = own_account()
    if studio_user_profile(str(getattr(settings, "studio_metadata_path", "") or "")) == name:
        source = "studio metadata"
    elif name == own.name:
        source = "os user"
    else:
        source = "settings"
    reader: Account | None = own
    if own.uid == 0 and name != own.name:
        reader = account_named(name)
    return Identity(name=name, uid=own.uid, login=own.name, reader=reader, source=source)
