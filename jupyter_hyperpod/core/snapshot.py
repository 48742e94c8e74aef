"""What a job ran: a content-addressed snapshot of its workdir, config and environment, taken
at submit, from which the job then runs (#24 item 1).

In a git repository the snapshot is the tracked files plus the untracked ones git does not
ignore, as they are on disk (so the uncommitted diff is in it, and kept as text too), with the
commit; elsewhere every file below the admin's size limit. A file over `reference_bytes` is
never copied: its directory (a model's or a data set's) is referenced by path, size and mtime,
and the snapshot's tree links to it. Objects live once in the partition under
`.hyperpod/snapshots/objects/` (named by their SHA-256); a job's tree under
`.hyperpod/snapshots/<job id>/tree/` is hard links to them (a copy where links fail), so an
edit of the workdir after submit changes nothing the job runs: its program and the code and
config files its arguments name are read from the tree (`run_from_snapshot`), while it starts
in its workdir, so its outputs land there. Removing a job's snapshot
removes the objects no other snapshot names.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .configs import resolved_configs
from .errors import InvalidRequest
from .freeze import FreezeCache
from .models import JobSnapshot, SnapshotReference
from .partition import Partition

SNAPSHOTS_DIR = ".hyperpod/snapshots"
OBJECTS = "objects"
MANIFEST = "manifest.json"
TREE = "tree"
SKIPPED = {".git", ".hyperpod", "__pycache__", ".ipynb_checkpoints"}
_CHUNK = 1 << 20
_DIGESTS_KEPT = 200_000
_RACY_NS = 2_000_000_000
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@dataclass
class _File:
    path: str  # relative to the workdir, POSIX
    source: Path
    size: int
    executable: bool


@dataclass
class _Plan:
    files: list[_File] = field(default_factory=list)
    referenced: list[SnapshotReference] = field(default_factory=list)
    commit: str | None = None
    dirty: bool = False
    diff: str = ""


def _git(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["git", "-C", str(workdir), *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as error:  # no git here: not a repository
        return subprocess.CompletedProcess(argv, 127, "", str(error))


#: Besides its program, what a job reads from its snapshot: the files its arguments name with
#: these extensions (code and config). Anything else an argument names (data, an output file
#: of the last run) stays the workdir's, so a job never writes into a snapshot.
FROZEN_SUFFIXES = (".py", ".sh", ".bash", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".conf")


def run_from_snapshot(command: Sequence[str], tree: Path, shown: str) -> list[str]:
    """`command` with its program, and each argument naming a code or config file of the
    snapshot, pointing into the snapshot's tree (`shown`: the tree as the cluster sees it).

    The job still starts in its workdir, so what it writes (relative outputs, checkpoints, a
    marker file) lands where the user looks; what it runs is what was submitted, and Python
    puts the program's own directory (the snapshot's) first on `sys.path`, so the modules
    beside it are the snapshot's too."""
    root = os.path.realpath(tree)

    def frozen(name: str, program: bool) -> str | None:
        if not name or name.startswith(("-", "/", "~")) or "\0" in name:
            return None
        relative = posixpath.normpath(name)
        if relative.startswith("../") or relative in ("..", "."):
            return None
        if not program and not relative.endswith(FROZEN_SUFFIXES):
            return None
        path = os.path.join(root, relative)
        # A link in the tree leads to a live entry (left out, or referenced): not frozen.
        if not os.path.isfile(path) or os.path.realpath(path) != os.path.normpath(path):
            return None
        return posixpath.join(shown, relative)

    argv = list(command)
    for index, item in enumerate(argv):
        key, equals, value = item.partition("=")
        if equals and key.startswith("--"):
            moved = frozen(value, program=False)
            if moved:
                argv[index] = f"{key}={moved}"
            continue
        moved = frozen(item, program=index == 0)
        if moved:
            argv[index] = moved
    return argv


class Snapshotter:
    """Takes, materializes and removes job snapshots in one partition."""

    def __init__(
        self,
        partition: Partition,
        *,
        max_bytes: int,
        reference_bytes: int,
        freeze: FreezeCache | None = None,
    ) -> None:
        """`max_bytes`: the most a snapshot may copy (the admin's limit); `reference_bytes`: a
        file this large is referenced with its directory, never copied."""
        self.partition = partition
        self.max_bytes = max_bytes
        self.reference_bytes = reference_bytes
        self.freeze = freeze or FreezeCache()
        # A file's digest by (device, inode, size, mtime): the next submit of the same workdir
        # reads only what changed (git's own stat heuristic).
        self._digests: dict[tuple[int, int, int, int], str] = {}

    @property
    def root(self) -> Path:
        return self.partition.root / SNAPSHOTS_DIR

    def tree(self, job_id: str) -> Path:
        return self.root / job_id / TREE

    # -- planning ----------------------------------------------------------------------
    def _git_plan(self, workdir: Path) -> _Plan | None:
        if not _in_repository(workdir):
            return None  # a few stats instead of a git process on every submit
        top = _git(workdir, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        listed = _git(workdir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        if listed.returncode != 0:
            return None
        plan = _Plan()
        head = _git(workdir, "rev-parse", "HEAD")
        plan.commit = head.stdout.strip() if head.returncode == 0 else None
        plan.dirty = bool(_git(workdir, "status", "--porcelain", "--", ".").stdout.strip())
        if plan.commit:
            plan.diff = _git(workdir, "diff", "HEAD", "--", ".").stdout
        big: dict[str, list[Path]] = {}
        for name in sorted(set(listed.stdout.split("\0")) - {""}):
            source = workdir / name
            try:
                info = source.lstat()
            except OSError:
                continue  # deleted in the work tree: not in what runs
            if not source.is_file() or source.is_symlink():
                continue
            if info.st_size >= self.reference_bytes:
                big.setdefault(os.path.dirname(name) or name, []).append(source)
                continue
            plan.files.append(_File(name, source, info.st_size, bool(info.st_mode & 0o111)))
        self._reference(plan, workdir, big)
        return plan

    def _walk_plan(self, workdir: Path) -> _Plan:
        plan = _Plan()
        big: dict[str, list[Path]] = {}
        for current, dirs, files in os.walk(workdir):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
            here = Path(current)
            relative = here.relative_to(workdir).as_posix()
            stats = [(name, (here / name).lstat()) for name in sorted(files)]
            large = [name for name, info in stats if info.st_size >= self.reference_bytes]
            if large and relative != ".":
                big[relative] = [here]
                dirs[:] = []
                continue
            for name, info in stats:
                rel = name if relative == "." else f"{relative}/{name}"
                if not (here / name).is_file() or (here / name).is_symlink():
                    continue
                if name in large:
                    big[rel] = [here / name]
                    continue
                plan.files.append(_File(rel, here / name, info.st_size, bool(info.st_mode & 0o111)))
        self._reference(plan, workdir, big)
        return plan

    def _reference(self, plan: _Plan, workdir: Path, big: dict[str, list[Path]]) -> None:
        for relative in sorted(big):
            target = workdir / relative
            size, mtime = 0, 0.0
            for path in _files_below(target):
                info = path.stat()
                size += info.st_size
                mtime = max(mtime, info.st_mtime)
            plan.referenced.append(
                SnapshotReference(path=self.partition.relative(target), size=size, mtime=mtime)
            )
        inside = [ref.path for ref in plan.referenced]
        plan.files = [
            item
            for item in plan.files
            if not any(
                self.partition.relative(workdir / item.path).startswith(prefix + "/")
                for prefix in inside
            )
        ]

    def _check_limit(self, plan: _Plan, workdir: Path) -> None:
        total = sum(item.size for item in plan.files)
        if total <= self.max_bytes:
            return
        largest = sorted(plan.files, key=lambda item: item.size, reverse=True)[:5]
        shown = ", ".join(f"{item.path} ({_mib(item.size)})" for item in largest)
        raise InvalidRequest(
            f"the workdir's snapshot would copy {_mib(total)}, over the limit of "
            f"{_mib(self.max_bytes)} (HyperPodApp.snapshot_max_bytes); the largest files: "
            f"{shown}. Move data and models into a directory of their own (a file of "
            f"{_mib(self.reference_bytes)} or more is referenced with its directory, not "
            "copied), or ask your admin to raise the limit",
            field="workdir",
        )

    # -- taking ------------------------------------------------------------------------
    def take(
        self,
        job_id: str,
        workdir: Path,
        *,
        spec: Mapping[str, Any],
        command: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        python: str | None = None,
    ) -> JobSnapshot:
        """Snapshot `workdir` for `job_id` (refused with a 400 over the limit, creating
        nothing) and materialize its tree; returns what the job record shows."""
        plan = self._git_plan(workdir) or self._walk_plan(workdir)
        self._check_limit(plan, workdir)
        configs = resolved_configs(command, workdir, self.partition, env or {})
        freeze = self.freeze.freeze(python) if python else None
        objects = self.root / OBJECTS
        objects.mkdir(parents=True, exist_ok=True)
        entries: dict[str, dict[str, Any]] = {}
        for item in plan.files:
            digest = self._store_file(item.source, item.executable)
            entries[item.path] = {"sha256": digest, "size": item.size, "x": item.executable}
        extras = {
            "diff": self._store_text(plan.diff) if plan.diff else None,
            "freeze": self._store_text(freeze) if freeze is not None else None,
            "configs": {name: self._store_text(text) for name, text in configs.items()},
        }
        home = self.root / job_id
        tree = home / TREE
        tree.mkdir(parents=True)
        for path, entry in entries.items():
            target = tree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            _link(self._object(entry["sha256"], entry["x"]), target)
        base = self.partition.relative(workdir)
        for ref in plan.referenced:
            link = tree / (posixpath.relpath(ref.path, base) if base else ref.path)
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                _symlink(self.partition.root / ref.path, link)
        # What the snapshot leaves out (git-ignored outputs, data, models) stays reachable
        # where the job looks for it: a link to the live entry.
        for live in workdir.iterdir():
            if live.name not in SKIPPED and not os.path.lexists(tree / live.name):
                _symlink(live, tree / live.name)
        snapshot = JobSnapshot(
            tree=f"{SNAPSHOTS_DIR}/{job_id}/{TREE}",
            workdir=self.partition.relative(workdir),
            commit=plan.commit,
            dirty=plan.dirty,
            files=len(entries),
            bytes=sum(item.size for item in plan.files),
            referenced=plan.referenced,
            configs=sorted(configs),
            freeze_sha256=extras["freeze"],
            diff_sha256=extras["diff"],
        )
        manifest = {
            "snapshot": snapshot.model_dump(mode="json"),
            "spec": dict(spec),
            "files": entries,
            "configs": extras["configs"],
        }
        (home / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        return snapshot

    def clone(self, source_id: str, job_id: str) -> JobSnapshot:
        """`job_id` runs exactly what `source_id` ran (a rerun): the same objects linked into a
        tree of its own, the same links to the referenced and left-out entries."""
        try:
            manifest = self.manifest(source_id)
        except (OSError, ValueError):
            raise InvalidRequest(
                f"job {source_id} has no snapshot to rerun (submitted before snapshots, or "
                "removed with its files): rerun it with your changes",
                field="job_id",
            ) from None
        source, tree = self.tree(source_id), self.tree(job_id)
        tree.mkdir(parents=True)
        for current, _dirs, files in os.walk(source):
            here = Path(current)
            target = tree / here.relative_to(source)
            target.mkdir(exist_ok=True)
            for name in files + [d for d in _dirs if (here / d).is_symlink()]:
                item = here / name
                if item.is_symlink():
                    (target / name).symlink_to(os.readlink(item))
                else:
                    _link(item, target / name)
        snapshot = JobSnapshot.model_validate(
            {**manifest["snapshot"], "tree": f"{SNAPSHOTS_DIR}/{job_id}/{TREE}"}
        )
        manifest["snapshot"] = snapshot.model_dump(mode="json")
        (self.root / job_id / MANIFEST).write_text(json.dumps(manifest, indent=1), "utf-8")
        return snapshot

    def manifest(self, job_id: str) -> dict[str, Any]:
        return json.loads((self.root / job_id / MANIFEST).read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def text(self, digest: str) -> str:
        return self._object(digest, False).read_text(encoding="utf-8")

    def read(self, digest: str, executable: bool = False) -> bytes:
        """A stored object's bytes (a file of a snapshot, by its manifest entry); a digest
        that is not a SHA-256 (a manifest edited by hand) is a ValueError."""
        if not _SHA256.fullmatch(digest):
            raise ValueError(f"not a SHA-256: {digest[:80]!r}")
        return self._object(digest, executable).read_bytes()

    def _object(self, digest: str, executable: bool) -> Path:
        return self.root / OBJECTS / digest[:2] / (digest + (".x" if executable else ""))

    def _store_file(self, source: Path, executable: bool) -> str:
        info = source.stat()
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        known = self._digests.get(key)
        if known and self._object(known, executable).exists():
            return known
        hasher = hashlib.sha256()
        with source.open("rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                hasher.update(chunk)
        digest = hasher.hexdigest()
        # Only a file older than the clock's granularity can be trusted by its stat (a same-
        # size rewrite within one mtime tick would look unchanged): git's "racy" rule.
        if time.time_ns() - info.st_mtime_ns > _RACY_NS:
            if len(self._digests) >= _DIGESTS_KEPT:
                self._digests.clear()
            self._digests[key] = digest
        target = self._object(digest, executable)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + f".{os.getpid()}.part")
            shutil.copyfile(source, partial)
            os.chmod(partial, 0o555 if executable else 0o444)
            os.replace(partial, target)
        return digest

    def _store_text(self, text: str) -> str:
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        target = self._object(digest, False)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + f".{os.getpid()}.part")
            partial.write_bytes(data)
            os.chmod(partial, 0o444)
            os.replace(partial, target)
        return digest

    # -- removing ----------------------------------------------------------------------
    def remove(self, job_id: str) -> int:
        """Remove `job_id`'s snapshot and the objects no other snapshot names; the number of
        objects removed."""
        home = self.root / job_id
        if not home.is_dir():
            return 0
        shutil.rmtree(home)
        kept: set[str] = set()
        for manifest in self.root.glob(f"*/{MANIFEST}"):
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return 0  # unreadable: keep every object rather than guess
            kept.update(_names_of(data))
        removed = 0
        for path in (self.root / OBJECTS).glob("*/*"):
            if path.name not in kept and not path.name.endswith(".part"):
                path.unlink()
                removed += 1
        return removed


def _names_of(data: dict[str, Any]) -> Iterator[str]:
    for entry in data.get("files", {}).values():
        yield entry["sha256"] + (".x" if entry.get("x") else "")
    snapshot = data.get("snapshot", {})
    for key in ("freeze_sha256", "diff_sha256"):
        if snapshot.get(key):
            yield snapshot[key]
    yield from data.get("configs", {}).values()


def _in_repository(workdir: Path) -> bool:
    """Whether git could find a repository for `workdir` (a `.git` in it or above it, or one
    named by GIT_DIR)."""
    if os.environ.get("GIT_DIR"):
        return True
    return any(os.path.lexists(place / ".git") for place in (workdir, *workdir.parents))


def _symlink(target: Path, link: Path) -> None:
    """A relative link: the cluster may mount the partition elsewhere than this server."""
    link.symlink_to(os.path.relpath(target, link.parent))


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _files_below(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for current, _dirs, files in os.walk(path):
        for name in files:
            yield Path(current) / name
