"""SlurmOrchestrator against the real test cluster (slurmctld + 4 slurmd with fake GPUs)."""

from __future__ import annotations

import subprocess
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from jupyter_hyperpod.backends.slurm import backend as slurm_backend
from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.core.backend import Launch, StoredJob
from jupyter_hyperpod.core.errors import BackendUnavailable, InvalidRequest
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import SUBMITTED, Tracked, scontrol, submit, wait_state

pytestmark = pytest.mark.slurm

RANKS = textwrap.dedent(
    """
    import os, sys, time
    rank = int(os.environ["RANK"])
    print(f"rank={rank} world_size={os.environ['WORLD_SIZE']} node={os.environ['SLURMD_NODENAME']}"
          f" gpus={os.environ.get('CUDA_VISIBLE_DEVICES')}", flush=True)
    time.sleep(float(sys.argv[1]))
    if os.environ.get("FAIL_RANK") == str(rank):
        print("failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    """
)


@pytest.fixture
def ranks_script(project: Path) -> Path:
    path = project / "ranks.py"
    path.write_text(RANKS)
    return path


def spec(name: str, *args: str, **fields: object) -> JobSpec:
    return JobSpec(
        name=name, command=["ranks.py", *args], workdir="project", launcher="plain", **fields
    )


def test_cluster_facts(backend: SlurmOrchestrator) -> None:
    assert backend.cluster_name() == "hyperpod-test"
    details = backend.details()
    assert details["slurm_version"].startswith("22.") or details["slurm_version"] >= "23"
    assert details["accounting"] is False and details["hyperpod"] is False
    assert details["controllers"] == ["localhost:6817"]
    caps = backend.capabilities()
    assert caps.render_format == "sbatch" and caps.multi_node and caps.gpus


def test_nodes_show_gpus_allocated_by_a_job(
    backend: SlurmOrchestrator, settings: HyperPodSettings, ranks_script: Path
) -> None:
    tracked = submit(backend, settings, spec("gpus", "30", gpus_per_node=3))
    wait_state(backend, tracked, {JobState.RUNNING})
    for use_json in (True, False):
        backend.use_json = use_json
        listed = {node.name: node for node in backend.list_nodes()}
        assert sorted(listed) == ["node1", "node2", "node3", "node4"]
        busy = [node for node in listed.values() if node.gpus.allocated]
        assert len(busy) == 1, listed
        node = busy[0]
        assert (node.state, node.health, node.gpus.allocated, node.gpus.total) == (
            "mixed",
            "healthy",
            3,
            4,
        )
        assert (node.cpus, node.memory_mb, node.partitions, node.gpus.type) == (
            4,
            4000,
            ["debug"],
            "fake",
        )
        idle = [n for n in listed.values() if n is not node]
        assert {(n.state, n.gpus.allocated) for n in idle} == {("idle", 0)}
    log = backend.log_reader(tracked.job, 0)
    deadline = time.monotonic() + 20
    while b"gpus=" not in log.read(0, 4096) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "gpus=0,1,2" in log.read(0, 4096).decode()
    log.close()


def test_drained_node_shows_drained_with_its_reason(backend: SlurmOrchestrator) -> None:
    scontrol("update", "nodename=node3", "state=drain", "reason=GPU 2 fails deep health check")
    try:
        for use_json in (True, False):
            backend.use_json = use_json
            node = next(n for n in backend.list_nodes() if n.name == "node3")
            assert (node.state, node.health) == ("drained", "unhealthy")
            assert node.health_detail == "GPU 2 fails deep health check"
    finally:
        scontrol("update", "nodename=node3", "state=resume")
    # Slurm pings a resumed node before it counts again (not responding for a moment).
    deadline = time.monotonic() + 30
    while True:
        node = next(n for n in backend.list_nodes() if n.name == "node3")
        if node.state != "down" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (node.state, node.health, node.health_detail) == ("idle", "healthy", None)


def test_failed_rank_fails_the_job_with_its_exit_code_and_logs(
    backend: SlurmOrchestrator, settings: HyperPodSettings, ranks_script: Path
) -> None:
    tracked = submit(
        backend, settings, spec("fails", "0.5", procs_per_node=2, env={"FAIL_RANK": "1"})
    )
    wait_state(backend, tracked, {JobState.FAILED, JobState.SUCCEEDED})
    assert tracked.job.state == JobState.FAILED
    assert tracked.exit_code == 3
    assert tracked.ended is not None and tracked.job.started is not None
    assert "FAILED" in (tracked.reason or "")
    rank1 = backend.log_reader(tracked.job, 1).read(0, 10_000).decode()
    assert "rank=1 world_size=2" in rank1 and "failing on purpose" in rank1
    rank0 = backend.log_reader(tracked.job, 0).read(0, 10_000).decode()
    assert "rank=0 world_size=2" in rank0 and "finished with exit code 3" in rank0
    assert [(r.rank, r.node) for r in tracked.ranks or []] == [(0, "node1"), (1, "node1")]
    with pytest.raises(InvalidRequest):
        backend.log_reader(tracked.job, 2)


def test_status_polling_is_one_query_for_all_jobs(
    backend: SlurmOrchestrator,
    settings: HyperPodSettings,
    ranks_script: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend.slurm_config()
    tracked = [submit(backend, settings, spec(f"batch-{i}", "1.5")) for i in range(3)]
    wait_state(backend, tracked, {JobState.RUNNING, JobState.SUCCEEDED})
    backend.commands.history.clear()
    updates = backend.refresh([t.job for t in tracked if t.job.state == JobState.RUNNING])
    assert [call[0] for call in backend.commands.history] == ["squeue"]
    # Their output paths were asked once, when they started (one scontrol for all of them).
    assert all(t.job.data["stdout_known"] for t in tracked if t.job.state == JobState.RUNNING)
    for t in tracked:
        t.apply(updates.get(t.job.id))
    ids = ",".join(t.job.backend_id or "" for t in tracked)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until Slurm says all three have ended
        states = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", ids, "-o", "%T"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if states == ["COMPLETED"] * 3:
            break
        time.sleep(0.3)
    # Then one squeue, and scontrol for their exit codes: once per job (side by side) while they
    # are few, since scontrol without an id shows every job the controller holds.
    backend.commands.history.clear()
    updates = backend.refresh([t.job for t in tracked])
    assert backend.commands.history == [
        ["squeue", *backend.commands.history[0][1:]],
        *(["scontrol", "-o", "-d", "show", "job", t.job.backend_id] for t in tracked),
    ]
    assert {u.state for u in updates.values()} == {JobState.SUCCEEDED}
    assert {u.exit_code for u in updates.values()} == {0}
    # More of them: one scontrol for all it holds, and the same answer.
    monkeypatch.setattr(slurm_backend, "SCONTROL_ONE_BY_ONE", 2)
    backend.commands.history.clear()
    again = backend.refresh([t.job for t in tracked])
    assert [call[0] for call in backend.commands.history] == ["squeue", "scontrol"]
    assert backend.commands.history[1] == ["scontrol", "-o", "-d", "show", "job"]
    assert {job_id: (u.state, u.exit_code) for job_id, u in again.items()} == {
        job_id: (u.state, u.exit_code) for job_id, u in updates.items()
    }


def test_cancel_a_running_job(
    backend: SlurmOrchestrator, settings: HyperPodSettings, ranks_script: Path
) -> None:
    tracked = submit(backend, settings, spec("cancel-me", "301.5", nodes=2))
    wait_state(backend, tracked, {JobState.RUNNING})

    def sleepers() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"].startswith("python") and "301.5" in (p.info["cmdline"] or [])
        ]

    deadline = time.monotonic() + 20
    while len(sleepers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(sleepers()) == 2
    update = backend.cancel(tracked.job)
    assert update.state == JobState.CANCELLED
    tracked.apply(update)
    deadline = time.monotonic() + 20
    while sleepers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sleepers() == []
    squeue = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", tracked.job.backend_id or "", "-o", "%T"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert squeue[0] in ("CANCELLED", "COMPLETING")


def test_controller_restart_during_a_job(
    backend: SlurmOrchestrator, settings: HyperPodSettings, ranks_script: Path, controller_outage
) -> None:  # type: ignore[no-untyped-def]
    tracked = submit(backend, settings, spec("survives", "6", nodes=2))
    wait_state(backend, tracked, {JobState.RUNNING})
    controller_outage.stop()
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="slurmctld"):
        backend.refresh([tracked.job])
    with pytest.raises(BackendUnavailable, match="slurmctld"):
        backend.list_nodes()
    assert time.monotonic() - started < 5  # the probe answers at once, not after Slurm's retries
    assert tracked.job.state == JobState.RUNNING
    # A server that starts now has never heard from slurmctld: the slurm.conf Slurm's clients
    # read names whom to probe, so it fails as fast (it waited out MessageTimeout, 9 s here).
    fresh = SlurmOrchestrator(settings=settings)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="cannot connect to slurmctld at localhost:6817"):
        fresh.list_nodes()
    assert time.monotonic() - started < 5
    time.sleep(7)  # the job ends while the controller is away
    controller_outage.start()
    wait_state(
        backend, tracked, {JobState.SUCCEEDED, JobState.FAILED}, timeout=120, through_outage=True
    )
    assert (tracked.job.state, tracked.exit_code) == (JobState.SUCCEEDED, 0)
    assert "rank=1 world_size=2" in backend.log_reader(tracked.job, 1).read(0, 4096).decode()


def test_a_job_slurm_forgot_ends_from_its_exit_code_file(
    backend: SlurmOrchestrator, tmp_path: Path
) -> None:
    job_dir = tmp_path / "forgotten"
    job_dir.mkdir()
    job = StoredJob(
        id="old",
        spec=JobSpec(name="old", command=["x"]),
        state=JobState.RUNNING,
        backend_id="987654",  # never existed: squeue and scontrol both say "invalid job id"
        created=time.time() - 3600,
        started=time.time() - 3500,
        data={"job_dir": str(job_dir), "job_dir_local": str(job_dir), "slurm_state": "RUNNING"},
    )
    update = backend.refresh([job])["old"]
    assert update.state == JobState.FAILED and "no longer knows" in (update.state_reason or "")
    (job_dir / "exit-code").write_text("0\n")
    update = backend.refresh([job])["old"]
    assert (update.state, update.exit_code) == (JobState.SUCCEEDED, 0)


def test_jobs_see_the_file_system_elsewhere(
    backend: SlurmOrchestrator, settings: HyperPodSettings, ranks_script: Path, tmp_path: Path
) -> None:
    """Nodes mount the shared FS at another path (HyperPod: /fsx vs Studio's mount): the script
    uses the nodes' paths, the logs and the exit code are read through this machine's."""
    cluster_root = tmp_path / "cluster view 100%"  # sbatch quoting, and % doubled for Slurm
    cluster_root.symlink_to(Path(settings.shared_fs_root))
    local_dir = Path(settings.shared_fs_root) / "shared" / ".hyperpod" / "jobs" / "moved"
    job_spec = spec("moved", "0.2", procs_per_node=2)
    launch = Launch(
        job_id="moved",
        spec=job_spec,
        user="alice",
        command=list(job_spec.command),
        workdir=str(cluster_root / "shared" / "project"),
        job_dir=str(cluster_root / "shared" / ".hyperpod" / "jobs" / "moved"),
        job_dir_local=local_dir,
    )
    update = backend.submit(launch)
    SUBMITTED.append(update.backend_id or "")
    assert update.data and str(cluster_root) in (update.data.stdout or "")
    tracked = Tracked(job_spec, update, "moved")
    wait_state(backend, tracked, {JobState.SUCCEEDED, JobState.FAILED})
    cluster_root.unlink()  # from now on only this machine's paths work

    assert (tracked.job.state, tracked.exit_code) == (JobState.SUCCEEDED, 0)
    assert tracked.job.data["stdout_known"]  # StdOut as scontrol said, '%%' and all
    assert tracked.job.data["stdout"].startswith(str(cluster_root) + "/")
    assert "rank=0 world_size=2" in backend.log_reader(tracked.job, 0).read(0, 4096).decode()
    assert "rank=1 world_size=2" in backend.log_reader(tracked.job, 1).read(0, 4096).decode()
    forgotten = StoredJob(**{**tracked.job.__dict__, "backend_id": "987655"})
    assert backend.refresh([forgotten])["moved"].exit_code == 0  # exit-code file, local path


def user_jobs() -> set[str]:
    listed = subprocess.run(
        ["squeue", "-h", "-u", "root", "-o", "%i"], capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def test_submits_take_the_sbatch_started_ahead_and_an_unused_one_submits_nothing(
    slurm_cluster: None, settings: HyperPodSettings, ranks_script: Path
) -> None:
    backend = SlurmOrchestrator(settings=settings, standby_seconds=60.0)
    try:
        first = submit(backend, settings, spec("ahead-one", "0"))
        deadline = time.monotonic() + 10
        while backend.commands.standby.waiting_pid is None:
            assert time.monotonic() < deadline, "no sbatch was started ahead"
            time.sleep(0.01)
        second = submit(backend, settings, spec("ahead-two", "0", procs_per_node=2))
        assert backend.commands.standby.taken == 1
        for tracked, name, tasks in ((first, "ahead-one", 1), (second, "ahead-two", 2)):
            shown = scontrol("-o", "show", "job", str(tracked.job.backend_id))
            job_dir = tracked.job.data["job_dir"]
            assert f"JobName={name} " in shown and f"WorkDir={job_dir} " in shown
            assert f"NumTasks={tasks} " in shown, shown
        wait_state(backend, [first, second], {JobState.SUCCEEDED, JobState.FAILED})
        assert [first.job.state, second.job.state] == [JobState.SUCCEEDED] * 2
        log = backend.log_reader(second.job, 1).read(0, 10_000).decode()
        assert "rank=1 world_size=2" in log

        deadline = time.monotonic() + 10
        while (waiting := backend.commands.standby.waiting_pid) is None:
            assert time.monotonic() < deadline, "no sbatch was started ahead"
            time.sleep(0.01)
        before = user_jobs()
    finally:
        backend.close()
    assert not psutil.pid_exists(waiting)
    assert user_jobs() <= before  # the standby, stopped, submitted nothing


def test_an_sbatch_whose_script_never_comes_submits_nothing(slurm_cluster: None) -> None:
    """What a standby does when its server dies: its input ends empty."""
    before = user_jobs()
    done = subprocess.run(
        ["sbatch", "--parsable"], input="", capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and "Batch script is empty" in done.stderr
    assert user_jobs() <= before
