"""What Slurm says about jobs (squeue, `scontrol -o show job`, sacct) -> JobRecord."""

from __future__ import annotations

import re
import time
from collections.abc import Collection
from dataclasses import dataclass

from ...core.models import JobState

ACTIVE = {
    "PENDING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "CONFIGURING": JobState.RUNNING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SPECIAL_EXIT": JobState.RUNNING,
}
FINISHED = {
    "COMPLETED": JobState.SUCCEEDED,
    "CANCELLED": JobState.CANCELLED,
    "FAILED": JobState.FAILED,
    "TIMEOUT": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "DEADLINE": JobState.FAILED,
    "PREEMPTED": JobState.FAILED,
    "REVOKED": JobState.CANCELLED,
}
SHORT = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "CA": "CANCELLED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "CF": "CONFIGURING",
    "PR": "PREEMPTED",
    "S": "SUSPENDED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
}

SQUEUE_FORMAT = "%i|%T|%S|%e|%N|%r"
"""Job id, state, start, end, node list, reason (last: free text)."""
SACCT_FIELDS = "JobIDRaw,State,ExitCode,Start,End,NodeList,Reason"


@dataclass
class JobRecord:
    """One job as Slurm describes it; fields None when that source does not say."""

    slurm_id: str
    slurm_state: str
    reason: str | None = None
    start: float | None = None
    end: float | None = None
    nodes: str | None = None
    exit_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    gpus: dict[str, list[str]] | None = None
    """The GPU indices the job holds on each node (`scontrol -d`'s `GRES=gpu...(IDX:...)`)."""

    @property
    def state(self) -> JobState:
        return job_state(self.slurm_state)

    @property
    def finished(self) -> bool:
        return self.state.finished


def job_state(slurm_state: str) -> JobState:
    name = slurm_state.strip().split()[0].upper() if slurm_state.strip() else "PENDING"
    name = SHORT.get(name, name)
    if name in FINISHED:
        return FINISHED[name]
    return ACTIVE.get(name, JobState.RUNNING if name else JobState.PENDING)


def slurm_time(text: str | None) -> float | None:
    """Slurm's local ISO time ('2026-11-30T19:10:11') -> epoch seconds; N/A, Unknown -> None."""
    if not text or not re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", text):
        return None
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))


def exit_code(text: str | None) -> int | None:
    """'3:0' (code:signal) -> 3; '0:9' -> 137 like a shell reports a signal."""
    if not text:
        return None
    match = re.match(r"(\d+):(\d+)", text.strip())
    if not match:
        return None
    code, signal = int(match.group(1)), int(match.group(2))
    return 128 + signal if signal and not code else code


def _reason(text: str | None) -> str | None:
    text = (text or "").strip()
    return None if text in ("", "None", "(null)", "none") else text


def _path(text: str | None) -> str | None:
    """scontrol expands %j, %u... in StdOut but shows an escaped '%' still doubled."""
    text = _reason(text)
    return text.replace("%%", "%") if text else None


def parse_squeue(text: str) -> dict[str, JobRecord]:
    records = {}
    for line in text.splitlines():
        parts = line.split("|", 5)
        if len(parts) < 6 or not parts[0].strip():
            continue
        slurm_id, state, start, end, nodes, reason = (part.strip() for part in parts)
        records[slurm_id] = JobRecord(
            slurm_id=slurm_id,
            slurm_state=state,
            reason=_reason(reason),
            start=slurm_time(start),
            end=slurm_time(end) if job_state(state).finished else None,
            nodes=nodes or None,
        )
    return records


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z/:_]*)=")


def parse_scontrol_line(line: str) -> dict[str, str]:
    """One `scontrol -o show job` line -> {key: value}; values may contain spaces."""
    fields: dict[str, str] = {}
    matches = list(_FIELD.finditer(line))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def parse_scontrol_jobs(text: str, wanted: Collection[str] | None = None) -> dict[str, JobRecord]:
    """`scontrol -o -d show job` lines -> records; only the jobs in `wanted` when given. Without
    a job id scontrol shows every job the controller holds (MinJobAge keeps ended ones, 300 s by
    default): only ours are worth parsing."""
    records = {}
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        if wanted is not None and line[6:].split(" ", 1)[0] not in wanted:
            continue
        fields = parse_scontrol_line(line)
        slurm_id = fields.get("JobId", "")
        state = fields.get("JobState", "")
        records[slurm_id] = JobRecord(
            slurm_id=slurm_id,
            slurm_state=state,
            reason=_reason(fields.get("Reason")),
            start=slurm_time(fields.get("StartTime")),
            end=slurm_time(fields.get("EndTime")) if job_state(state).finished else None,
            nodes=_reason(fields.get("NodeList")),
            exit_code=exit_code(fields.get("ExitCode")) if job_state(state).finished else None,
            stdout=_path(fields.get("StdOut")),
            stderr=_path(fields.get("StdErr")),
            gpus=gpu_indices(line) or None,
        )
    return records


# `scontrol -o -d show job` (Slurm 22.05+): one group per set of nodes with the same allocation,
# 'Nodes=node[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu:a100:2(IDX:0-1)' (Slurm's src/api/job_info.c,
# _sprint_job_info: "  Nodes=%s CPU_IDs=%s Mem=%"PRIu64" GRES=%s" with the node's
# gres_detail_str); the indices are the GPUs' minor numbers on the node,
# which is the `gpu` label of the DCGM exporter's series.
_GROUP = re.compile(r"(?:^|\s)Nodes=(\S+)\s+CPU_IDs=\S*\s+Mem=\S*\s+GRES=(\S*)")
_GPU_IDX = re.compile(r"(?:^|,)gpu(?::[^:(,]+)*:\d+\(IDX:([^)]*)\)")


def gpu_indices(line: str) -> dict[str, list[str]]:
    """The GPU indices per node in one `scontrol -o -d show job` line: {node: ['0', '1']}."""
    found: dict[str, list[str]] = {}
    for group in _GROUP.finditer(line):
        indices: list[str] = []
        for match in _GPU_IDX.finditer(group.group(2)):
            indices += _expand_indices(match.group(1))
        if indices:
            for node in expand_hostlist(group.group(1)):
                found.setdefault(node, []).extend(indices)
    return found


def _expand_indices(text: str) -> list[str]:
    """'0-1,3' -> ['0', '1', '3']; 'N/A' -> []."""
    indices: list[str] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit():
            continue
        stop = int(high) if high.isdigit() else int(low)
        indices += [str(number) for number in range(int(low), stop + 1)]
    return indices


def parse_sacct(text: str) -> dict[str, JobRecord]:
    """`sacct -X -n -P -o SACCT_FIELDS` rows."""
    records = {}
    for line in text.splitlines():
        parts = line.split("|", 6)
        if len(parts) < 7 or not parts[0].strip():
            continue
        slurm_id, state, code, start, end, nodes, reason = (part.strip() for part in parts)
        records[slurm_id] = JobRecord(
            slurm_id=slurm_id,
            slurm_state=state,
            reason=_reason(reason),
            start=slurm_time(start),
            end=slurm_time(end),
            nodes=None if nodes in ("", "None assigned") else nodes,
            exit_code=exit_code(code) if job_state(state).finished else None,
        )
    return records


def expand_hostlist(text: str | None) -> list[str]:
    """Host list 'node[1-3,7],gpu-[01-02]' -> names, without `scontrol show hostnames`."""
    if not text:
        return []
    hosts: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        hosts.extend(_expand_one(item.strip()))
    return hosts


def _expand_one(item: str) -> list[str]:
    match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", item)
    if not match:
        return [item] if item else []
    prefix, ranges, rest = match.groups()
    names = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if high:
            width = len(low)
            names += [f"{prefix}{number:0{width}d}" for number in range(int(low), int(high) + 1)]
        else:
            names.append(f"{prefix}{low}")
    return [name + tail for name in names for tail in _expand_one(rest) or [""]]
