"""`connect --slurm` without the Slurm cluster: the controllers through moto's SageMaker (over
real HTTP, with this directory's patches), the slurm.conf of several controllers, the Studio
lifecycle configuration. End to end against real Slurm: tests/slurm/test_login_node.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from jupyter_hyperpod.aws.slurm_login import slurmconf
from jupyter_hyperpod.aws.slurm_login.controllers import find_controllers
from jupyter_hyperpod.aws.slurm_login.node import LoginPaths
from jupyter_hyperpod.aws.slurm_login.runner import ProcessRunner
from jupyter_hyperpod.aws.slurm_login.setup import connect_slurm
from jupyter_hyperpod.aws.slurm_login.ssm import SessionManager
from jupyter_hyperpod.core.errors import AwsDenied, InvalidRequest

from .conftest import (
    NODE_ADDRESSES,
    SSM_DENIED,
    create_eks_hyperpod,
    create_slurm_hyperpod,
    instance_group,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("aws")]


def test_every_controller_goes_into_slurm_conf() -> None:
    arn = create_slurm_hyperpod(
        "ml-slurm",
        [
            instance_group("controller-machine", 2, "ml.m5.xlarge"),
            instance_group("controller-machine-spare", 1, "ml.m5.xlarge"),
            instance_group("worker-group-1", 3),
        ],
    )
    sagemaker = boto3.client("sagemaker")
    nodes = sagemaker.list_cluster_nodes(ClusterName="ml-slurm")["ClusterNodeSummaries"]
    ids = sorted(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller-machine")
    for i, instance in enumerate(ids):
        NODE_ADDRESSES[instance] = (f"10.1.0.{10 + i}", f"ip-10-1-0-{10 + i}.ec2.internal")

    # Two groups are named like controllers: it asks rather than guesses.
    with pytest.raises(InvalidRequest, match="several look like it") as raised:
        find_controllers(sagemaker, "ml-slurm")
    assert raised.value.field == "controller_group"

    found = find_controllers(sagemaker, "ml-slurm", group="controller-machine")
    assert found.arn == arn and found.cluster_id == arn.rsplit("/", 1)[-1]
    # InstanceGroupNameContains matches the spare group too; only the named group counts.
    assert sorted(c.instance_id for c in found.controllers) == ids
    assert found.controllers[0].ssm_target(found.cluster_id) == (
        f"sagemaker-cluster:{found.cluster_id}_controller-machine-{found.controllers[0].instance_id}"
    )
    text = slurmconf.render("ML-Slurm", found.controllers)
    hosts = [line for line in text.splitlines() if line.startswith("SlurmctldHost=")]
    assert sorted(hosts) == [
        "SlurmctldHost=ip-10-1-0-10(10.1.0.10)",
        "SlurmctldHost=ip-10-1-0-11(10.1.0.11)",
    ]
    for line in (
        "ClusterName=ml-slurm",
        "AuthType=auth/munge",
        "CryptoType=crypto/munge",
        "SlurmUser=slurm",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        "LaunchParameters=use_interactive_step",
    ):
        assert line in text.splitlines()
    assert "AuthInfo" not in text  # the default munge socket


def test_an_eks_cluster_is_not_connected_as_slurm() -> None:
    create_eks_hyperpod("ml-eks", "hyperpod-eks", [instance_group("worker-group-1", 1)])
    with pytest.raises(InvalidRequest, match="orchestrated by EKS, not Slurm"):
        find_controllers(boto3.client("sagemaker"), "ml-eks")


def test_print_lifecycle_config() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "jupyter_hyperpod.cli", "connect", "ml-slurm", "--slurm"),
            *("--print-lifecycle-config", "--region", "us-west-2"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    script = done.stdout
    assert script.startswith("#!/bin/bash\n")
    assert " -m jupyter_hyperpod.aws slurm-login ml-slurm --region us-west-2" in script
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(shutil.which("sinfo") is None, reason="needs the Slurm client commands")
def test_a_denied_start_session_names_the_action_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = create_slurm_hyperpod(
        "ml-slurm", [instance_group("controller-machine", 1, "ml.m5.xlarge")]
    )
    sagemaker = boto3.client("sagemaker")
    node = sagemaker.list_cluster_nodes(ClusterName="ml-slurm")["ClusterNodeSummaries"][0]
    cluster_id = arn.rsplit("/", 1)[-1]
    SSM_DENIED.add(f"sagemaker-cluster:{cluster_id}_controller-machine-{node['InstanceId']}")
    # A plugin that is installed (it is never reached: StartSession is refused first).
    plugin = tmp_path / "session-manager-plugin"
    plugin.write_text("#!/bin/sh\necho 1.2.707.0\n")
    plugin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    runner = ProcessRunner()
    with pytest.raises(AwsDenied) as raised:
        connect_slurm(
            "ml-slurm",
            sagemaker=sagemaker,
            ssm=SessionManager(boto3.client("ssm"), runner),
            runner=runner,
            region="us-east-1",
            paths=LoginPaths.under(str(tmp_path / "login")),
            euid=0,
        )
    message = raised.value.message
    assert message.startswith("step 'munge key' failed: AWS denied ssm:StartSession")
    assert "the role needs the IAM permission ssm:StartSession" in message
    assert (
        f"Fix: allow ssm:StartSession on arn:aws:sagemaker:<region>:<account>:cluster/{cluster_id}"
        in message
    )
