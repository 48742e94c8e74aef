"""Jobs side by side (#24 item 2), from their stored records and snapshots: `diff` says what
differs between two jobs (spec, resolved configs, code files by SHA-256 with a unified diff of
the text ones, the cluster interpreter's packages), `compare` puts two or more next to each
other (state, duration, the values that set them apart, each metric's last point).

A job without a snapshot (submitted before #24, or its files removed) is compared on what it
has, with a note saying what is missing; nothing here raises for it.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from .errors import HyperPodError, InvalidRequest
from .models import (
    CodeDiff,
    CodeFileChange,
    CodeSide,
    ComparedJob,
    ConfigChange,
    EnvironmentDiff,
    Job,
    JobComparison,
    JobDiff,
    JobMetrics,
    JobSnapshot,
    PackageChange,
    ValueChange,
)

MAX_COMPARED = 10
"""The most jobs one comparison takes."""
MAX_DIFF_FILE = 256 * 1024
"""A file larger than this (either side) is compared by its SHA-256 only."""
MAX_DIFF_TEXT = 1 << 20
"""The most unified-diff text one JobDiff carries (code files together); the rest by SHA-256."""
MAX_FILE_CHANGES = 1000
"""The most changed files one JobDiff lists; the rest are counted in a note."""


class SnapshotStore(Protocol):
    """What the comparison reads of the snapshots (`core/snapshot.Snapshotter`)."""

    def manifest(self, job_id: str) -> dict[str, Any]: ...

    def read(self, digest: str, executable: bool = False) -> bytes: ...


@dataclass
class _Side:
    """One job and what its snapshot holds (empty where it has none)."""

    job: Job
    files: dict[str, dict[str, Any]]
    configs: dict[str, str]  # name -> resolved YAML text
    freeze: str | None
    missing: str | None  # why there is no snapshot to read


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; lists and scalars are leaves, an empty mapping is
    nothing (so `env: {}` and `env: {LR: ...}` differ in `env.LR`)."""
    if isinstance(value, Mapping):
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return found
    return {prefix: value}


def changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ValueChange]:
    """The keys whose values differ (absent on one side: null there), in key order."""
    return [
        ValueChange(field=key, a=a.get(key), b=b.get(key))
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key) or (key in a) != (key in b)
    ]


def unified(a: str, b: str, a_name: str, b_name: str) -> str:
    lines = difflib.unified_diff(
        a.splitlines(), b.splitlines(), fromfile=a_name, tofile=b_name, lineterm=""
    )
    return "".join(line + "\n" for line in lines)


def _yaml_values(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return flatten(data) if isinstance(data, Mapping) else {}


_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def freeze_packages(text: str) -> dict[str, tuple[str, str]]:
    """pip freeze lines by normalized name (PEP 503): (the name as written, its version or
    requirement)."""
    found: dict[str, tuple[str, str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-e "):
            egg = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
            name, version = (egg.group(1) if egg else line), line
        elif "==" in line:
            name, _, version = line.partition("==")
        elif " @ " in line:
            name, _, version = line.partition(" @ ")
        else:
            match = _NAME.match(line)
            name, version = (match.group(1) if match else line), line
        name = name.strip()
        found[re.sub(r"[-_.]+", "-", name).lower()] = (name, version.strip())
    return found


class JobComparer:
    """Compares the user's jobs: `job` and `metrics` are the service's reads (a NotFound for
    an unknown id), `snapshots` the partition's snapshot store."""

    def __init__(
        self,
        job: Callable[[str], Job],
        metrics: Callable[[str], JobMetrics],
        snapshots: SnapshotStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._job = job
        self._metrics = metrics
        self._snapshots = snapshots
        self._clock = clock

    # -- reading ---------------------------------------------------------------------------
    def _side(self, job_id: str) -> _Side:
        job = self._job(job_id)
        if job.snapshot is None:
            why = "it was submitted before snapshots"
            return _Side(job, {}, {}, None, why)
        try:
            manifest = self._snapshots.manifest(job.id)
            files = {
                str(path): entry
                for path, entry in manifest.get("files", {}).items()
                if _entry_ok(entry)  # a manifest edited by hand: its odd entries left out
            }
            configs = {
                str(name): self._snapshots.read(digest).decode("utf-8")
                for name, digest in manifest.get("configs", {}).items()
            }
        except (OSError, ValueError, AttributeError, TypeError):
            why = "its snapshot was removed or cannot be read"
            return _Side(job, {}, {}, None, why)
        freeze = None
        if job.snapshot.freeze_sha256:
            try:
                freeze = self._snapshots.read(job.snapshot.freeze_sha256).decode("utf-8")
            except (OSError, ValueError):
                freeze = None
        return _Side(job, files, configs, freeze, None)

    def _file_text(self, entry: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(the file's text, None) or (None, why it is not shown)."""
        if int(entry.get("size", 0)) > MAX_DIFF_FILE:
            return None, f"over {MAX_DIFF_FILE // 1024} KiB: compared by SHA-256 only"
        try:
            data = self._snapshots.read(str(entry["sha256"]), bool(entry.get("x")))
        except (OSError, ValueError, KeyError):
            return None, "its stored copy cannot be read"
        if b"\0" in data:
            return None, "binary"
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "binary"

    # -- two jobs --------------------------------------------------------------------------
    def diff(self, a_id: str, b_id: str) -> JobDiff:
        a, b = self._side(a_id), self._side(b_id)
        notes = [
            f"job {side.job.id} has no snapshot ({side.missing}): its code, configs and "
            "environment are not compared"
            for side in (a, b)
            if side.missing
        ]
        spec = changes(
            flatten(a.job.spec.model_dump(mode="json")), flatten(b.job.spec.model_dump(mode="json"))
        )
        both = not a.missing and not b.missing
        return JobDiff(
            a=a.job.id,
            b=b.job.id,
            spec=spec,
            configs=self._configs(a, b) if both else [],
            code=self._code(a, b, notes) if both else CodeDiff(a=_code_side(a), b=_code_side(b)),
            environment=self._environment(a, b, notes),
            notes=notes,
        )

    def _configs(self, a: _Side, b: _Side) -> list[ConfigChange]:
        found = []
        for name in sorted(set(a.configs) | set(b.configs)):
            old, new = a.configs.get(name), b.configs.get(name)
            if old == new:
                continue
            status = "added" if old is None else "removed" if new is None else "changed"
            found.append(
                ConfigChange(
                    name=name,
                    status=status,
                    values=changes(_yaml_values(old or ""), _yaml_values(new or "")),
                    diff=unified(old or "", new or "", f"{a.job.id}/{name}", f"{b.job.id}/{name}"),
                )
            )
        return found

    def _code(self, a: _Side, b: _Side, notes: list[str]) -> CodeDiff:
        files: list[CodeFileChange] = []
        unchanged = more = 0
        budget = MAX_DIFF_TEXT
        for path in sorted(set(a.files) | set(b.files)):
            old, new = a.files.get(path), b.files.get(path)
            if old and new and old.get("sha256") == new.get("sha256"):
                unchanged += 1
                continue
            status = "added" if old is None else "removed" if new is None else "changed"
            change = CodeFileChange(
                path=path,
                status=status,
                a_sha256=old and old.get("sha256"),
                b_sha256=new and new.get("sha256"),
                a_size=old and old.get("size"),
                b_size=new and new.get("size"),
            )
            if len(files) >= MAX_FILE_CHANGES:
                more += 1
                continue
            if budget <= 0:
                change.note = "the diff's size limit is reached: compared by SHA-256 only"
            else:
                texts = [self._file_text(entry) if entry else ("", None) for entry in (old, new)]
                change.note = texts[0][1] or texts[1][1]
                if not change.note:
                    change.diff = unified(
                        texts[0][0] or "",
                        texts[1][0] or "",
                        f"{a.job.id}/{path}",
                        f"{b.job.id}/{path}",
                    )
                    budget -= len(change.diff)
            files.append(change)
        if budget <= 0:
            notes.append(f"the code diff stops at {MAX_DIFF_TEXT >> 20} MiB of text")
        if more:
            notes.append(f"{more} more files differ than the {MAX_FILE_CHANGES} listed")
        return CodeDiff(a=_code_side(a), b=_code_side(b), files=files, unchanged=unchanged)

    def _environment(self, a: _Side, b: _Side, notes: list[str]) -> EnvironmentDiff:
        digests = [
            side.job.snapshot.freeze_sha256 if side.job.snapshot else None for side in (a, b)
        ]
        for side in (a, b):
            if not side.missing and side.freeze is None:
                notes.append(
                    f"job {side.job.id}'s packages are unknown (the cluster's interpreter was "
                    "not found at submit): its environment is not compared"
                )
        if a.freeze is None or b.freeze is None:
            return EnvironmentDiff(a_sha256=digests[0], b_sha256=digests[1], same=False)
        old, new = freeze_packages(a.freeze), freeze_packages(b.freeze)
        packages = []
        for key in sorted(set(old) | set(new)):
            before, after = old.get(key), new.get(key)
            if before and after and before[1] == after[1]:
                continue
            status = "added" if before is None else "removed" if after is None else "changed"
            packages.append(
                PackageChange(
                    name=(after or before or (key, ""))[0],
                    status=status,
                    a=before[1] if before else None,
                    b=after[1] if after else None,
                )
            )
        return EnvironmentDiff(
            a_sha256=digests[0], b_sha256=digests[1], same=not packages, packages=packages
        )

    # -- two or more -----------------------------------------------------------------------
    def compare(self, ids: Sequence[str]) -> JobComparison:
        wanted = _checked_ids(ids)
        sides = [self._side(job_id) for job_id in wanted]
        notes = [
            f"job {side.job.id} has no snapshot ({side.missing}): its config values are not "
            "compared"
            for side in sides
            if side.missing
        ]
        values = [_values_of(side) for side in sides]
        keys = set().union(*values) - {"name"}
        differing = sorted(key for key in keys if len({_key(v.get(key)) for v in values}) > 1)
        jobs = [
            self._compared(side, {key: mine.get(key) for key in differing})
            for side, mine in zip(sides, values, strict=True)
        ]
        metrics = sorted(set().union(*(job.final_metrics for job in jobs)))
        return JobComparison(jobs=jobs, differing=differing, metrics=metrics, notes=notes)

    def _compared(self, side: _Side, values: dict[str, Any]) -> ComparedJob:
        job = side.job
        try:
            found = self._metrics(job.id)
        except HyperPodError as error:  # another cluster's job, MLflow refusing: no metrics
            found = JobMetrics(message=error.message)
        final = {
            name: max(points, key=lambda p: (p.step, p.timestamp))
            for name, points in found.metrics.items()
            if points
        }
        end = job.ended if job.ended is not None else None if job.state.finished else self._clock()
        snapshot: JobSnapshot | None = job.snapshot
        return ComparedJob(
            id=job.id,
            name=job.name,
            state=job.state,
            created=job.created,
            duration=max(0.0, end - job.started) if job.started and end else None,
            exit_code=job.exit_code,
            commit=snapshot.commit if snapshot else None,
            dirty=snapshot.dirty if snapshot else False,
            values=values,
            final_metrics=final,
            evaluation=found.evaluation,
            metrics_message=found.message if not final else None,
        )


def _checked_ids(ids: Iterable[str]) -> list[str]:
    wanted = [item.strip() for item in ids if item and item.strip()]
    if len(wanted) < 2:
        raise InvalidRequest(
            f"compare needs 2 to {MAX_COMPARED} job ids (got {len(wanted)}): ids=ID1,ID2,...",
            field="ids",
        )
    if len(wanted) > MAX_COMPARED:
        raise InvalidRequest(
            f"compare takes at most {MAX_COMPARED} jobs at once (got {len(wanted)})",
            field="ids",
        )
    twice = sorted({item for item in wanted if wanted.count(item) > 1})
    if twice:
        raise InvalidRequest(f"job ids named twice: {', '.join(twice)}", field="ids")
    return wanted


def _entry_ok(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("sha256"), str)
        and isinstance(entry.get("size"), int)
        and isinstance(entry.get("x", False), bool)
    )


def _values_of(side: _Side) -> dict[str, Any]:
    """The spec's fields and every resolved config value ('train.yaml:lora.r')."""
    found = flatten(side.job.spec.model_dump(mode="json"))
    for name, text in side.configs.items():
        found.update({f"{name}:{key}": value for key, value in _yaml_values(text).items()})
    return found


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _code_side(side: _Side) -> CodeSide | None:
    snapshot = side.job.snapshot
    if snapshot is None:
        return None
    return CodeSide(
        commit=snapshot.commit, dirty=snapshot.dirty, files=snapshot.files, bytes=snapshot.bytes
    )


__all__ = ["MAX_COMPARED", "JobComparer", "SnapshotStore", "freeze_packages"]
