"""`SlurmOrchestrator`: JupyterLab as the login node of a Slurm cluster (HyperPod Slurm or any).

Everything goes through Slurm's own clients (sinfo, squeue, sacct, scontrol, sbatch, scancel) run
as argument lists with time limits. Status polling costs one `squeue` for all our jobs (asked
among this user's jobs alone: `squeue_user`), plus one `sacct` (accounting on) or one `scontrol
show job` (off) when some job has just finished or left the queue. While slurmctld is away every
call raises `BackendUnavailable` (HTTP 503) and no job is marked failed; the next successful poll
picks up where it left off.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from traitlets import Bool, Enum, Float, Int, List, Unicode

from ...core.api import DiagnosticCheck
from ...core.backend import (
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
from ...core.byo import FileContext, PreparedFile
from ...core.errors import BackendError, BackendUnavailable, HyperPodError, InvalidRequest
from ...core.identity import Identity
from ...core.launch import uses_torchrun
from ...core.models import Capabilities, Job, JobState, Node, RankInfo, RankStack
from ...core.queue import Adoption, QueueJob, QueueSnapshot
from . import jobs as slurm_jobs
from . import queue as slurm_queue
from .commands import SlurmCommands, command_error
from .nodes import SINFO_FORMAT, nodes_from_json, nodes_from_text
from .rank_runs import (
    RankRuns,
    apply_runs,
    attempts,
    failure_reason,
    read_attempts,
    read_rank_runs,
    restart_event,
)
from .script import (
    EXIT_CODE_NAME,
    SCRIPT_NAME,
    ScriptOptions,
    output_path,
    rank_log_name,
    render_script,
)
from .state import SlurmState

SCONTROL_ONE_BY_ONE = 8
"""Up to this many jobs, scontrol is asked once per job, side by side: each call costs a client's
start (a few ms), a call for every held job costs the cluster's whole job table."""


def squeue_user(identity: Identity) -> list[str]:
    """`squeue -u <login>` when squeue can name this server's uid, else nothing.

    squeue given more than one `-j` id loads every job slurmctld holds (`slurm_load_jobs`) and
    filters them itself; given one user it asks slurmctld for that user's jobs alone
    (`slurm_load_job_user`; Slurm's src/squeue/opts.c and squeue.c, 22.05 to 25.11). A refresh of
    our jobs then costs what this user holds, not what the whole cluster holds. Every job this
    server tracks is this uid's (it submitted it, or `adopt` checked its owner). squeue resolves
    the name with this machine's passwd; where it could not (a uid without an account here, a
    name it would split at a comma), it would say "Invalid user" and show no job at all, so no
    filter is given then."""
    try:
        resolvable = pwd.getpwnam(identity.login).pw_uid == identity.uid
    except KeyError:
        resolvable = False
    resolvable = resolvable and "," not in identity.login
    return ["-u", identity.login] if resolvable else []


class SlurmOrchestrator(Orchestrator):
    """Drives Slurm through its command-line clients, as a person on the login node would."""

    kind = "slurm"
    State = SlurmState
    holds_dependencies = True
    """A chain's link goes to Slurm at once with `--dependency=afterok:<ids>` (afterany):
    Slurm holds it (reason Dependency); the server cancels it with the reason when one fails."""

    @classmethod
    def gpu_placement(cls, job: Job, data: dict[str, Any]) -> GpuPlacement:
        """Slurm's node list and, on a node the job shares, the GPUs Slurm gave it (its GPU
        indices are the GPUs' minor numbers, DCGM's `gpu` label). A job that asked for none
        (whole nodes, HyperPod's usual `--exclusive`) holds every GPU of its nodes."""
        state = SlurmState.load(data)
        nodes = tuple(slurm_jobs.expand_hostlist(state.nodes)) if state.nodes else ()
        held = state.gpu_index or None
        return GpuPlacement(
            nodes=nodes or ranks_nodes(job),
            gpus={node: frozenset(gpus) for node, gpus in held.items()} if held else None,
        )

    default_cluster_fs_root = None  # login node and compute nodes share paths (HyperPod: /fsx)

    partition = Unicode(
        "", config=True, help="Slurm partition for jobs that name none; '' = Slurm's default."
    )
    sbatch_extra_args = List(
        Unicode(),
        default_value=[],
        config=True,
        help="Extra sbatch options, written as #SBATCH lines of every job: ['--account=ml'].",
    )
    bin_dir = Unicode("", config=True, help="Directory of sbatch, squeue... ('' = found on PATH).")
    command_timeout = Float(30.0, config=True, help="Seconds a Slurm command may take before 503.")
    accounting = Enum(
        ["auto", "on", "off"],
        default_value="auto",
        config=True,
        help="Use sacct for finished jobs: auto = when slurmdbd accounting is configured.",
    )
    use_json = Bool(True, config=True, help="Use `sinfo --json` where this Slurm supports it.")
    node_cache_seconds = Float(
        2.0,
        config=True,
        help="How long one node listing (one sinfo) answers every caller, as Kubernetes' node "
        "cache: the panels of many users poll the same cluster, and a drain shows at most this "
        "much later. 0: a listing per request; callers that come while one runs share it.",
    )
    fast_fail = Bool(
        True,
        config=True,
        help="Probe slurmctld's port before each command so that an outage answers at once.",
    )
    hyperpod_marker = Unicode(
        "/opt/sagemaker_cluster",
        config=True,
        help="Present on HyperPod Slurm nodes: jobs then run `srun --auto-resume=1`.",
    )
    auto_resume = Bool(
        True,
        config=True,
        help="On HyperPod, restart jobs on replaced nodes (srun --auto-resume=1).",
    )
    gpu_option = Enum(
        ["gpus-per-node", "gres"],
        default_value="gpus-per-node",
        config=True,
        help="How GPUs are requested: --gpus-per-node=N or --gres=gpu:N.",
    )
    standby_seconds = Float(
        300.0,
        min=0.0,
        config=True,
        help="Keep one `sbatch --parsable` started ahead of the next submit, waiting for its "
        "script on standard input, for at most this long after a submit (sbatch spends about "
        "a quarter of a submit starting). Unused, it exits without submitting anything. "
        "0: start sbatch for each submit.",
    )
    torchrun = Unicode("torchrun", config=True, help="torchrun on the compute nodes.")
    cpus_per_rank = Int(
        1,
        min=0,
        config=True,
        help="CPUs requested per rank (--cpus-per-task); data loaders want more. 0: Slurm's default.",
    )

    def __init__(self, *, settings: Any, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.commands = SlurmCommands(
            bin_dir=self.bin_dir,
            timeout=self.command_timeout,
            fast_fail=self.fast_fail,
            standby_seconds=self.standby_seconds,
        )
        self._json_ok: bool | None = None
        self._lock = threading.Lock()
        self._nodes_lock = threading.Lock()
        self._nodes_flight: Future[list[Node]] | None = None
        self._nodes: tuple[float, bool, list[Node]] | None = None
        """The last listing: when, whether through --json, the nodes (handed out as they are:
        the REST handler then reuses its serialized body)."""

    # -- cluster facts ---------------------------------------------------------------------------

    def slurm_config(self, *, force: bool = False) -> dict[str, str]:
        """`scontrol show config`, cached a minute (commands.py, which also learns slurmctld's
        address from it to fail fast when it is down)."""
        return self.commands.config(force=force)

    def accounting_enabled(self) -> bool:
        if self.accounting != "auto":
            return self.accounting == "on"
        storage = self.slurm_config().get("AccountingStorageType", "")
        return bool(storage) and not storage.endswith("/none")

    def on_hyperpod(self) -> bool:
        return bool(self.hyperpod_marker) and os.path.exists(self.hyperpod_marker)

    def cluster_name(self) -> str:
        try:
            return self.slurm_config().get("ClusterName") or "slurm"
        except (BackendUnavailable, BackendError):
            return self.commands.last_config.get("ClusterName") or "slurm"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            cancel=True,
            follow_logs=True,
            per_rank_logs=True,
            metrics=True,
            multi_node=True,
            gpus=True,
            render_format="sbatch",
        )

    def details(self) -> dict[str, Any]:
        config = self.slurm_config()
        return {
            "slurm_version": config.get("SLURM_VERSION"),
            "cluster_name": config.get("ClusterName"),
            "controllers": [f"{c.host}:{c.port}" for c in self.commands.known_controllers],
            "accounting": self.accounting_enabled(),
            "hyperpod": self.on_hyperpod(),
            "default_partition": self.partition or None,
        }

    # -- nodes -----------------------------------------------------------------------------------

    def list_nodes(self) -> list[Node]:
        """One sinfo shared by every caller that comes while it runs (and for
        `node_cache_seconds` after): many pollers cost one listing, not one each."""
        with self._nodes_lock:
            cached = self._nodes
            if (
                cached is not None
                and cached[1] == self.use_json
                and time.monotonic() - cached[0] < self.node_cache_seconds
            ):
                return cached[2]
            flight = self._nodes_flight
            if flight is None:
                mine = self._nodes_flight = Future()
        if flight is not None:
            return flight.result()  # the running listing's nodes, or its error
        try:
            nodes = self._list_nodes()
        except BaseException as error:
            mine.set_exception(error)
            raise
        else:
            mine.set_result(nodes)
            self._nodes = (time.monotonic(), self.use_json, nodes)
            return nodes
        finally:
            with self._nodes_lock:
                self._nodes_flight = None

    def _list_nodes(self) -> list[Node]:
        self.commands.know_controller()
        if self.use_json and self._json_ok is not False:
            done = self.commands.run("sinfo", ["--json"], ok_codes=(0, 1, 2))
            document = _json_or_none(done.stdout) if done.returncode == 0 else None
            if document is not None and (document.get("nodes") or not document.get("errors")):
                self._json_ok = True
                return sorted(nodes_from_json(document), key=_node_order)
            if document is None and "json" in (done.stderr or "").lower():
                self._json_ok = False  # this sinfo has no --json: text from now on
            # Errors in the JSON say little ("Unspecified error"): the text form says what failed.
        text = self.commands.run("sinfo", ["-N", "-h", "-O", SINFO_FORMAT]).stdout
        return sorted(nodes_from_text(text), key=_node_order)

    # -- submit ----------------------------------------------------------------------------------

    def script_options(self) -> ScriptOptions:
        return ScriptOptions(
            partition=self.partition,
            extra_sbatch=list(self.sbatch_extra_args),
            hyperpod=self.on_hyperpod(),
            auto_resume=self.auto_resume,
            gpu_option=self.gpu_option,
            cpus_per_rank=self.cpus_per_rank,
            torchrun=self.torchrun,
            python=self.settings.cluster_python,
        )

    def render(self, launch: Launch) -> RenderedJob:
        text, warnings = render_script(launch, self.script_options())
        return RenderedJob(format="sbatch", language="shell", text=text, warnings=warnings)

    def submit(self, launch: Launch) -> JobUpdate:
        self.commands.know_controller()
        rendered = launch.rendered or self.render(launch)  # the one the submission checked
        local_dir = Path(launch.job_dir_local)
        local_dir.mkdir(parents=True, exist_ok=True)
        script = local_dir / SCRIPT_NAME
        script.write_text(rendered.text, encoding="utf-8")
        try:
            # The script on standard input, so that an sbatch started ahead can take it.
            done = self.commands.run("sbatch", ["--parsable"], input=rendered.text)
        except BackendError as error:
            raise self._refusal(launch, error) from None
        slurm_id = (
            done.stdout.strip().splitlines()[-1].split(";")[0].strip()
            if done.stdout.strip()
            else ""
        )
        if not slurm_id.isdigit():
            raise BackendError(
                f"sbatch did not print a job id: {done.stdout.strip()!r} {done.stderr.strip()!r}"
            )
        spec = launch.spec
        events = [f"submitted as Slurm job {slurm_id}"]
        events += [f"warning: {warning}" for warning in rendered.warnings]
        state = SlurmState(
            slurm_id=slurm_id,
            # Where the script sends it; Slurm's own word (StdOut) replaces it once the job runs.
            stdout=output_path(launch.job_dir, slurm_id),
            stdout_known=False,
            job_dir=launch.job_dir,
            job_dir_local=str(local_dir),
            script=str(script),
            world_size=spec.world_size,
            procs_per_node=spec.procs_per_node,
            torchrun=uses_torchrun(spec, multi_node_cluster=True),
            slurm_state="PENDING",
        )
        return JobUpdate(
            backend_id=slurm_id,
            state=JobState.PENDING,
            events=events,
            ranks=_ranks(state, None, JobState.PENDING),
            data=state,
        )

    # -- the user's own sbatch scripts (user_script.py) --------------------------------------
    def _test_only(self, text: str, options: list[str]) -> str | None:
        """sbatch --test-only: Slurm's own reading of the script and its options (nothing is
        queued); None when it would take it, else its message."""
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".sbatch", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            done = self.commands.run(
                "sbatch", ["--test-only", *options, handle.name], ok_codes=(0, 1)
            )
        if done.returncode == 0:
            return None
        return " ".join(done.stderr.strip().splitlines()[-3:]) or "refused"

    def prepare_file(self, context: FileContext) -> PreparedFile:
        from .user_script import prepare_script

        self.commands.know_controller()
        return prepare_script(context, context.partition, self._test_only)

    def submit_file(self, prepared: PreparedFile, context: FileContext) -> JobUpdate:
        local_dir = Path(context.job_dir_local)
        script = local_dir / "sent.sbatch"
        script.write_text(prepared.text, encoding="utf-8")
        call = prepared.payload
        done = self.commands.run(
            "sbatch",
            ["--parsable", *call.options, str(script)],
            env={**self.commands.environment(), **call.env},
        )
        slurm_id = done.stdout.strip().splitlines()[-1].split(";")[0].strip() if done.stdout else ""
        if not slurm_id.isdigit():
            raise BackendError(f"sbatch did not print a job id: {done.stdout.strip()!r}")
        output = next((o.split("=", 1)[1] for o in call.options if o.startswith("--output=")), None)
        return JobUpdate(
            backend_id=slurm_id,
            state=JobState.PENDING,
            events=[f"submitted {context.filename or 'your script'} as Slurm job {slurm_id}"],
            data=SlurmState(
                slurm_id=slurm_id,
                stdout=output.replace("%j", slurm_id) if output else None,
                stdout_known=False,
                job_dir=context.job_dir,
                job_dir_local=str(local_dir),
                script=str(script),
                world_size=call.tasks,
                procs_per_node=call.per_node,
                torchrun=False,
                slurm_state="PENDING",
                adopted=True,
                task_logs=True,
            ),
        )

    def _refusal(self, launch: Launch, error: BackendError) -> HyperPodError:
        """sbatch's refusals that the person can fix in the form, named by field."""
        spec, message = launch.spec, error.message
        if "invalid partition" in message.lower():
            partition = spec.queue or self.partition
            try:
                known = self.commands.run("sinfo", ["-h", "-o", "%R"]).stdout.split()
            except (BackendUnavailable, BackendError):
                known = []
            listed = f" (partitions: {', '.join(sorted(set(known)))})" if known else ""
            return InvalidRequest(f"Slurm has no partition '{partition}'{listed}", field="queue")
        if "invalid generic resource" in message.lower() and spec.gpus_per_node:
            return InvalidRequest(
                "this Slurm cluster has no GPUs as a generic resource (GRES): ask for 0 GPUs per "
                f"node and the nodes' own GPUs, or use c.SlurmOrchestrator.gpu_option ({message})",
                field="gpus_per_node",
            )
        if "requested node configuration is not available" in message.lower():
            asked = f"{spec.procs_per_node} rank(s)" + (
                f" and {spec.gpus_per_node} GPU(s)" if spec.gpus_per_node else ""
            )
            return InvalidRequest(
                f"no node in the partition can run {asked} per node ({message})",
                field="gpus_per_node" if spec.gpus_per_node else "procs_per_node",
            )
        return error

    # -- status ----------------------------------------------------------------------------------

    @functools.cached_property
    def _squeue_user(self) -> list[str]:
        return squeue_user(self.identity)

    def refresh(self, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
        ours = {job.backend_id: job for job in jobs if job.backend_id}
        if not ours:
            return {}
        self.commands.know_controller()
        ids = sorted(ours, key=lambda value: int(value) if value.isdigit() else 0)
        options = ["-h", "-t", "all", *self._squeue_user, "-j", ",".join(ids)]
        done = self.commands.run(
            "squeue", [*options, "-o", slurm_jobs.SQUEUE_FORMAT], ok_codes=(0, 1)
        )
        if done.returncode != 0 and "invalid job id" not in done.stderr.lower():
            raise _error_of("squeue", done)
        records = slurm_jobs.parse_squeue(done.stdout if done.returncode == 0 else "")
        # Finished jobs need their exit code, jobs gone from squeue their end, and jobs that have
        # started their real output path (StdOut): one more query for all of them.
        ended = [
            slurm_id for slurm_id in ids if slurm_id not in records or records[slurm_id].finished
        ]
        started = [
            slurm_id
            for slurm_id in ids
            if slurm_id in records
            and records[slurm_id].state == JobState.RUNNING
            and _details_unknown(ours[slurm_id])
        ]
        if ended or started:
            for slurm_id, detail in self._details(ended, started).items():
                # A record that lags (slurmdbd not told yet) never undoes an end squeue saw.
                if detail.finished or slurm_id not in records:
                    records[slurm_id] = detail
                else:
                    records[slurm_id].stdout = detail.stdout
                    records[slurm_id].gpus = detail.gpus
        updates = {}
        for slurm_id, job in ours.items():
            record = records.get(slurm_id)
            update = self._update_from(job, record) if record else self._vanished(job)
            if update is not None:
                updates[job.id] = update
        return updates

    def _details(self, ended: list[str], started: list[str]) -> dict[str, slurm_jobs.JobRecord]:
        """sacct (accounting on) for ended jobs; one scontrol for the rest and the started."""
        ids = ended
        found: dict[str, slurm_jobs.JobRecord] = {}
        if ended and self.accounting_enabled():
            done = self.commands.run(
                "sacct",
                ["-X", "-n", "-P", "-j", ",".join(ids), "-o", slurm_jobs.SACCT_FIELDS],
                ok_codes=(0, 1),
            )
            if done.returncode == 0:
                rows = slurm_jobs.parse_sacct(done.stdout).items()
                found = {k: v for k, v in rows if k in ids and v.finished}
            else:  # slurmdbd away or accounting off after all: the controller may still know
                self.log.info("sacct failed, asking scontrol: %s", done.stderr.strip()[-200:])
        missing = [slurm_id for slurm_id in ids if slurm_id not in found] + started
        if missing:
            found.update(self._scontrol_jobs(missing))
        return found

    def _scontrol_jobs(self, slurm_ids: list[str]) -> dict[str, slurm_jobs.JobRecord]:
        """What the controller holds on these jobs (`-d`: each node's GPU indices too, for the
        job's GPU figures). scontrol shows one job or every job it holds (MinJobAge keeps ended
        ones: 1,673 jobs made 2.2 MB and 58 ms on the test cluster, against 4.6 ms for one), so a
        few jobs are asked one by one, side by side, and only more than SCONTROL_ONE_BY_ONE at
        once."""
        if len(slurm_ids) <= SCONTROL_ONE_BY_ONE:
            arg_lists = [["-o", "-d", "show", "job", slurm_id] for slurm_id in slurm_ids]
        else:
            arg_lists = [["-o", "-d", "show", "job"]]
        text = ""
        for done in self.commands.run_each("scontrol", arg_lists, ok_codes=(0, 1)):
            if done.returncode != 0 and "invalid job id" not in done.stderr.lower():
                raise _error_of("scontrol", done)
            text += done.stdout + "\n" if done.returncode == 0 else ""
        return slurm_jobs.parse_scontrol_jobs(text, wanted=set(slurm_ids))

    def _update_from(self, job: StoredJob, record: slurm_jobs.JobRecord) -> JobUpdate | None:
        state = record.state
        known = _state(job)
        # The ranks' restarts (rank_runs.py): rank 0's record tells while the job runs; every
        # rank's record is read for an update once the job was restarted, and when it ends.
        restarted = state == JobState.RUNNING and _attempts(known) - 1 > known.restarts
        previous = (known.slurm_state, known.slurm_reason, known.nodes)
        now = (record.slurm_state, record.reason, record.nodes or known.nodes)
        new_path = bool(record.stdout) and not known.stdout_known
        new_gpus = bool(record.gpus) and known.gpu_index != record.gpus
        unchanged = state == job.state and now == previous and not state.finished
        if unchanged and not new_path and not new_gpus and not restarted:
            return None
        read_runs = restarted or known.restarts > 0 or state.finished
        runs = _rank_runs(known) if read_runs else {}
        restarts = max(known.restarts, attempts(runs) - 1)
        facts: dict[str, Any] = {"slurm_state": record.slurm_state, "slurm_reason": record.reason}
        if restarts != known.restarts:
            facts["restarts"] = restarts
        if record.nodes:
            facts["nodes"] = record.nodes
        if record.stdout:
            facts.update(stdout=record.stdout, stdout_known=True)
        if record.gpus:
            facts["gpu_index"] = record.gpus
        data = SlurmState(**facts)  # what changed, validated here
        merged = known.merged(data)
        exit_code = record.exit_code
        if state.finished and exit_code is None:
            exit_code = _exit_code_file(merged)
        new_events = [restart_event(runs, n) for n in range(known.restarts + 1, restarts + 1)]
        if state != job.state:
            reason = f" ({record.reason})" if record.reason else ""
            new_events.append(f"Slurm: {record.slurm_state}{reason}")
        why = failure_reason(_state_reason(record), state, runs)
        if state == JobState.FAILED and not runs and known.adopted:
            why = _srun_failure(merged, why)
        return JobUpdate(
            state=state,
            state_reason=why,
            started=record.start if state != JobState.PENDING else None,
            ended=record.end if state.finished else None,
            exit_code=exit_code if state.finished else None,
            ranks=apply_runs(_ranks(merged, record.nodes, state), runs, state),
            events=_with_events(job, new_events) if new_events else None,
            data=data,
        )

    def _vanished(self, job: StoredJob) -> JobUpdate | None:
        """Slurm has forgotten the job (MinJobAge passed, no accounting): trust what it left us."""
        known = _state(job)
        code = _exit_code_file(known)
        if code is not None:
            state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            reason = "Slurm no longer knows this job; exit code from its exit-code file"
        elif job.state == JobState.PENDING and not known.slurm_state:
            return None
        else:
            state, code = JobState.FAILED, None
            reason = "Slurm no longer knows this job and it left no exit code (killed or lost)"
        runs = _rank_runs(known)
        return JobUpdate(
            state=state,
            state_reason=failure_reason(reason, state, runs),
            ended=time.time(),
            exit_code=code,
            ranks=apply_runs(_ranks(known, known.nodes, state), runs, state),
            events=_with_event(job, reason),
            data=SlurmState(slurm_state="UNKNOWN"),
        )

    # -- cancel and logs -------------------------------------------------------------------------

    def cancel(self, job: StoredJob) -> JobUpdate:
        if not job.backend_id:
            return JobUpdate(
                state=JobState.CANCELLED,
                state_reason="cancelled before Slurm got it",
                ended=time.time(),
            )
        done = self.commands.run("scancel", [job.backend_id], ok_codes=(0, 1))
        if done.returncode != 0:
            message = (done.stderr or done.stdout).lower()
            if "already completing or completed" in message or "invalid job id" in message:
                return self.refresh([job]).get(job.id) or JobUpdate()
            raise _error_of("scancel", done)
        return JobUpdate(
            state=JobState.CANCELLED,
            state_reason=f"cancelled by {self.identity.name} (scancel {job.backend_id})",
            ended=time.time(),
            events=_with_event(job, f"scancel {job.backend_id}"),
            data=SlurmState(slurm_state="CANCELLED"),
        )

    def log_reader(self, job: StoredJob, rank: int) -> LogReader:
        world = int(_state(job).world_size or job.spec.world_size)
        if rank < 0 or rank >= world:
            raise InvalidRequest(f"rank must be between 0 and {world - 1}", field="rank")
        return FileLogReader(_rank_log_local(_state(job), rank))

    def dump_stacks(self, job: StoredJob) -> dict[int, RankStack]:
        """Every rank's Python stack, through `srun --overlap --jobid` (backends/slurm/stacks.py)."""
        from .stacks import dump_stacks

        return dump_stacks(self, job)

    def diagnose(self) -> list[DiagnosticCheck]:
        """The client commands, munge, slurmctld and the partition (backends/slurm/diagnose.py)."""
        from .diagnose import slurm_checks

        return slurm_checks(self)

    # -- the cluster's queue (queue.py) ----------------------------------------------------------

    def queue(self) -> QueueSnapshot:
        return slurm_queue.list_queue(self.commands, self.identity)

    def adopt(self, queue_id: str) -> Adoption:
        return slurm_queue.adopt(self.commands, self.identity, queue_id)

    def queue_log(self, row: QueueJob, tail: int) -> bytes:
        reader = FileLogReader(row.log or "")
        try:
            return reader.tail(tail)[0]
        finally:
            reader.close()

    def close(self) -> None:
        self.commands.close()


def _details_unknown(job: StoredJob) -> bool:
    """A running job whose real output path, or the GPUs it asked for, scontrol has not told us
    yet (a job adopted while pending has its path but not its GPUs)."""
    known = _state(job)
    return not known.stdout_known or (bool(job.spec.gpus_per_node) and known.gpu_index is None)


def _state(job: StoredJob) -> SlurmState:
    return SlurmState.load(job.data)


def _with_event(job: StoredJob, event: str, keep: int = 20) -> list[str]:
    """The job's recent events (kept on the job, once) with one more."""
    return _with_events(job, [event], keep)


def _with_events(job: StoredJob, events: list[str], keep: int = 20) -> list[str]:
    return [*job.events, *events][-keep:]


def _json_or_none(text: str) -> dict[str, Any] | None:
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _node_order(node: Node) -> tuple[str, int, str]:
    digits = "".join(ch for ch in node.name if ch.isdigit())
    return (node.name.rstrip("0123456789"), int(digits) if digits else 0, node.name)


def _error_of(name: str, done: Any) -> Exception:
    return command_error(name, done.returncode, done.stderr or done.stdout)


def _state_reason(record: slurm_jobs.JobRecord) -> str | None:
    if record.state == JobState.PENDING and record.reason:
        return f"waiting in the queue: {record.reason}"
    if record.state.finished and record.slurm_state.split()[0] not in ("COMPLETED", "CANCELLED"):
        return record.slurm_state + (f" ({record.reason})" if record.reason else "")
    if record.slurm_state.startswith("CANCELLED"):
        return record.slurm_state
    return None


def _local_path(data: SlurmState, cluster_path: str) -> str:
    """A path under the job directory, as this machine sees it."""
    job_dir, local_dir = data.job_dir, data.job_dir_local
    if (
        job_dir
        and local_dir
        and (cluster_path == job_dir or cluster_path.startswith(job_dir.rstrip("/") + "/"))
    ):
        return local_dir + cluster_path[len(job_dir.rstrip("/")) :]
    return cluster_path


def _srun_failure(data: SlurmState, reason: str | None) -> str | None:
    """A job of its own script (no rank records): the task srun names in its output."""
    from .user_script import failed_task

    reader = FileLogReader(_output_local(data))
    try:
        text = reader.tail(200)[0].decode("utf-8", "replace")
    except OSError:
        return reason
    finally:
        reader.close()
    named = failed_task(text)
    if named is None:
        return reason
    return f"{reason}: {named}" if reason else named


def _output_local(data: SlurmState) -> str:
    """The batch script's output (Slurm's StdOut) as this machine sees it."""
    return _local_path(data, str(data.stdout or output_path(data.job_dir or "", data.slurm_id)))


def _rank_log_local(data: SlurmState, rank: int) -> str:
    own = Path(data.job_dir_local or "") / rank_log_name(rank)
    if rank == 0 and not (data.task_logs and own.exists()):
        # A user's script that has not started an srun yet (or never does): its own output.
        return _output_local(data)
    return str(own)


def _exit_code_file(data: SlurmState) -> int | None:
    local_dir = data.job_dir_local
    if not local_dir:
        return None
    try:
        return int(Path(local_dir, EXIT_CODE_NAME).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _rank_runs(data: SlurmState) -> dict[int, RankRuns]:
    """The ranks' records, where this machine sees the job directory (rank_runs.py)."""
    if not data.job_dir_local:
        return {}
    return read_rank_runs(data.job_dir_local, int(data.world_size or 1))


def _attempts(data: SlurmState) -> int:
    return read_attempts(data.job_dir_local) if data.job_dir_local else 0


def _ranks(data: SlurmState, nodes: str | None, state: JobState) -> list[RankInfo]:
    world = int(data.world_size or 1)
    per_node = max(1, int(data.procs_per_node or 1))
    hosts = slurm_jobs.expand_hostlist(nodes)
    job_dir = (data.job_dir or "").rstrip("/")
    ranks = []
    for rank in range(world):
        node = None
        if hosts:  # srun and torchrun's static rendezvous both place ranks in node blocks
            node = hosts[min(rank // per_node, len(hosts) - 1)]
        own = rank > 0 or data.task_logs
        log = f"{job_dir}/{rank_log_name(rank)}" if own else data.stdout
        ranks.append(RankInfo(rank=rank, node=node, state=state.value, log=log))
    return ranks
