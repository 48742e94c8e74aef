"""This machine as a login node: the Slurm and munge clients, the munge and slurm users with the
controller's ids, the key (owner munge, mode 0400), munged, and the checks `munge -n | unmunge`
and `sinfo`. Commands that need root run through the prefix given (`[]` as root, `sudo -n`)."""

from __future__ import annotations

import base64
import grp
import os
import pwd
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import BackendUnavailable, Conflict, Forbidden, InvalidRequest
from .runner import Completed, Runner

CLIENTS = ("sinfo", "sbatch", "squeue", "scontrol", "munge", "unmunge", "munged")
INSTALL_CLIENTS = "sudo apt-get install -y slurm-client munge"
ROOT_ENV = "HYPERPOD_LOGIN_ROOT"
PATH_FIELDS = ("conf", "munge_key", "munge_socket", "munge_pidfile", "munge_log", "munge_seed")


@dataclass(frozen=True)
class LoginPaths:
    """Where the login node keeps its configuration (defaults: the usual places)."""

    conf: str = "/etc/slurm/slurm.conf"
    munge_key: str = "/etc/munge/munge.key"
    munge_socket: str = "/run/munge/munge.socket.2"
    munge_pidfile: str = "/run/munge/munged.pid"
    munge_log: str = "/var/log/munge/munged.log"
    munge_seed: str = "/var/lib/munge/munged.seed"
    munge_user: str = "munge"
    slurm_user: str = "slurm"
    bin_dir: str = ""
    """Where the Slurm and munge programs are ('' = PATH)."""

    @classmethod
    def under(cls, root: str) -> LoginPaths:
        """Every path below `root`: a second login node's own configuration, key and munged on
        one machine (a container, a test)."""
        base = cls()
        return cls(**{name: root.rstrip("/") + getattr(base, name) for name in PATH_FIELDS})

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> LoginPaths:
        """`$HYPERPOD_LOGIN_ROOT` moves every path below it; `slurm_conf` given: that file."""
        root = (os.environ if env is None else env).get(ROOT_ENV, "")
        return cls.under(root) if root else cls()


@dataclass
class Node:
    runner: Runner
    paths: LoginPaths = field(default_factory=LoginPaths)
    as_root: list[str] = field(default_factory=list)

    def program(self, name: str) -> str:
        if self.paths.bin_dir and os.path.exists(os.path.join(self.paths.bin_dir, name)):
            return os.path.join(self.paths.bin_dir, name)
        return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name

    def missing_clients(self) -> list[str]:
        return [name for name in CLIENTS if not os.path.isabs(self.program(name))]

    def root(self, argv: Sequence[str], *, what: str, timeout: float = 60) -> Completed:
        done = self.runner.run([*self.as_root, *argv], timeout=timeout)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()[:300]
            raise Forbidden(f"{what} failed: {' '.join(argv)}: {detail or done.returncode}")
        return done

    # -- users ----------------------------------------------------------------------------
    def align(self, user: str, uid: int | None, gid: int | None) -> str:
        """Give `user` the controller's uid and gid (munge credentials carry numeric ids);
        returns what changed."""
        if uid is None or gid is None:
            return f"{user}: the controller did not say its ids, kept"
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            entry = None
        try:
            owner = pwd.getpwuid(uid).pw_name
        except KeyError:
            owner = None
        if owner not in (None, user):
            raise Conflict(
                f"uid {uid} of the controller's {user} is {owner}'s here: give {owner} another "
                f"uid (sudo usermod -u NEW {owner}) and connect again"
            )
        try:
            group_name = grp.getgrgid(gid).gr_name
        except KeyError:
            group_name = None
        if group_name not in (None, user):
            raise Conflict(
                f"gid {gid} of the controller's {user} group is {group_name}'s here: give "
                f"{group_name} another gid (sudo groupmod -g NEW {group_name}) and connect again"
            )
        if entry is None:
            if group_name is None:
                self.root(["groupadd", "-g", str(gid), user], what=f"creating group {user}")
            self.root(
                [
                    *("useradd", "-r", "-M", "-u", str(uid), "-g", str(gid)),
                    *("-s", "/usr/sbin/nologin", "-d", "/nonexistent", user),
                ],
                what=f"creating user {user}",
            )
            return f"{user}: created with uid {uid} gid {gid}"
        if (entry.pw_uid, entry.pw_gid) == (uid, gid):
            return f"{user}: uid {uid} gid {gid}, as on the controller"
        try:
            current = grp.getgrnam(user).gr_gid
        except KeyError:
            current = None
        if current is None:
            self.root(["groupadd", "-g", str(gid), user], what=f"creating group {user}")
        elif current != gid:
            self.root(["groupmod", "-g", str(gid), user], what=f"changing group {user}'s gid")
        self.root(["usermod", "-u", str(uid), "-g", str(gid), user], what=f"changing {user}'s uid")
        return f"{user}: uid {entry.pw_uid} -> {uid}, gid {entry.pw_gid} -> {gid}"

    # -- files ----------------------------------------------------------------------------
    def install_file(self, content: bytes, target: str, *, mode: str = "0644") -> None:
        """Write a file that anyone may read (slurm.conf) as root, owned by root."""
        with tempfile.TemporaryDirectory(prefix="hyperpod-login-") as private:
            os.chmod(private, 0o711)  # sudo's root reads the staged copy
            staged = Path(private) / "file"
            staged.write_bytes(content)
            staged.chmod(0o644)
            directory = str(Path(target).parent)
            self.root(["install", "-d", "-m", "0755", directory], what=f"creating {directory}")
            self.root(
                ["install", "-o", "root", "-g", "root", "-m", mode, str(staged), target],
                what=f"installing {target}",
            )

    def install_key(self, key: bytes) -> None:
        """The munge key, owner munge, mode 0400, replaced atomically. Root reads it from stdin
        into a file only it can read: it is never readable by others, not even staged."""
        user = self.paths.munge_user
        target = self.paths.munge_key
        directory = str(Path(target).parent)
        self.root(
            ["install", "-d", "-m", "0700", "-o", user, "-g", user, directory],
            what=f"creating {directory}",
        )
        script = (
            'umask 077; t=$(mktemp "$1.XXXXXX") && base64 -d >"$t" && '
            'chown "$2:$2" "$t" && chmod 0400 "$t" && mv -f "$t" "$1"'
        )
        done = self.runner.run(
            [*self.as_root, "sh", "-c", script, "sh", target, user],
            input=base64.b64encode(key).decode(),
            timeout=30,
        )
        if done.returncode != 0:
            raise Forbidden(f"installing {target} failed: {done.stderr.strip()[:300]}")

    # -- munged ---------------------------------------------------------------------------
    def munged_pid(self) -> int | None:
        try:
            pid = int(Path(self.paths.munge_pidfile).read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def stop_munged(self) -> bool:
        pid = self.munged_pid()
        if pid is None:
            return False
        self.root(["kill", str(pid)], what="stopping munged")
        for _ in range(100):
            if self.munged_pid() != pid:
                return True
            time.sleep(0.05)
        raise BackendUnavailable(f"munged (pid {pid}) did not stop: stop it and connect again")

    def start_munged(self) -> str:
        paths = self.paths
        user = paths.munge_user
        for directory, mode in (
            (Path(paths.munge_socket).parent, "0755"),
            (Path(paths.munge_log).parent, "0700"),
            (Path(paths.munge_seed).parent, "0700"),
        ):
            self.root(
                ["install", "-d", "-m", mode, "-o", user, "-g", user, str(directory)],
                what=f"creating {directory}",
            )
        restarted = self.stop_munged()
        self.root(
            [
                *("runuser", "-u", user, "--", self.program("munged")),
                *("--key-file", paths.munge_key, "--socket", paths.munge_socket),
                *("--pid-file", paths.munge_pidfile, "--log-file", paths.munge_log),
                *("--seed-file", paths.munge_seed),
            ],
            what="starting munged",
        )
        return "restarted" if restarted else "started"

    # -- checks ---------------------------------------------------------------------------
    def check_munge(self) -> str:
        socket = self.paths.munge_socket
        made = self.runner.run([self.program("munge"), "-n", "-S", socket], timeout=15)
        if made.returncode != 0:
            raise BackendUnavailable(f"munge -n failed: {made.stderr.strip()[:300]}")
        read = self.runner.run(
            [self.program("unmunge"), "-S", socket], input=made.stdout, timeout=15
        )
        if read.returncode != 0:
            raise BackendUnavailable(
                f"unmunge failed: {(read.stderr or read.stdout).strip()[:300]}"
            )
        return "munge -n | unmunge: Success"

    def slurm_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": self.paths.conf, **(extra or {})}

    def check_sinfo(self) -> str:
        done = self.runner.run(
            [self.program("sinfo"), "-h", "-o", "%P %a %D %T"], env=self.slurm_env(), timeout=30
        )
        if done.returncode != 0:
            text = (done.stderr or done.stdout).strip()
            if "authentication" in text.lower() or "credential" in text.lower():
                raise BackendUnavailable(
                    f"slurmctld refused this node's munge credential ({text[:200]}): the key or "
                    "the munge uid differs from the controller's"
                )
            if "contact" in text.lower() or "connection" in text.lower() or done.returncode == 124:
                raise BackendUnavailable(
                    f"slurmctld does not answer ({text[:200]}): the controller's security group "
                    "must let this machine reach TCP 6817 (and the nodes 6818 for srun)"
                )
            raise BackendUnavailable(f"sinfo failed: {text[:300]}")
        partitions = sorted({line.split()[0] for line in done.stdout.splitlines() if line})
        return f"sinfo answers: partitions {', '.join(partitions) or 'none'}"


def missing_clients_error(missing: list[str]) -> InvalidRequest:
    return InvalidRequest(
        f"the Slurm client commands are not installed here ({', '.join(missing)} missing); "
        f"install them: {INSTALL_CLIENTS}"
    )
