"""The Slurm queue from ONE `squeue --json` (every user's jobs, accounting off or on), and adopting
a job of the user's that was submitted with `sbatch` elsewhere.

Facts from Slurm 22.05 (Debian's slurm-wlm, checked on the test cluster): `squeue --json` ignores
its filter options (-j, -u, -t) and returns every job slurmctld holds, finished ones included
until MinJobAge; times are epoch seconds; `standard_output` keeps its %-patterns unexpanded
(`scontrol show job` expands them); `gres_detail` lists the GPUs a running job holds per node
('gpu:fake:2(IDX:0-1)'); `tres_per_node` ('gres:gpu:2') what it asked for. Newer Slurm (23.02+)
wraps numbers as {"set", "infinite", "number"} and job_state as a list: both are read.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import BackendError, Forbidden, NotFound
from ...core.models import JOB_NAME_PATTERN, JobSpec, JobState
from ...core.queue import Adoption, QueueJob, QueueSnapshot
from ..access import log_access
from .commands import SlurmCommands
from .jobs import gpu_indices, job_state, parse_scontrol_line, slurm_time
from .state import SlurmState

if TYPE_CHECKING:
    from ...core.identity import Identity

SOURCE = "squeue --json"
_GRES_GPU = re.compile(r"(?:^|[,\s])(?:gres[:/])?gpu(?::[A-Za-z0-9_.-]+)?[:=](\d+)")
_DETAIL_GPU = re.compile(r"^gpu(?::[^:(]+)?:(\d+)")
_TRES_GPU = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_PATTERN = re.compile(r"%(\d*)([%AaJjNnstux])")


def number(value: Any) -> int | None:
    """22.05 plain numbers, or 23.02+ {"set": true, "infinite": false, "number": N}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _epoch(value: Any) -> float | None:
    found = number(value)
    return float(found) if found else None


def _state_word(job: dict[str, Any]) -> str:
    state = job.get("job_state")
    if isinstance(state, list):
        return str(state[0]) if state else "PENDING"
    return str(state or "PENDING")


def gpus_held(job: dict[str, Any]) -> int:
    """GPUs a running job holds: gres_detail per node, else its allocated TRES."""
    detail = job.get("gres_detail") or []
    if detail:
        total = 0
        for entry in detail:
            for item in str(entry).split(","):
                match = _DETAIL_GPU.match(item.strip())
                if match:
                    total += int(match.group(1))
        return total
    match = _TRES_GPU.search(str(job.get("tres_alloc_str") or ""))
    return int(match.group(1)) if match else 0


def gpus_asked(job: dict[str, Any], nodes: int) -> int:
    """GPUs a pending job asks for: per job, per node x nodes, per task x tasks."""
    per_job = _GRES_GPU.search(str(job.get("tres_per_job") or ""))
    if per_job:
        return int(per_job.group(1))
    per_node = _GRES_GPU.search(str(job.get("tres_per_node") or ""))
    if per_node:
        return int(per_node.group(1)) * max(1, nodes)
    per_task = _GRES_GPU.search(str(job.get("tres_per_task") or ""))
    if per_task:
        return int(per_task.group(1)) * max(1, number(job.get("tasks")) or 1)
    match = _TRES_GPU.search(str(job.get("tres_req_str") or ""))
    return int(match.group(1)) if match else 0


def expand_output(pattern: str, job: dict[str, Any]) -> str:
    """sbatch's filename patterns (man sbatch, "filename pattern") for the batch step."""
    job_id = str(number(job.get("job_id")) or "")
    array_id = number(job.get("array_job_id")) or 0
    task_id = number(job.get("array_task_id"))
    values = {
        "%": "%",
        "A": str(array_id or job_id),
        "a": str(task_id) if task_id is not None else "4294967294",
        "J": job_id + ".batch",
        "j": job_id,
        "N": str(job.get("batch_host") or "").split(".")[0],
        "n": "0",
        "s": "batch",
        "t": "0",
        "u": str(job.get("user_name") or ""),
        "x": str(job.get("name") or ""),
    }

    def replace(match: re.Match[str]) -> str:
        width, key = match.group(1), match.group(2)
        value = values[key]
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _PATTERN.sub(replace, pattern.replace("\\\\", "\x00")).replace("\x00", "\\")


def stdout_path(job: dict[str, Any]) -> str | None:
    """Where the batch script's output goes as this machine sees it (login nodes share paths)."""
    if not job.get("batch_flag", True):
        return None
    pattern = str(job.get("standard_output") or "")
    if not pattern:
        array = number(job.get("array_job_id"))
        pattern = "slurm-%A_%a.out" if array else "slurm-%j.out"
    path = expand_output(pattern, job)
    if not path.startswith("/"):
        path = str(Path(str(job.get("current_working_directory") or "/")) / path)
    return path


def row_from_json(job: dict[str, Any], identity: Identity) -> QueueJob:
    """One squeue row; mine when munge's uid for it (`user_id`) is this server's uid."""
    word = _state_word(job)
    state = job_state(word)
    nodes = number(job.get("node_count")) or 0
    running = state is JobState.RUNNING
    reason = str(job.get("state_reason") or "")
    owner_uid = number(job.get("user_id"))
    owner = str(job.get("user_name") or (owner_uid if owner_uid is not None else ""))
    mine = identity.owns_uid(owner_uid)
    path = stdout_path(job)
    readable, why = log_access(path, identity, mine)
    return QueueJob(
        id=str(number(job.get("job_id")) or ""),
        name=str(job.get("name") or ""),
        user=owner,
        state=state,
        native_state=word,
        reason=reason if state is JobState.PENDING and reason not in ("", "None") else None,
        nodes=nodes,
        node_list=str(job.get("nodes") or "") or None if running else None,
        gpus=gpus_held(job) if running else gpus_asked(job, nodes),
        partition=str(job.get("partition") or "") or None,
        priority=number(job.get("priority")),
        submitted=_epoch(job.get("submit_time")),
        started=_epoch(job.get("start_time")) if state is not JobState.PENDING else None,
        mine=mine,
        logs_readable=readable,
        logs_reason=why,
        log=path,
    )


def parse_queue(document: dict[str, Any], identity: Identity) -> list[QueueJob]:
    return [row_from_json(job, identity) for job in document.get("jobs") or []]


def list_queue(commands: SlurmCommands, identity: Identity) -> QueueSnapshot:
    """Every job slurmctld holds, each mine or not by its uid."""
    commands.know_controller()
    done = commands.run("squeue", ["--json"])
    try:
        document = json.loads(done.stdout)
    except ValueError:
        raise BackendError(
            "squeue --json did not answer JSON: is this Slurm 21.08 or newer?"
        ) from None
    return QueueSnapshot(jobs=parse_queue(document, identity), source=SOURCE)


def _sanitize(name: str, fallback: str) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40].strip("-")
    return text if text and re.match(JOB_NAME_PATTERN, text) else fallback


def user_id(field: str) -> tuple[str, int | None]:
    """scontrol's 'UserId=alice(1001)' -> ('alice', 1001); the uid None when it is missing."""
    match = re.fullmatch(r"([^()]*)\((\d+)\)", field.strip())
    if match is None:
        return field, None
    return match.group(1), int(match.group(2))


def adopt(commands: SlurmCommands, identity: Identity, slurm_id: str) -> Adoption:
    """One of the user's Slurm jobs as a job of this server: Slurm's own StdOut for rank 0."""
    if not slurm_id.isdigit():
        raise NotFound(f"'{slurm_id}' is not a Slurm job id", field="id")
    commands.know_controller()
    # -d: the GPUs it holds on each node too (its GPU figures: gpu/reader.py).
    done = commands.run("scontrol", ["-o", "-d", "show", "job", slurm_id], ok_codes=(0, 1))
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("JobId=")), "")
    if done.returncode != 0 or not line:
        raise NotFound(f"Slurm has no job {slurm_id} (any more)", field="id")
    fields = parse_scontrol_line(line)
    owner, uid = user_id(fields.get("UserId", ""))
    if not identity.owns_uid(uid):
        me = f"{identity.login} (uid {identity.uid})"
        raise Forbidden(
            f"job {slurm_id} belongs to {owner or 'an unknown user'}"
            f"{f' (uid {uid})' if uid is not None else ''}, not to {me}, the user this server "
            "runs as: only your own jobs can be opened here",
            field="id",
        )
    word = fields.get("JobState", "PENDING")
    nodes = int(fields.get("NumNodes", "1").split("-")[0] or 1)
    gpus = _GRES_GPU.search(fields.get("TresPerNode", "") or "")
    stdout = fields.get("StdOut") or None
    command = fields.get("Command") or ""
    spec = JobSpec(
        name=_sanitize(fields.get("JobName", ""), f"slurm-{slurm_id}"),
        command=[command if command and command != "(null)" else f"(sbatch job {slurm_id})"],
        nodes=max(1, nodes),
        gpus_per_node=int(gpus.group(1)) if gpus else 0,
        queue=fields.get("Partition") or None,
        params={"adopted": f"Slurm job {slurm_id}"},
    )
    data = SlurmState(
        slurm_id=slurm_id,
        stdout=stdout.replace("%%", "%") if stdout else None,
        stdout_known=bool(stdout),
        world_size=1,
        procs_per_node=1,
        torchrun=False,
        slurm_state=word,
        adopted=True,
        workdir=fields.get("WorkDir"),
        gpu_index=gpu_indices(line) or None,
    )
    state = job_state(word)
    submitted = slurm_time(fields.get("SubmitTime"))
    return Adoption(
        backend_id=slurm_id,
        spec=spec,
        data=data,
        events=[f"adopted Slurm job {slurm_id} (submitted outside this server)"],
        state=state,
        created=submitted or time.time(),
        started=slurm_time(fields.get("StartTime")) if state is not JobState.PENDING else None,
    )
