"""Per-user partitions, as the seed's CloudFormation Lambda makes them: `/<user profile>` on the FSx
volume, owned by the POSIX user the user's IDE and jobs run as, mode 0700, and associated with the
Studio user profile through its custom file system config (`FSxLustreFileSystemConfig` with that
`FileSystemPath`).

`inspect` reports every partition (every user profile of the domain, or every directory under the
root); `plan` says what `create` (missing ones) or `repair` (also wrong owner, mode or association)
would do; `apply` does it, idempotently.

Ownership defaults to Studio's default user as the file system sees it. What AWS documents:
- inside a Studio JupyterLab (or Code Editor) space the run-as user is `sagemaker-user`, uid 1000,
  gid 100 ("Custom image specifications": "UID=1000 is a supported value", "GID=100 is a supported
  value", "The IDs are remapped to prevent a process running in the container from having more
  privileges than necessary"; the API's FileSystemConfig also defaults DefaultUid 1000,
  DefaultGid 100). Studio Classic ran its KernelGateway apps as root (0), its JupyterServer as
  sagemaker-user (1000) ("Access control and SageMaker Studio notebooks").
- those container ids are remapped on the instance: "The range of user IDs (0 - 65535) in the
  container are mapped to non-privileged user IDs above 65535 on the instance. For example,
  sagemaker-user (1000) inside the container might map to user (200001) on the instance" (same
  page, "User remapping"). The FSx client is the instance's kernel, so the file system records the
  remapped uid: 200001, AWS's example, is the default here, not 1000.
- a profile's or the domain's `CustomPosixUserConfig` (Uid >= 10000, Gid >= 1001) is "the POSIX
  identity that is used for file system operations": it wins where set.
AWS documents no remapped gid. 1001 is the default group: the smallest Gid CustomPosixUserConfig
accepts; with mode 0700 the group grants nothing (it only matters to `--acl` entries or a looser
mode). `--uid`/`--gid` change both defaults.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..aws.calls import call, paginate
from ..core.errors import InvalidRequest, NotFound

SAGEMAKER_USER_UID = 1000
"""Studio's run-as user `sagemaker-user` inside the space's container (documented)."""
SAGEMAKER_USER_GID = 100
STUDIO_UID = 200001
"""The same user as the file system sees it: AWS's example of the remapped id."""
STUDIO_GID = 1001
"""No remapped gid is documented: CustomPosixUserConfig's smallest Gid."""
MODE = 0o700
PROFILE_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # SageMaker UserProfileName
ActionKind = Literal["mkdir", "chown", "chmod", "acl", "associate"]


@dataclass
class PartitionState:
    user: str
    path: str
    """Where the partition is on this machine."""
    fsx_path: str
    """The same directory as the file system's path (`FileSystemPath`), e.g. `/alice`."""
    exists: bool = False
    uid: int | None = None
    gid: int | None = None
    mode: str | None = None
    want_uid: int = STUDIO_UID
    want_gid: int = STUDIO_GID
    profile: bool = False
    """A Studio user profile of the domain (else a directory found under the root)."""
    associated: bool | None = None
    """The profile's file system config names this file system and path; None: no domain."""
    profile_fsx_path: str | None = None
    acl_missing: list[str] = field(default_factory=list)
    """ACL entries the admin asked for that the directory lacks (getfacl's numeric form)."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass
class Action:
    user: str
    kind: ActionKind
    detail: str
    command: str
    """The same step as a shell or AWS CLI command (what a dry run prints)."""
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class StudioDomain:
    """The user profiles of one Studio domain and their FSx configs (boto3 SageMaker)."""

    page_size = 100  # ListUserProfiles' MaxResults: 1-100

    def __init__(self, sagemaker: Any, domain_id: str, fsx_id: str | None = None) -> None:
        self.client = sagemaker
        self.domain_id = domain_id
        domain = call(sagemaker, "describe_domain", DomainId=domain_id)
        self.default_settings = domain.get("DefaultUserSettings") or {}
        self.fsx_id = fsx_id or _fsx_id(self.default_settings)
        if not self.fsx_id:
            raise InvalidRequest(
                f"domain {domain_id} names no FSx for Lustre file system: pass --fsx-id",
                field="fsx_id",
            )

    def profiles(self) -> list[dict[str, Any]]:
        """Every user profile, described (ListUserProfiles, then DescribeUserProfile each)."""
        found = paginate(
            self.client,
            "list_user_profiles",
            "UserProfiles",
            DomainIdEquals=self.domain_id,
            MaxResults=self.page_size,
        )
        return [
            call(
                self.client,
                "describe_user_profile",
                DomainId=self.domain_id,
                UserProfileName=item["UserProfileName"],
            )
            for item in found
        ]

    def fsx_path_of(self, profile: dict[str, Any]) -> str | None:
        for config in _configs(profile):
            lustre = config.get("FSxLustreFileSystemConfig") or {}
            if lustre.get("FileSystemId") == self.fsx_id:
                return str(lustre.get("FileSystemPath") or "/")
        return None

    def owner_of(self, profile: dict[str, Any], default: tuple[int, int]) -> tuple[int, int]:
        for settings in (profile.get("UserSettings") or {}, self.default_settings):
            posix = settings.get("CustomPosixUserConfig") or {}
            if posix.get("Uid") is not None and posix.get("Gid") is not None:
                return int(posix["Uid"]), int(posix["Gid"])
        return default

    def associate(self, profile: dict[str, Any], fsx_path: str) -> None:
        """UpdateUserProfile with this file system at fsx_path; the profile's other custom file
        systems are kept (the list is replaced as a whole: UserSettings.CustomFileSystemConfigs)."""
        others = [
            config
            for config in _configs(profile)
            if (config.get("FSxLustreFileSystemConfig") or {}).get("FileSystemId") != self.fsx_id
        ]
        mine = {
            "FSxLustreFileSystemConfig": {"FileSystemId": self.fsx_id, "FileSystemPath": fsx_path}
        }
        call(
            self.client,
            "update_user_profile",
            DomainId=self.domain_id,
            UserProfileName=profile["UserProfileName"],
            UserSettings={"CustomFileSystemConfigs": [*others, mine]},
        )

    def associate_command(self, user: str, fsx_path: str) -> str:
        settings = (
            '{"CustomFileSystemConfigs":[{"FSxLustreFileSystemConfig":'
            f'{{"FileSystemId":"{self.fsx_id}","FileSystemPath":"{fsx_path}"}}}}]}}'
        )
        return (
            f"aws sagemaker update-user-profile --domain-id {self.domain_id} "
            f"--user-profile-name {shlex.quote(user)} --user-settings {shlex.quote(settings)}"
        )


def _configs(profile: dict[str, Any]) -> list[dict[str, Any]]:
    return list((profile.get("UserSettings") or {}).get("CustomFileSystemConfigs") or [])


def _fsx_id(settings: dict[str, Any]) -> str | None:
    for config in settings.get("CustomFileSystemConfigs") or []:
        found = (config.get("FSxLustreFileSystemConfig") or {}).get("FileSystemId")
        if found:
            return str(found)
    return None


class PartitionAdmin:
    def __init__(
        self,
        root: Path,
        *,
        uid: int = STUDIO_UID,
        gid: int = STUDIO_GID,
        mode: int = MODE,
        domain: StudioDomain | None = None,
        acl: list[str] | None = None,
    ) -> None:
        self.root = root
        self.uid, self.gid, self.mode = uid, gid, mode
        self.domain = domain
        self.acl = [normalize_acl(entry) for entry in acl or []]
        """POSIX ACL entries to add (access and default), e.g. group:1001:r-x."""
        self._profiles: dict[str, dict[str, Any]] = {}

    # -- what is there ----------------------------------------------------------------------
    def inspect(self, users: list[str] | None = None) -> list[PartitionState]:
        if not self.root.is_dir():
            raise NotFound(f"the file system root {self.root} is not a directory", field="root")
        states: list[PartitionState] = []
        if self.domain is not None:
            self._profiles = {p["UserProfileName"]: p for p in self.domain.profiles()}
            for name, profile in sorted(self._profiles.items()):
                if users and name not in users:
                    continue
                current = self.domain.fsx_path_of(profile)
                fsx_path = current if current and current != "/" else f"/{name}"
                uid, gid = self.domain.owner_of(profile, (self.uid, self.gid))
                state = self._state(name, fsx_path, uid, gid)
                state.profile = True
                state.profile_fsx_path = current
                state.associated = current == fsx_path
                if current is None:
                    state.problems.append(
                        f"the profile is not associated with {self.domain.fsx_id}"
                    )
                elif current == "/":
                    state.problems.append("the profile sees the whole file system, not a partition")
                states.append(state)
            unknown = sorted(set(users or []) - set(self._profiles))
            if unknown:
                raise NotFound(
                    f"no user profile {', '.join(unknown)} in domain {self.domain.domain_id}",
                    field="user",
                )
            return states
        names = set(users or [])
        if not users:
            names = {
                entry.name
                for entry in os.scandir(self.root)
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
            }
        for name in sorted(names):
            if users:
                check_name(name)
            states.append(self._state(name, f"/{name}", self.uid, self.gid))
        return states

    def _state(self, user: str, fsx_path: str, uid: int, gid: int) -> PartitionState:
        path = self.root / fsx_path.lstrip("/")
        state = PartitionState(
            user=user, path=str(path), fsx_path=fsx_path, want_uid=uid, want_gid=gid
        )
        try:
            info = path.lstat()
        except FileNotFoundError:
            state.problems.append("missing")
            return state
        if not stat.S_ISDIR(info.st_mode):
            state.problems.append("not a directory (a file or a symlink is in its place)")
            return state
        state.exists = True
        state.uid, state.gid = info.st_uid, info.st_gid
        state.mode = f"{stat.S_IMODE(info.st_mode):04o}"
        if (info.st_uid, info.st_gid) != (uid, gid):
            state.problems.append(f"owned by {info.st_uid}:{info.st_gid}, not {uid}:{gid}")
        if not self._mode_ok(stat.S_IMODE(info.st_mode)):
            wanted = f"{self.mode:04o}" + (" (group bits: the ACL mask)" if self.acl else "")
            state.problems.append(f"mode {state.mode}, not {wanted}")
        if self.acl:
            present = read_acl(path)
            state.acl_missing = [
                entry
                for entry in [*self.acl, *(f"default:{e}" for e in self.acl)]
                if entry not in present
            ]
            if state.acl_missing:
                state.problems.append(f"ACL lacks {', '.join(state.acl_missing)}")
        return state

    def _mode_ok(self, mode: int) -> bool:
        """Exactly the mode; with ACLs the group bits are the ACL mask (setfacl sets them)."""
        if self.acl:
            return mode & ~0o070 == self.mode & ~0o070
        return mode == self.mode

    # -- what to do -------------------------------------------------------------------------
    def plan(self, states: list[PartitionState], *, repair: bool) -> list[Action]:
        """`create`: make what is missing and associate it; `repair`: also fix the owner, the
        mode and the association of partitions that exist."""
        actions: list[Action] = []
        for state in states:
            path = shlex.quote(state.path)
            owner = f"{state.want_uid}:{state.want_gid}"
            if any(p.startswith("not a directory") for p in state.problems):
                continue  # never remove what is in the way: the report says it
            if not state.exists:
                actions.append(
                    Action(
                        state.user,
                        "mkdir",
                        f"create {state.path}",
                        f"mkdir -m {self.mode:04o} {path}",
                    )
                )
                actions.append(
                    Action(state.user, "chown", f"owner {owner}", f"chown {owner} {path}")
                )
            elif repair:
                if (state.uid, state.gid) != (state.want_uid, state.want_gid):
                    actions.append(
                        Action(
                            state.user,
                            "chown",
                            f"owner {state.uid}:{state.gid} -> {owner}",
                            f"chown {owner} {path}",
                        )
                    )
                if state.mode is not None and not self._mode_ok(int(state.mode, 8)):
                    actions.append(
                        Action(
                            state.user,
                            "chmod",
                            f"mode {state.mode} -> {self.mode:04o}",
                            f"chmod {self._chmod_text()} {path}",
                        )
                    )
            missing = (
                self.acl
                if not state.exists
                else [e.removeprefix("default:") for e in state.acl_missing]
            )
            if self.acl and missing and (not state.exists or repair):
                spec = ",".join(dict.fromkeys(x for e in missing for x in (e, f"d:{e}")))
                actions.append(
                    Action(state.user, "acl", f"ACL {spec}", f"setfacl -m {spec} {path}")
                )
            # create: associate profiles that have no config for this file system; repair: also
            # those that see the whole file system instead of their partition.
            unassociated = state.profile and not state.associated
            if (
                self.domain is not None
                and unassociated
                and (state.profile_fsx_path is None or repair)
            ):
                actions.append(
                    Action(
                        state.user,
                        "associate",
                        f"profile -> {self.domain.fsx_id}:{state.fsx_path}",
                        self.domain.associate_command(state.user, state.fsx_path),
                    )
                )
        return actions

    def apply(self, actions: list[Action], states: list[PartitionState]) -> list[Action]:
        by_user = {state.user: state for state in states}
        for action in actions:
            state = by_user[action.user]
            path = Path(state.path)
            if action.kind == "mkdir":
                path.mkdir(mode=self.mode, exist_ok=True)
                os.chmod(path, self.mode)  # mkdir's mode is masked by the umask
            elif action.kind == "chown":
                os.chown(path, state.want_uid, state.want_gid, follow_symlinks=False)
            elif action.kind == "chmod":
                os.chmod(path, self._new_mode(path))
            elif action.kind == "acl":
                spec = action.command.split()[2]
                subprocess.run(["setfacl", "-m", spec, str(path)], check=True, capture_output=True)
            elif action.kind == "associate":
                assert self.domain is not None
                self.domain.associate(self._profiles[state.user], state.fsx_path)
            action.done = True
        return actions

    def _chmod_text(self) -> str:
        return "u=rwx,o=" if self.acl else f"{self.mode:04o}"

    def _new_mode(self, path: Path) -> int:
        """The mode to set; with ACLs the group bits (the mask) stay as setfacl made them."""
        if not self.acl:
            return self.mode
        return (stat.S_IMODE(path.stat().st_mode) & 0o070) | (self.mode & ~0o070)


PERMS = re.compile(r"^[rwx-]{1,3}$")


def normalize_acl(entry: str) -> str:
    """`g:admins:rx` -> `group:<gid>:r-x` (getfacl -n's form); users and groups by name or id."""
    import grp
    import pwd

    parts = entry.split(":")
    if len(parts) != 3 or parts[0] not in ("u", "user", "g", "group") or not parts[1]:
        raise InvalidRequest(
            f"ACL entry {entry!r}: use u:USER:PERMS or g:GROUP:PERMS (e.g. g:admins:rx)",
            field="acl",
        )
    kind = "user" if parts[0] in ("u", "user") else "group"
    who, perms = parts[1], parts[2]
    if not who.isdigit():
        try:
            who = str(pwd.getpwnam(who).pw_uid if kind == "user" else grp.getgrnam(who).gr_gid)
        except KeyError:
            raise InvalidRequest(f"ACL entry {entry!r}: no {kind} {who!r}", field="acl") from None
    if not PERMS.match(perms) or len(set(perms) - {"-"}) != len(perms.replace("-", "")):
        raise InvalidRequest(f"ACL entry {entry!r}: permissions are r, w, x", field="acl")
    text = "".join(c if c in perms else "-" for c in "rwx")
    return f"{kind}:{who}:{text}"


def read_acl(path: Path) -> set[str]:
    """The named entries of a directory's access and default ACLs (`getfacl -n`)."""
    try:
        done = subprocess.run(
            ["getfacl", "--omit-header", "--absolute-names", "-n", str(path)],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise InvalidRequest(
            f"cannot read the ACL of {path} ({error}): install the acl tools", field="acl"
        ) from None
    found = set()
    for line in done.stdout.splitlines():
        entry = line.split("#", 1)[0].strip()
        prefix, _, rest = entry.partition(":") if entry.startswith("default:") else ("", "", entry)
        kind, _, tail = rest.partition(":")
        who = tail.split(":", 1)[0]
        if kind in ("user", "group") and who:
            found.add(f"{'default:' if prefix else ''}{rest}")
    return found


def check_name(name: str) -> str:
    if not PROFILE_NAME.match(name):
        raise InvalidRequest(
            f"{name!r} is not a user profile name (letters, digits and '-', at most 63)",
            field="user",
        )
    return name
