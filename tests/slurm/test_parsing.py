"""Parsing what Slurm's clients print (samples as Slurm 22.05 printed them here); no cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm import jobs, nodes
from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.backends.slurm.commands import (
    DROPPED_ENV,
    SlurmCommands,
    command_error,
    controllers_in_conf,
    default_conf_path,
    parse_controllers,
)
from jupyter_hyperpod.core.backend import Launch
from jupyter_hyperpod.core.errors import BackendError, BackendUnavailable, InvalidRequest
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings

SINFO_JSON = {
    "meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}},
    "errors": [],
    "nodes": [
        {
            "name": "node2",
            "state": "mixed",
            "state_flags": [],
            "cpus": 4,
            "real_memory": 4000,
            "gres": "gpu:fake:4",
            "gres_used": "gpu:fake:3(IDX:0-2)",
            "partitions": ["debug"],
            "features": "",
            "active_features": "",
            "reason": "",
        },
        {
            "name": "node4",
            "state": "idle",
            "state_flags": ["DRAIN"],
            "cpus": 4,
            "real_memory": 4000,
            "gres": "gpu:fake:4",
            "gres_used": "gpu:fake:0(IDX:N/A)",
            "partitions": ["debug", "long"],
            "features": "ml.p5.48xlarge,efa",
            "active_features": "ml.p5.48xlarge,efa",
            "reason": "bad gpu 3",
        },
        {
            "name": "ip-10-1-2-3",
            "state": "down",
            "state_flags": ["NOT_RESPONDING"],
            "cpus": 96,
            "real_memory": 1100000,
            "gres": "gpu:a100:8(S:0-1)",
            "gres_used": "gpu:a100:0(IDX:N/A)",
            "partitions": ["dev"],
            "features": "",
            "reason": "Not responding",
        },
    ],
}

SINFO_TEXT = """\
node1|idle|0/4/0/4|4000|gpu:fake:4|gpu:fake:0(IDX:N/A)|debug*|(null)|none
node2|mixed|1/3/0/4|4000|gpu:fake:4|gpu:fake:3(IDX:0-2)|debug*|(null)|none
node4|idle+drain|0/0/4/4|4000|gpu:fake:4|gpu:fake:0(IDX:N/A)|debug*|ml.g5.12xlarge|bad gpu | 3|
node4|idle+drain|0/0/4/4|4000|gpu:fake:4|gpu:fake:0(IDX:N/A)|long|ml.g5.12xlarge|bad gpu | 3|
node5|allocated+drain|4/0/0/4|4000|gpu:fake:4|gpu:fake:4(IDX:0-3)|debug*|(null)|kernel update|
node6|down*|0/0/4/4|4000|(null)|gpu:0|debug*|(null)|Not responding|
"""

SCONTROL_JOB = (
    "JobId=2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 "
    "Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-11-30T19:10:10 EligibleTime=2026-11-30T19:10:10 StartTime=2026-11-30T19:10:11 "
    "EndTime=2026-11-30T19:10:11 Deadline=N/A Partition=debug AllocNode:Sid=localhost:3505 "
    "NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 "
    "TRES=cpu=2,node=2,billing=2 Features=(null) Command=(null) WorkDir=/tmp/a dir "
    "StdErr=/fsx/jobs/x/slurm-2.out StdIn=/dev/null StdOut=/fsx/jobs/x/slurm-2.out Power= "
)


def test_nodes_from_json_states_gpus_and_instance_type() -> None:
    parsed = {node.name: node for node in nodes.nodes_from_json(SINFO_JSON)}
    mixed = parsed["node2"]
    assert (mixed.state, mixed.health, mixed.cpus, mixed.memory_mb) == ("mixed", "healthy", 4, 4000)
    assert (mixed.gpus.total, mixed.gpus.allocated, mixed.gpus.type) == (4, 3, "fake")
    assert mixed.instance_type is None and mixed.health_detail is None

    drained = parsed["node4"]
    assert (drained.state, drained.health, drained.health_detail) == (
        "drained",
        "unhealthy",
        "bad gpu 3",
    )
    assert drained.instance_type == "ml.p5.48xlarge"
    assert drained.partitions == ["debug", "long"]
    assert drained.labels == {"slurm.features": "ml.p5.48xlarge,efa"}

    down = parsed["ip-10-1-2-3"]
    assert (down.state, down.health, down.health_detail) == ("down", "unhealthy", "Not responding")
    assert (down.gpus.total, down.gpus.allocated, down.gpus.type) == (8, 0, "a100")


def test_nodes_from_json_of_newer_slurm_state_lists() -> None:
    document = {
        "nodes": [{**SINFO_JSON["nodes"][0], "state": ["MIXED", "DRAIN"], "state_flags": None}]
    }
    (node,) = nodes.nodes_from_json(document)
    assert (node.state, node.health) == ("draining", "degraded")


def test_nodes_from_text_merges_partitions_and_keeps_reasons_whole() -> None:
    parsed = {node.name: node for node in nodes.nodes_from_text(SINFO_TEXT)}
    assert list(parsed) == ["node1", "node2", "node4", "node5", "node6"]
    assert (parsed["node1"].state, parsed["node1"].gpus.total, parsed["node1"].cpus) == (
        "idle",
        4,
        4,
    )
    assert parsed["node2"].gpus.allocated == 3
    assert parsed["node4"].state == "drained"
    assert parsed["node4"].health_detail == "bad gpu | 3"
    assert parsed["node4"].partitions == ["debug", "long"]
    assert parsed["node4"].instance_type == "ml.g5.12xlarge"
    assert (parsed["node5"].state, parsed["node5"].health) == ("draining", "degraded")
    assert parsed["node5"].health_detail == "kernel update"
    assert (parsed["node6"].state, parsed["node6"].gpus.total) == ("down", 0)


@pytest.mark.parametrize(
    ("gres", "used", "expected"),
    [
        ("gpu:a100:8(S:0-1)", "gpu:a100:2(IDX:0,5)", (8, 2, "a100")),
        ("gpu:4,shard:16", "gpu:1(IDX:3),shard:0", (4, 1, None)),
        ("gpu:a100:4,gpu:v100:2", "gpu:a100:1(IDX:0),gpu:v100:2(IDX:0-1)", (6, 3, "a100")),
        ("(null)", "", (0, 0, None)),
    ],
)
def test_gres_counts(gres: str, used: str, expected: tuple[int, int, str | None]) -> None:
    total, kind = nodes.gpu_total(gres)
    assert (total, nodes.gpu_used(used), kind) == expected


def test_job_states_map_to_ours() -> None:
    assert jobs.job_state("PENDING") == JobState.PENDING
    assert jobs.job_state("COMPLETING") == JobState.RUNNING
    assert jobs.job_state("COMPLETED") == JobState.SUCCEEDED
    assert jobs.job_state("CANCELLED by 0") == JobState.CANCELLED
    assert jobs.job_state("TIMEOUT") == JobState.FAILED
    assert jobs.job_state("NODE_FAIL") == JobState.FAILED
    assert jobs.job_state("OUT_OF_MEMORY") == JobState.FAILED
    assert jobs.job_state("CD") == JobState.SUCCEEDED


def test_squeue_rows() -> None:
    text = (
        "7|RUNNING|2026-11-30T19:10:01|2027-11-30T19:10:01|node[1-2]|None\n"
        "8|PENDING|N/A|N/A||Resources\n"
    )
    records = jobs.parse_squeue(text)
    assert records["7"].state == JobState.RUNNING and records["7"].end is None
    assert records["7"].start == time.mktime(
        time.strptime("2026-11-30T19:10:01", "%Y-%m-%dT%H:%M:%S")
    )
    assert records["7"].nodes == "node[1-2]" and records["7"].reason is None
    assert (records["8"].state, records["8"].reason, records["8"].start) == (
        JobState.PENDING,
        "Resources",
        None,
    )


def test_scontrol_job_line() -> None:
    (record,) = jobs.parse_scontrol_jobs(SCONTROL_JOB).values()
    assert (record.slurm_id, record.state, record.exit_code) == ("2", JobState.FAILED, 3)
    assert record.stdout == "/fsx/jobs/x/slurm-2.out"
    assert record.nodes == "node[1-2]" and record.reason == "NonZeroExitCode"
    assert jobs.parse_scontrol_line(SCONTROL_JOB)["WorkDir"] == "/tmp/a dir"
    escaped = SCONTROL_JOB.replace("StdOut=/fsx/jobs/x/", "StdOut=/fsx/100%% done/")
    (record,) = jobs.parse_scontrol_jobs(escaped).values()
    assert record.stdout == "/fsx/100% done/slurm-2.out"


def test_scontrol_of_every_job_parses_only_the_wanted_ones() -> None:
    """`scontrol show job` without an id lists every job the controller holds: ours only."""
    others = [SCONTROL_JOB.replace("JobId=2 ", f"JobId={n} ", 1) for n in (20, 200, 22)]
    text = "\n".join([*others, SCONTROL_JOB])
    assert set(jobs.parse_scontrol_jobs(text)) == {"20", "200", "22", "2"}
    assert set(jobs.parse_scontrol_jobs(text, wanted={"2", "22", "9"})) == {"2", "22"}
    assert jobs.parse_scontrol_jobs(text, wanted=set()) == {}


def test_scontrol_detail_gives_each_nodes_gpu_indices() -> None:
    # `scontrol -o -d show job` of the test cluster's Slurm 22.05 (a running 2-node job).
    line = (
        "JobId=2581 JobName=wrap JobState=RUNNING NodeList=node[1-2] BatchHost=node1 "
        "TRES=cpu=2,node=2,billing=2 JOB_GRES=gpu:fake:4   Nodes=node[1-2] CPU_IDs=0 Mem=0 "
        "GRES=gpu:fake:2(IDX:2-3) MinCPUsNode=1 StdOut=/tmp/slurm-2581.out"
    )
    (record,) = jobs.parse_scontrol_jobs(line).values()
    assert record.gpus == {"node1": ["2", "3"], "node2": ["2", "3"]}
    assert record.nodes == "node[1-2]" and record.stdout == "/tmp/slurm-2581.out"
    # Groups of nodes with different allocations, several GPU types, lists, no GPU on a node.
    detail = (
        "JobId=3 Nodes=ip-10-1-2-3 CPU_IDs=0-3 Mem=0 GRES=gpu:2(IDX:0,3) "
        "Nodes=ip-10-1-2-[4-5] CPU_IDs=0 Mem=1024 GRES=gpu:a100:1(IDX:2),gpu:v100:1(IDX:5) "
        "Nodes=ip-10-1-2-6 CPU_IDs=0 Mem=0 GRES= Features=(null)"
    )
    assert jobs.gpu_indices(detail) == {
        "ip-10-1-2-3": ["0", "3"],
        "ip-10-1-2-4": ["2", "5"],
        "ip-10-1-2-5": ["2", "5"],
    }
    assert jobs.gpu_indices(SCONTROL_JOB) == {}  # no -d: no groups


def test_sacct_rows() -> None:
    text = (
        "11|COMPLETED|0:0|2026-11-30T19:10:11|2026-11-30T19:10:20|node[1-2]|None\n"
        "12|CANCELLED by 0|0:15|2026-11-30T19:11:00|2026-11-30T19:11:05|node3|None\n"
        "13|PENDING|0:0|Unknown|Unknown|None assigned|Resources\n"
    )
    records = jobs.parse_sacct(text)
    assert (records["11"].state, records["11"].exit_code) == (JobState.SUCCEEDED, 0)
    assert (records["12"].state, records["12"].exit_code) == (JobState.CANCELLED, 128 + 15)
    assert (records["13"].state, records["13"].exit_code, records["13"].nodes) == (
        JobState.PENDING,
        None,
        None,
    )


def test_hostlists() -> None:
    assert jobs.expand_hostlist("node[1-3,7]") == ["node1", "node2", "node3", "node7"]
    assert jobs.expand_hostlist("gpu-[08-10],login") == ["gpu-08", "gpu-09", "gpu-10", "login"]
    assert jobs.expand_hostlist("ip-10-1-2-3") == ["ip-10-1-2-3"]
    assert jobs.expand_hostlist("rack[1-2]-n[1-2]") == [
        "rack1-n1",
        "rack1-n2",
        "rack2-n1",
        "rack2-n2",
    ]
    assert jobs.expand_hostlist(None) == []


def test_unreachable_controller_is_503_and_other_refusals_502() -> None:
    down = command_error(
        "squeue", 1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
    )
    assert isinstance(down, BackendUnavailable) and "slurmctld" in down.message
    refused = command_error(
        "sbatch", 1, "sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
    assert isinstance(refused, BackendError) and "Invalid partition name" in refused.message


def fails_fast_and_reaps(commands: SlurmCommands, message: str, hung: str) -> None:
    """`sinfo` (a client hung in `hung`) is a 503 matching `message` within 2 s, and the stalled
    client is gone, not left retrying."""
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=message):
        commands.run("sinfo", [])
    assert time.monotonic() - started < 2
    children = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", hung], check=False)
    assert children.returncode == 1  # no process matched


def test_missing_commands_and_refused_probes_are_503(tmp_path: Path) -> None:
    commands = SlurmCommands(bin_dir=str(tmp_path), stall_seconds=0.3)
    with pytest.raises(BackendUnavailable, match="not installed"):
        commands.run("sinfo", [])
    # A client that retries against a controller that is down: the probe answers at once.
    recording_sinfo(tmp_path, tmp_path / "calls", "exec sleep 30\n")
    commands.controllers = parse_controllers(
        "SlurmctldHost[0] = ctl(127.0.0.1)\nSlurmctldPort = 1\n"
    )
    fails_fast_and_reaps(commands, r"cannot connect to slurmctld at 127\.0\.0\.1:1", "sleep 30")


def test_a_command_past_its_time_limit_is_503_and_killed(tmp_path: Path) -> None:
    """No controller known (nothing to probe): the time limit alone ends a hung client."""
    recording_sinfo(tmp_path, tmp_path / "calls", "exec sleep 31\n")
    commands = SlurmCommands(bin_dir=str(tmp_path), timeout=0.5)
    fails_fast_and_reaps(commands, r"did not answer 'sinfo' within 0\.5 s", "sleep 31")


def test_a_command_that_answers_never_probes_the_controller(tmp_path: Path) -> None:
    """slurmctld logs each connection that sends nothing as an error: a healthy command makes
    none, a stalled one (controller up, only slow) one probe and then its answer."""
    recording_sinfo(tmp_path, tmp_path / "calls", "echo ok\n")
    with socket.socket() as controller:
        controller.bind(("127.0.0.1", 0))
        controller.listen()
        controller.setblocking(False)
        commands = SlurmCommands(bin_dir=str(tmp_path), stall_seconds=0.3)
        commands.controllers = parse_controllers(
            f"SlurmctldHost[0] = ctl(127.0.0.1)\nSlurmctldPort = {controller.getsockname()[1]}\n"
        )
        for _ in range(3):
            assert commands.run("sinfo", []).stdout == "ok\n"
        with pytest.raises(BlockingIOError):
            controller.accept()
        recording_sinfo(tmp_path, tmp_path / "calls", "sleep 0.8; echo late\n")
        assert commands.run("sinfo", []).stdout == "late\n"
        connection, _ = controller.accept()
        connection.close()


def test_controllers_from_config() -> None:
    text = (
        "SlurmctldHost[0]        = vm(localhost)\n"
        "SlurmctldHost[1]        = backup\n"
        "SlurmctldPort = 6817-6818\n"
    )
    assert [(c.host, c.port) for c in parse_controllers(text)] == [
        ("localhost", 6817),
        ("backup", 6817),
    ]


def test_controllers_from_slurm_conf() -> None:
    conf = (
        "# a comment: SlurmctldHost=nothere\n"
        "ClusterName=ml\n"
        "SlurmctldHost=head1(10.0.0.5)  # the primary\n"
        "slurmctldhost=head2\n"
        "SlurmctldPort=6900-6901\n"
        "NodeName=n[1-4] Gres=gpu:8\n"
    )
    assert [(c.host, c.port) for c in controllers_in_conf(conf)] == [
        ("10.0.0.5", 6900),
        ("head2", 6900),
    ]
    legacy = "ControlMachine=old\nControlAddr=10.0.0.9\nBackupController=old2\n"
    assert [(c.host, c.port) for c in controllers_in_conf(legacy)] == [("10.0.0.9", 6817)]
    assert controllers_in_conf("ClusterName=configless\n") == []
    # Without SLURM_CONF the clients read it where they were built to look.
    assert default_conf_path("/usr/bin/scontrol") == "/etc/slurm/slurm.conf"
    assert default_conf_path("/opt/slurm/bin/scontrol") == "/opt/slurm/etc/slurm.conf"
    assert default_conf_path("scontrol") == "/etc/slurm/slurm.conf"  # not installed


def test_before_slurmctld_first_answers_slurm_conf_names_whom_to_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started while slurmctld is down: its first command stalls (the clients retry
    for MessageTimeout), and the controller its slurm.conf names refuses: 503 within about a
    second, not after the clients' retries; with no slurm.conf, only the time limit ends it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text("#!/bin/sh\nexec sleep 30\n")
    scontrol.chmod(0o755)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=down\nSlurmctldHost=ctl(127.0.0.1)\nSlurmctldPort=1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(bin_dir), command_timeout=4.0)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"cannot connect to slurmctld at 127\.0\.0\.1:1"):
        backend.slurm_config()
    assert time.monotonic() - started < 2.5
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "none.conf"))
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(bin_dir), command_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"did not answer 'scontrol' within 1\.5 s"):
        backend.slurm_config()
    assert time.monotonic() - started >= 1.5


def test_server_secrets_and_allocation_variables_stay_out_of_jobs() -> None:
    assert DROPPED_ENV.match("JUPYTER_TOKEN") and DROPPED_ENV.match("JPY_SESSION_NAME")
    assert DROPPED_ENV.match("SLURM_JOB_ID") and DROPPED_ENV.match("SLURM_JWT")
    assert not DROPPED_ENV.match("SLURM_CONF") and not DROPPED_ENV.match("PATH")


def fake_scontrol(bin_dir: Path, port: int) -> None:
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f"printf 'ClusterName = fake\\nSlurmctldHost[0] = ctl(127.0.0.1)\\nSlurmctldPort = {port}\\n'\n"
    )
    script.chmod(0o755)


def recording_sinfo(bin_dir: Path, calls: Path, body: str) -> None:
    """An `sinfo` that appends its arguments to `calls`, then runs `body` (shell lines)."""
    sinfo = bin_dir / "sinfo"
    sinfo.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n{body}')
    sinfo.chmod(0o755)


def test_probe_is_armed_only_when_the_controller_answers_there(tmp_path: Path) -> None:
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        fake_scontrol(tmp_path / "up", listening.getsockname()[1])
        backend = SlurmOrchestrator(settings=settings, bin_dir=str(tmp_path / "up"))
        assert backend.cluster_name() == "fake"
        assert [(c.host, c.port) for c in backend.commands.controllers] == [
            ("127.0.0.1", listening.getsockname()[1])
        ]
    # The configured address does not answer from here although scontrol works: never probe.
    fake_scontrol(tmp_path / "elsewhere", 1)
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(tmp_path / "elsewhere"))
    assert backend.cluster_name() == "fake"
    assert backend.commands.controllers == []
    assert backend.slurm_config(force=True)["ClusterName"] == "fake"


def test_sinfo_without_json_falls_back_to_text_for_good(tmp_path: Path) -> None:
    """An older Slurm whose sinfo has no --json: the text form, and no second --json try."""
    bin_dir = tmp_path / "bin"
    fake_scontrol(bin_dir, 1)
    calls = tmp_path / "calls"
    recording_sinfo(
        bin_dir,
        calls,
        'if [ "$1" = --json ]; then echo "sinfo: unrecognized option \'--json\'" >&2; exit 1; fi\n'
        "printf 'node1|idle+drain|0/0/2/2|1000|gpu:t4:1|gpu:t4:0(IDX:N/A)|dev*|(null)|disk full|\\n'\n",
    )
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    # No node cache: each listing runs sinfo (the default answers 2 s from the last one).
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(bin_dir), node_cache_seconds=0)
    for _ in range(2):
        (node,) = backend.list_nodes()
        assert (node.name, node.state, node.health_detail, node.gpus.total) == (
            "node1",
            "drained",
            "disk full",
            1,
        )
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["--json", "-N", "-N"]


def test_node_listings_are_shared_for_node_cache_seconds(tmp_path: Path) -> None:
    """The panels of many users poll GET nodes: one sinfo answers them all for 2 s (the
    default, as Kubernetes' direct listing is kept), then the next caller lists again."""
    bin_dir = tmp_path / "bin"
    fake_scontrol(bin_dir, 1)
    calls = tmp_path / "calls"
    recording_sinfo(
        bin_dir,
        calls,
        "printf 'node1|idle|0/2/0/2|1000|gpu:t4:1|gpu:t4:0(IDX:N/A)|dev*|(null)|none|\\n'\n",
    )
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(bin_dir), use_json=False)
    assert backend.node_cache_seconds == 2.0
    first = backend.list_nodes()
    assert backend.list_nodes() is first
    assert len(calls.read_text().splitlines()) == 1
    backend.node_cache_seconds = 0.05
    time.sleep(0.1)
    assert [n.name for n in backend.list_nodes()] == ["node1"]
    assert len(calls.read_text().splitlines()) == 2


@pytest.mark.parametrize(
    ("refusal", "field", "words"),
    [
        (
            "Batch job submission failed: Invalid partition name specified",
            "queue",
            "(partitions: a, b)",
        ),
        (
            "Batch job submission failed: Requested node configuration is not available",
            "gpus_per_node",
            "2 rank(s) and 9 GPU(s) per node",
        ),
        ("Invalid generic resource (gres) specification", "gpus_per_node", "no GPUs as a generic"),
    ],
)
def test_sbatch_refusals_name_the_field(
    tmp_path: Path, refusal: str, field: str, words: str
) -> None:
    bin_dir = tmp_path / "bin"
    fake_scontrol(bin_dir, 1)
    for name, body in (
        ("sbatch", f'echo "sbatch: error: {refusal}" >&2; exit 1'),
        ("sinfo", "printf 'a\\nb\\na\\n'"),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    backend = SlurmOrchestrator(settings=settings, bin_dir=str(bin_dir))
    spec = JobSpec(name="a", command=["x"], procs_per_node=2, gpus_per_node=9, queue="nope")
    job_dir = tmp_path / "job"
    launch = Launch(
        job_id="a-1",
        spec=spec,
        user="alice",
        command=["x"],
        workdir=str(tmp_path),
        job_dir=str(job_dir),
        job_dir_local=job_dir,
    )
    with pytest.raises(InvalidRequest) as raised:
        backend.submit(launch)
    assert raised.value.field == field and words in raised.value.message
