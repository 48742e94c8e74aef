"""`connect --slurm` end to end: a fresh login node of the real Slurm test cluster.

The HyperPod cluster is moto's (SageMaker over real HTTP, with tests/aws's patches: EC2 instance
ids, DescribeClusterNode's private address, ssm:StartSession); the controller's address is this
machine's slurmctld (localhost, 127.0.0.1). The SSM session is the Session Manager plugin's double
(`tests/aws/ssm_plugin_double.py`, each behaviour cited there), which runs the document's command
here as the controller node would: it reads the test cluster's munge key and ids.

The login node is fresh: its own directory (HYPERPOD_LOGIN_ROOT layout) with no slurm.conf and no
key, its own munged on its own socket; only the client commands are shared with the machine.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.aws.slurm_login.node import LoginPaths, Node
from jupyter_hyperpod.aws.slurm_login.runner import Completed, ProcessRunner
from jupyter_hyperpod.aws.slurm_login.setup import connect_slurm
from jupyter_hyperpod.aws.slurm_login.ssm import EOF_MESSAGE, SessionManager
from jupyter_hyperpod.core.errors import BackendUnavailable, Conflict, Forbidden
from tests.aws import conftest as aws_doubles
from tests.aws.conftest import create_slurm_hyperpod, instance_group

from .conftest import LOGIN_FIGURES

moto_server = aws_doubles.moto_server
aws = aws_doubles.aws
pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("aws")]
DOUBLE = Path(aws_doubles.__file__).with_name("ssm_plugin_double.py")
CONTROLLERS = "controller-machine"


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin's double first on PATH; its log of every session."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "session-manager-plugin"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    log = tmp_path / "ssm.log"
    monkeypatch.setenv("HP_SSM_LOG", str(log))
    monkeypatch.setenv("HP_SSM_STATE", str(tmp_path / "ssm.state"))
    return log


@pytest.fixture
def login_root() -> Iterator[Path]:
    """The fresh login node's directory; its munged is stopped afterwards."""
    root = Path(f"/run/hyperpod-login-test-{secrets.token_hex(4)}")
    root.mkdir(mode=0o755)
    root.chmod(0o755)  # munged (as munge) walks down to its socket and key
    yield root
    pidfile = Path(LoginPaths.under(str(root)).munge_pidfile)
    if pidfile.exists():
        subprocess.run(["kill", pidfile.read_text().strip()], check=False)
        time.sleep(0.3)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def hyperpod() -> dict[str, Any]:
    """A HyperPod Slurm cluster whose one controller is this machine's slurmctld."""
    import boto3

    arn = create_slurm_hyperpod(
        "ml-slurm",
        [instance_group(CONTROLLERS, 1, "ml.m5.xlarge"), instance_group("worker-group-1", 2)],
    )
    sagemaker = boto3.client("sagemaker")
    nodes = sagemaker.list_cluster_nodes(ClusterName="ml-slurm")["ClusterNodeSummaries"]
    controller = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == CONTROLLERS)
    aws_doubles.NODE_ADDRESSES[controller] = ("127.0.0.1", "localhost")
    return {"arn": arn, "controller": controller, "sagemaker": sagemaker}


def setup(hyperpod: dict[str, Any], root: Path, **kwargs: Any) -> dict[str, Any]:
    import boto3

    runner = kwargs.pop("runner", ProcessRunner())
    return connect_slurm(
        "ml-slurm",
        sagemaker=hyperpod["sagemaker"],
        ssm=SessionManager(boto3.client("ssm"), runner),
        runner=runner,
        region="us-east-1",
        paths=LoginPaths.under(str(root)),
        sleep=lambda _: None,
        **kwargs,
    )


def slurm(paths: LoginPaths, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run(
        list(args),
        env={**env, "SLURM_CONF": paths.conf},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_fresh_login_node_can_sinfo_and_submit(
    slurm_cluster: None, hyperpod: dict[str, Any], login_root: Path, plugin: Path
) -> None:
    paths = LoginPaths.under(str(login_root))
    assert not Path(paths.conf).exists() and not Path(paths.munge_key).exists()
    assert slurm(paths, "sinfo").returncode != 0  # no slurm.conf: not a login node yet

    # The first three sessions come back damaged as SSM damages them: each is detected, retried.
    os.environ["HP_SSM_FAULTS"] = "eof,truncate,interleave"
    started = time.monotonic()
    try:
        result = setup(hyperpod, login_root)
    finally:
        del os.environ["HP_SSM_FAULTS"]
    LOGIN_FIGURES["setup seconds"] = round(time.monotonic() - started, 2)

    assert [s["step"] for s in result["steps"]] == [
        "slurm client",
        "controllers",
        "root",
        "munge key",
        "slurm.conf",
        "munge and slurm ids",
        "install key",
        "munged",
        "munge check",
        "sinfo",
    ]
    assert result["ssm_sessions"] == 4 and result["cluster_name"] == "hyperpod-test"
    sessions = [json.loads(line) for line in plugin.read_text().splitlines()]
    assert [s["fault"] for s in sessions] == ["eof", "truncate", "interleave", "ok"]
    cluster_id = hyperpod["arn"].rsplit("/", 1)[-1]
    for session in sessions:
        # AWS's target format and the seed's document; a terminal; the response in the variable.
        assert session["request"]["Target"] == (
            f"sagemaker-cluster:{cluster_id}_{CONTROLLERS}-{hyperpod['controller']}"
        )
        assert session["request"]["DocumentName"] == "AWS-StartInteractiveCommand"
        assert session["tty"] and session["first"] == "AWS_SSM_START_SESSION_RESPONSE"
        assert session["argv"][:2] == ["us-east-1", "StartSession"]
    assert len(aws_doubles.SSM_SESSIONS) == 4

    conf = Path(paths.conf).read_text()
    assert "SlurmctldHost=localhost(127.0.0.1)\n" in conf
    assert "ClusterName=hyperpod-test\n" in conf and "AuthType=auth/munge\n" in conf
    assert f"AuthInfo=socket={paths.munge_socket}\n" in conf
    key = os.stat(paths.munge_key)
    assert stat.S_IMODE(key.st_mode) == 0o400 and pwd.getpwuid(key.st_uid).pw_name == "munge"
    assert Path(paths.munge_key).read_bytes() == Path("/etc/munge/munge.key").read_bytes()

    # The login node's own munged, key and conf: sinfo answers, a job runs.
    info = slurm(paths, "sinfo", "-h", "-o", "%P %D")
    assert info.returncode == 0 and info.stdout.split() == ["debug*", "4"], info.stderr
    submitted = slurm(
        paths, "sbatch", "--parsable", "--wrap", "echo login-node-ok", "-o", "/dev/null"
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = slurm(paths, "scontrol", "show", "job", job).stdout
        if "JobState=COMPLETED" in shown:
            break
        time.sleep(0.3)
    assert "JobState=COMPLETED" in shown
    LOGIN_FIGURES["ssm sessions"] = result["ssm_sessions"]
    LOGIN_FIGURES["damaged frames detected and fetched again"] = 3
    LOGIN_FIGURES["fresh node: sinfo"] = "ok"
    LOGIN_FIGURES["fresh node: sbatch job"] = f"{job} COMPLETED"

    # Connected again: found working, nothing fetched nor restarted.
    again = setup(hyperpod, login_root)
    assert [s["step"] for s in again["steps"]] == ["slurm client", "controllers", "login node"]
    assert len(aws_doubles.SSM_SESSIONS) == 4


class NoTerminal(ProcessRunner):
    """What a plain `subprocess.run` of the plugin gets: no pseudo-terminal."""

    def run(self, argv: Any, **kwargs: Any) -> Completed:
        kwargs["tty"] = False
        kwargs.setdefault("input", "")  # stdin: a pipe that ends at once
        return super().run(argv, **kwargs)


def test_a_session_without_a_terminal_gets_no_key_and_says_so(
    slurm_cluster: None, hyperpod: dict[str, Any], login_root: Path, plugin: Path
) -> None:
    with pytest.raises(BackendUnavailable) as raised:
        setup(hyperpod, login_root, runner=NoTerminal(), attempts=2)
    message = raised.value.message
    assert message.startswith("step 'munge key' failed: the munge key did not arrive whole in 2")
    assert EOF_MESSAGE in message and getattr(raised.value, "step", "") == "munge key"
    assert not Path(LoginPaths.under(str(login_root)).munge_key).exists()


def test_an_unreachable_controller_names_the_step(
    slurm_cluster: None, hyperpod: dict[str, Any], login_root: Path, plugin: Path
) -> None:
    cluster_id = hyperpod["arn"].rsplit("/", 1)[-1]
    aws_doubles.SSM_OFFLINE.add(
        f"sagemaker-cluster:{cluster_id}_{CONTROLLERS}-{hyperpod['controller']}"
    )
    with pytest.raises(BackendUnavailable, match=r"step 'munge key'.*not reachable over SSM"):
        setup(hyperpod, login_root)


def test_without_root_it_prints_the_one_command(
    slurm_cluster: None, hyperpod: dict[str, Any], login_root: Path, plugin: Path
) -> None:
    """Not root and no passwordless sudo (this machine has no sudo at all, or it asks)."""

    class NoSudo(ProcessRunner):
        def run(self, argv: Any, **kwargs: Any) -> Completed:
            if list(argv)[:1] == ["sudo"]:
                return Completed(list(argv), 1, "", "sudo: a password is required")
            return super().run(argv, **kwargs)

    with pytest.raises(Forbidden) as raised:
        setup(hyperpod, login_root, runner=NoSudo(), euid=1000)
    message = raised.value.message
    assert message.startswith("step 'root' failed:") and "no passwordless sudo" in message
    assert (
        "run once: sudo -E " in message
        and " -m jupyter_hyperpod.aws slurm-login ml-slurm" in message
    )
    assert aws_doubles.SSM_SESSIONS == []  # nothing fetched before it could be installed
    LOGIN_FIGURES["no root: one sudo command printed"] = "yes"


@pytest.fixture
def scratch_user() -> Iterator[str]:
    name = f"hpalign{secrets.token_hex(2)}"
    subprocess.run(["groupadd", "-g", "45601", name], check=True)
    subprocess.run(["useradd", "-M", "-u", "45601", "-g", "45601", name], check=True)
    yield name
    subprocess.run(["userdel", name], check=False)
    subprocess.run(["groupdel", name], check=False)


def test_ids_are_aligned_with_the_controllers(scratch_user: str) -> None:
    node = Node(ProcessRunner())
    assert node.align(scratch_user, 45602, 45603).endswith("uid 45601 -> 45602, gid 45601 -> 45603")
    entry = pwd.getpwnam(scratch_user)
    assert (entry.pw_uid, entry.pw_gid) == (45602, 45603)
    assert "as on the controller" in node.align(scratch_user, 45602, 45603)
    with pytest.raises(Conflict, match=r"uid 0 of the controller's .* is root's here"):
        node.align(scratch_user, 0, 45603)


async def test_post_aws_connect_makes_the_servers_machine_a_login_node(
    slurm_cluster: None,
    hyperpod: dict[str, Any],
    login_root: Path,
    plugin: Path,
    api: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The panel's Connect dialog and the CLI send this; the server runs the same core path."""
    monkeypatch.setenv("HYPERPOD_LOGIN_ROOT", str(login_root))
    # Recorded, so that the SLURM_CONF the switch sets is removed after the test.
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    # (tests/slurm's server starts on the slurm orchestrator with the machine's own slurm.conf)
    assert (await api.get("cluster")).status == 200

    refused = await api.call("POST", "aws/connect", {"cluster": "ml-slurm", "slurm": "maybe"})
    assert refused.status == 400

    reply = await api.post(
        "aws/connect", {"cluster": "ml-slurm", "slurm": True, "controller_group": CONTROLLERS}
    )
    assert reply.status == 200, reply.body
    login = reply.body["details"]["login_node"]
    assert reply.body["orchestrator"] == "slurm" and reply.body["name"] == "hyperpod-test"
    assert login["slurm_conf"] == LoginPaths.under(str(login_root)).conf
    assert login["steps"][-1]["step"] == "sinfo"
    assert os.environ["SLURM_CONF"] == login["slurm_conf"]
    nodes = (await api.get("nodes")).body
    assert len(nodes["nodes"]) == 4

    unknown = await api.call(
        "POST", "aws/connect", {"cluster": "ml-slurm", "slurm": True, "controller_group": "nope"}
    )
    assert unknown.status == 400 and "step 'controllers' failed" in unknown.body["error"]["message"]
