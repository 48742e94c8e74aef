"""`local`: this machine as a one-node cluster, the default that needs no cluster and no cloud."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from ..core.api import DiagnosticCheck
from ..core.backend import (
    FileLogReader,
    GpuPlacement,
    JobUpdate,
    Launch,
    LogReader,
    Orchestrator,
    RenderedJob,
    StoredJob,
    ranks_nodes,
)
from ..core.errors import InvalidRequest
from ..core.launch import program_argv, shell_join
from ..core.models import Capabilities, GpuCount, Job, JobState, Node, RankInfo, RankStack
from ..core.queue import Adoption, QueueJob, QueueSnapshot
from ..core.stacks import PY_SPY_MISSING, dump_command, local_py_spy, read_dump, run_here
from ..core.store import JobStore
from .local_queue import list_queue
from .local_runner import LAUNCH_FILE, read_status, write_status
from .local_state import LocalState

CANCEL_GRACE_SECONDS = 15.0


def detect_gpus() -> list[tuple[int, str]]:
    """(index, name) of each NVIDIA GPU that nvidia-smi reports; [] without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        result = subprocess.run(
            [smi, "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in result.stdout.splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append((int(index), name.strip()))
    return gpus


def _pid_alive(pid: int | None, job_dir: Path) -> bool:
    """True when pid runs and is this job's supervisor (pids are reused after a reboot)."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return str(job_dir) in process.cmdline()
    except (psutil.Error, OSError):
        return False


def _state(job: StoredJob) -> LocalState:
    return LocalState.load(job.data)


class LocalOrchestrator(Orchestrator):
    kind = "local"
    State = LocalState
    jobs_run_here = True
    job_python = "server"

    @classmethod
    def has_job(cls, job: Job, data: dict[str, Any]) -> bool:
        """Its job directory is recorded (a queued job has no backend id until it starts)."""
        return LocalState.load(data).job_dir is not None

    @classmethod
    def gpu_placement(cls, job: Job, data: dict[str, Any]) -> GpuPlacement:
        """This machine, and the GPUs the job was given (CUDA_VISIBLE_DEVICES)."""
        host = socket.gethostname()
        given = LocalState.load(data).gpus
        return GpuPlacement(
            nodes=ranks_nodes(job) or (host,),
            gpus={host: frozenset(str(index) for index in given)} if given else None,
            this_machine=True,
        )

    queues_in_job_store = True
    status_poll_max = 2.0
    """A refresh reads a few files, and it is what starts queued jobs: keep it frequent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._gpus = detect_gpus()
        self._lock = threading.RLock()
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        """Supervisors this process started (kept to reap them)."""
        self._active: dict[str, Path] = {}
        """Started, unfinished jobs (also those found again after a server restart)."""
        self._store: JobStore | None = None
        self._owner = ""

    def bind_store(self, store: JobStore, owner: str) -> None:
        """The queue is the job store (`core/store.py`), shared by every process that opens it
        (the server, a `--direct` CLI, the magics): a job starts only once its row is claimed
        there, atomically, so none runs twice and `local_max_parallel_jobs` holds for all of
        them. `owner` is this service's lease: another live owner's jobs are not ours to start."""
        self._store, self._owner = store, owner

    # -- cluster -------------------------------------------------------------------------
    def cluster_name(self) -> str:
        return socket.gethostname()

    def capabilities(self) -> Capabilities:
        return Capabilities(multi_node=False, gpus=bool(self._gpus), render_format="command")

    def details(self) -> dict[str, Any]:
        return {
            "max_parallel_jobs": self.settings.local_max_parallel_jobs,
            "python": sys.executable,
        }

    def list_nodes(self) -> list[Node]:
        running = self._running_jobs()
        cpus = os.cpu_count() or 1
        used_procs = sum(job["world_size"] for job in running)
        allocated_gpus = sum(len(job.get("gpus", [])) for job in running)
        state = "idle" if not running else "allocated" if used_procs >= cpus else "mixed"
        memory = psutil.virtual_memory()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return [
            Node(
                name=socket.gethostname(),
                state=state,
                health="healthy",
                health_detail=f"load {load:.2f}, {memory.percent:.0f}% memory used, {len(running)} job(s) running",
                instance_type="local",
                cpus=cpus,
                memory_mb=memory.total // (1024 * 1024),
                gpus=GpuCount(
                    total=len(self._gpus),
                    allocated=allocated_gpus,
                    type=self._gpus[0][1] if self._gpus else None,
                ),
                partitions=["local"],
            )
        ]

    # -- jobs ----------------------------------------------------------------------------
    def _check(self, launch: Launch) -> list[str]:
        spec = launch.spec
        if spec.nodes != 1:
            raise InvalidRequest("the local cluster has one node: set nodes to 1", field="nodes")
        if spec.gpus_per_node > len(self._gpus):
            have = f"{len(self._gpus)} GPU(s)" if self._gpus else "no GPU"
            raise InvalidRequest(
                f"this machine has {have}; ask for at most {len(self._gpus)}", field="gpus_per_node"
            )
        warnings = []
        if spec.image:
            warnings.append(
                "the local cluster runs on this machine directly: the container image is ignored"
            )
        if spec.launcher == "torchrun":
            warnings.append(
                "the local cluster starts the ranks itself, with the variables torchrun sets"
            )
        return warnings

    def _argv(self, launch: Launch) -> list[str]:
        return program_argv(launch.command, sys.executable)

    def render(self, launch: Launch) -> RenderedJob:
        warnings = self._check(launch)
        world = launch.spec.world_size
        lines = [
            f"# local cluster {socket.gethostname()}: {world} rank(s), one process group, logs in",
            f"# {launch.job_dir}/rank-<N>.log; the ranks share MASTER_ADDR=127.0.0.1 and a free MASTER_PORT",
            f"cd {shell_join([launch.workdir])}",
            *(f"export {key}={shell_join([value])}" for key, value in sorted(launch.env.items())),
            f"export WORLD_SIZE={world} LOCAL_WORLD_SIZE={world} MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port>",
        ]
        program = shell_join(self._argv(launch))
        for rank in range(world):
            log = shell_join([f"{launch.job_dir}/rank-{rank}.log"])
            lines.append(f"RANK={rank} LOCAL_RANK={rank} {program} > {log} 2>&1 &")
        lines.append("wait  # the job fails as soon as one rank fails; the other ranks are stopped")
        return RenderedJob(
            format="command", language="shell", text="\n".join(lines) + "\n", warnings=warnings
        )

    def submit(self, launch: Launch) -> JobUpdate:
        self._check(launch)
        job_dir = launch.job_dir_local
        job_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "job_id": launch.job_id,
            "argv": self._argv(launch),
            "workdir": launch.workdir,
            "env": launch.env,
            "world_size": launch.spec.world_size,
            "gpus_per_node": launch.spec.gpus_per_node,
        }
        (job_dir / LAUNCH_FILE).write_text(json.dumps(payload), encoding="utf-8")
        facts: dict[str, Any] = {
            "job_dir": str(job_dir),
            "world_size": launch.spec.world_size,
            "uid": self.identity.uid,
        }
        ranks = [
            RankInfo(
                rank=r,
                node=socket.gethostname(),
                state="PENDING",
                log=str(job_dir / f"rank-{r}.log"),
            )
            for r in range(launch.spec.world_size)
        ]
        with self._lock:
            started = self._start_if_free(launch.job_id, job_dir, launch.spec.gpus_per_node)
        if isinstance(started, dict):
            # The supervisor is up and starts the ranks: STARTING until it says each runs.
            return JobUpdate(
                state=JobState.RUNNING,
                backend_id=started["pgid"],
                started=time.time(),
                ranks=[rank.model_copy(update={"state": "STARTING"}) for rank in ranks],
                data=LocalState(**facts, **started),
            )
        return JobUpdate(
            state=JobState.PENDING, state_reason=started, ranks=ranks, data=LocalState(**facts)
        )

    def _queue_reason(self) -> str:
        limit = self.settings.local_max_parallel_jobs
        return f"waiting for a free slot: {limit} job(s) already running (local_max_parallel_jobs)"

    def _running_jobs(self) -> list[dict[str, Any]]:
        """Launch facts (plus allocated GPUs) of the started, unfinished jobs (of every process
        that shares the job store)."""
        running = []
        with self._lock:
            dirs = {job_id: Path(path) for job_id, path in self._shared_running().items()}
            for job_dir in {**dirs, **self._active}.values():
                try:
                    launch = json.loads((job_dir / LAUNCH_FILE).read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                running.append(launch | {"gpus": (read_status(job_dir) or {}).get("gpus", [])})
        return running

    def _shared_running(self) -> dict[str, str]:
        if self._store is None:
            return {}
        return self._store.running_dirs(orchestrator=self.kind, cluster=self.cluster_name())

    def _start_if_free(self, job_id: str, job_dir: Path, gpus_wanted: int) -> dict[str, Any] | str:
        """Start job_id if its GPUs are free and the store lets us claim it (the oldest pending
        job, a free slot, ours to start); the facts of the start, or why it waits."""
        if self._store is None:
            raise RuntimeError("the local backend starts jobs through a job store (bind_store)")
        running = self._running_jobs()
        busy = {index for job in running for index in job.get("gpus", [])}
        free = [index for index, _ in self._gpus if index not in busy]
        if len(free) < gpus_wanted:
            return f"waiting for {gpus_wanted} free GPU(s): {len(free)} free now"
        waits = self._store.claim_start(
            job_id,
            self._owner,
            orchestrator=self.kind,
            cluster=self.cluster_name(),
            limit=self.settings.local_max_parallel_jobs,
        )
        if waits is not None:
            return self._queue_reason() if waits.endswith("already running") else waits
        try:
            return self._start(job_id, job_dir, free[:gpus_wanted])
        except BaseException:
            # The claim made the row RUNNING: the caller records the failure (FAILED, which
            # frees the slot); nothing of this start may stay behind.
            child = self._children.pop(job_id, None)
            if child is not None:
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=5)
            self._active.pop(job_id, None)
            raise

    def _start(self, job_id: str, job_dir: Path, gpus: list[int]) -> dict[str, Any]:
        gpus_wanted = len(gpus)
        if gpus_wanted:
            launch_file = job_dir / LAUNCH_FILE
            payload = json.loads(launch_file.read_text(encoding="utf-8"))
            payload["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
            launch_file.write_text(json.dumps(payload), encoding="utf-8")
        write_status(job_dir, {"state": "STARTING", "gpus": gpus})
        supervisor_log = open(job_dir / "supervisor.log", "ab")  # noqa: SIM115
        child = subprocess.Popen(
            [sys.executable, "-m", "jupyter_hyperpod.backends.local_runner", str(job_dir)],
            stdin=subprocess.DEVNULL,
            stdout=supervisor_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        supervisor_log.close()
        self._children[job_id] = child
        self._active[job_id] = job_dir
        return {"pgid": str(child.pid), "pid": child.pid, "gpus": gpus}

    def refresh(self, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
        updates: dict[str, JobUpdate] = {}
        with self._lock:
            for job in sorted(jobs, key=lambda j: j.created):
                update = self._refresh_one(job)
                if update is not None:
                    updates[job.id] = update
        return updates

    def _refresh_one(self, job: StoredJob) -> JobUpdate | None:
        facts = _state(job)
        if not facts.job_dir:
            # Stored, not yet handed to us: being submitted right now, by this process or
            # another (one left behind by a stopped server is the core's: JobBook.left_behind).
            return None
        job_dir = facts.path
        if job.state == JobState.PENDING and not facts.pid:
            if not (job_dir / LAUNCH_FILE).exists():
                reason = "the submission did not complete (its launch file is missing)"
                return JobUpdate(state=JobState.FAILED, state_reason=reason, ended=time.time())
            started = self._start_if_free(job.id, job_dir, job.spec.gpus_per_node)
            if isinstance(started, str):
                return JobUpdate(state_reason=started)
            return JobUpdate(
                state=JobState.RUNNING,
                backend_id=started["pgid"],
                started=time.time(),
                state_reason=None,
                ranks=self._ranks(job, {"state": "STARTING"}),
                data=LocalState(**started),
            )
        status = read_status(job_dir) or {}
        state = status.get("state")
        ranks = self._ranks(job, status)
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            self._active.pop(job.id, None)
            self._wait_supervisor(job.id, facts.pid, job_dir)
            return JobUpdate(
                state=JobState(state),
                exit_code=status.get("exit_code"),
                ended=status.get("ended"),
                state_reason=status.get("reason"),
                ranks=ranks,
            )
        pid = facts.pid
        if not _pid_alive(pid, job_dir) and (
            job.id not in self._children or self._children[job.id].poll() is not None
        ):
            self._children.pop(job.id, None)
            self._active.pop(job.id, None)
            cancelled = (job_dir / "cancel").exists()
            final = JobState.CANCELLED if cancelled else JobState.FAILED
            reason = (
                "cancelled by the user"
                if cancelled
                else "the job's supervisor stopped unexpectedly (machine restart?)"
            )
            write_status(
                job_dir, {**status, "state": final.value, "reason": reason, "ended": time.time()}
            )
            return JobUpdate(state=final, state_reason=reason, ended=time.time(), ranks=ranks)
        self._active[job.id] = job_dir
        return JobUpdate(state=JobState.RUNNING, started=status.get("started"), ranks=ranks)

    def _wait_supervisor(self, job_id: str, pid: int | None, job_dir: Path) -> None:
        """The supervisor writes the final state just before it exits: let it go first."""
        child = self._children.pop(job_id, None)
        if child is not None:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
            return
        deadline = time.monotonic() + 5
        while _pid_alive(pid, job_dir) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _ranks(self, job: StoredJob, status: dict[str, Any]) -> list[RankInfo]:
        job_dir = _state(job).path
        known = {info["rank"]: info for info in status.get("ranks", [])}
        # A rank the supervisor has not started yet: STARTING while it is up, else never started.
        unstarted = "STARTING" if status.get("state") in ("STARTING", "RUNNING") else "PENDING"
        return [
            RankInfo(
                rank=rank,
                node=socket.gethostname(),
                state=known.get(rank, {}).get("state", unstarted),
                exit_code=known.get(rank, {}).get("exit_code"),
                log=str(job_dir / f"rank-{rank}.log"),
                ended=known.get(rank, {}).get("ended"),
            )
            for rank in range(job.spec.world_size)
        ]

    def cancel(self, job: StoredJob) -> JobUpdate:
        state = _state(job)
        job_dir = state.path
        (job_dir / "cancel").touch()
        with self._lock:
            if (
                job.state == JobState.PENDING
                and not state.pid
                and self._store is not None
                and self._store.cancel_pending(job.id)
            ):
                write_status(
                    job_dir,
                    {
                        "state": "CANCELLED",
                        "reason": "cancelled before it started",
                        "ended": time.time(),
                    },
                )
                return JobUpdate(
                    state=JobState.CANCELLED,
                    state_reason="cancelled before it started",
                    ended=time.time(),
                )
        # Started by another process sharing the store since the caller read the job: the
        # supervisor's own status file names it.
        pid = state.pid or (read_status(job_dir) or {}).get("pid")
        if pid and _pid_alive(pid, job_dir):
            self._signal_group(int(pid), signal.SIGTERM)
            deadline = time.monotonic() + CANCEL_GRACE_SECONDS
            while time.monotonic() < deadline and self._still_running(job_dir):
                time.sleep(0.05)
            # Whatever is left in the group (the supervisor included) goes now.
            self._signal_group(int(pid), signal.SIGKILL)
            self._active.pop(job.id, None)
            child = self._children.pop(job.id, None)
            if child is not None:
                child.wait(timeout=5)
            # A refresh running at the same time may have reaped the child first: wait until the
            # killed supervisor is gone either way (the answer promises no process is left).
            deadline = time.monotonic() + 5
            while _pid_alive(pid, job_dir) and time.monotonic() < deadline:
                time.sleep(0.01)
        status = read_status(job_dir) or {}
        if status.get("state") not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            status.update(state="CANCELLED", reason="cancelled by the user", ended=time.time())
            write_status(job_dir, status)
        return JobUpdate(
            state=JobState(status["state"]),
            state_reason=status.get("reason"),
            ended=status.get("ended"),
            exit_code=status.get("exit_code"),
            ranks=self._ranks(job, status),
        )

    @staticmethod
    def _still_running(job_dir: Path) -> bool:
        return (read_status(job_dir) or {}).get("state") in ("STARTING", "RUNNING")

    @staticmethod
    def _signal_group(pgid: int, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)

    def log_reader(self, job: StoredJob, rank: int) -> LogReader:
        return FileLogReader(_state(job).path / f"rank-{rank}.log")

    def dump_stack(self, job: StoredJob, rank: int) -> RankStack:
        """Rank r's Python stack: py-spy on this machine, on the pid the supervisor recorded."""
        ranks = (read_status(_state(job).path) or {}).get("ranks") or []
        pid = next((int(r["pid"]) for r in ranks if r.get("rank") == rank and r.get("pid")), None)
        node = socket.gethostname()
        if pid is None:
            return RankStack(rank=rank, node=node, error="the rank has not started")
        py_spy = local_py_spy()
        if py_spy is None:
            return RankStack(rank=rank, node=node, pid=pid, error="no py-spy", fix=PY_SPY_MISSING)
        return read_dump(rank, node, pid, *run_here(dump_command(py_spy, pid)))

    def diagnose(self) -> list[DiagnosticCheck]:
        """This machine as a one-node cluster: what jobs get, and the interpreter they run with."""
        gpus = f", {len(self._gpus)} GPU(s)" if self._gpus else ", no GPU"
        return [
            DiagnosticCheck(
                name="local cluster",
                status="pass",
                detail=f"{os.cpu_count() or 1} CPUs{gpus}; "
                f"{self.settings.local_max_parallel_jobs} job(s) at once; python {sys.executable}",
            )
        ]

    def queue(self) -> QueueSnapshot:
        if self._store is None:
            raise RuntimeError("the local queue is the job store (bind_store)")
        return list_queue(
            self._store,
            kind=self.kind,
            cluster=self.cluster_name(),
            identity=self.identity,
            waiting=self._queue_reason(),
        )

    def adopt(self, queue_id: str) -> Adoption:
        raise InvalidRequest(
            "on the local cluster every job of yours is already in your job list", field="id"
        )

    def queue_log(self, row: QueueJob, tail: int) -> bytes:
        reader = FileLogReader(row.log or "")
        try:
            return reader.tail(tail)[0]
        finally:
            reader.close()

    def close(self) -> None:
        with self._lock:
            for child in self._children.values():
                child.poll()
