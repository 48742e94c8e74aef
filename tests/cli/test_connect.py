"""`connect` through AWS (moto's server, with the project's AWS test doubles): list HyperPod
clusters, write a kubeconfig context for an EKS one, refuse a Slurm one with the reason."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.error import UsageError

from tests.aws import conftest as aws_doubles
from tests.aws.conftest import create_eks_hyperpod, create_slurm_hyperpod, instance_group

from .conftest import cli

# moto's server and the per-test AWS environment of tests/aws (credentials, endpoint, reset).
moto_server = aws_doubles.moto_server
aws = aws_doubles.aws
pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("aws")]


def test_connect_lists_clusters_and_writes_a_context(shell: Any, tmp_path: Path) -> None:
    create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 2)])
    create_slurm_hyperpod("slurm-cluster", [instance_group("workers", 1)])

    listing = shell.run_line_magic("hyperpod", "connect")
    rows = {row[0]: (row[1], row[3]) for row in listing._table.rows}
    assert rows["ml-cluster"] == ("eks", "yes")
    assert (
        rows["slurm-cluster"][0] == "slurm"
        and "use the slurm orchestrator" in rows["slurm-cluster"][1]
    )
    data, _ = shell.display_formatter.format(listing)
    assert "ml-cluster" in data["text/html"]

    kubeconfig = tmp_path / "kubeconfig"
    connected = shell.run_line_magic(
        "hyperpod", f"connect ml-cluster --kubeconfig {kubeconfig} --namespace team-a"
    )
    # The core connected this process's service: it now runs on the cluster's kubernetes backend.
    assert connected.result.orchestrator == "kubernetes" and connected.result.name == "ml-cluster"
    written = yaml.safe_load(kubeconfig.read_text())
    assert written["current-context"] == connected.result.details["context"]
    context = next(c for c in written["contexts"] if c["name"] == written["current-context"])
    assert context["context"]["namespace"] == "team-a"

    with pytest.raises(UsageError, match=re.escape("is orchestrated by Slurm, not EKS")):
        shell.run_line_magic("hyperpod", "connect slurm-cluster")


def test_connect_from_the_cli(jupyter_env: dict[str, str]) -> None:
    create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 2)])
    jupyter_env = {**jupyter_env, **{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}

    listed = cli(jupyter_env, "connect", "--json")
    assert listed.returncode == 0, listed.stderr
    clusters = json.loads(listed.stdout)["clusters"]
    assert [(c["name"], c["orchestrator"], c["connectable"]) for c in clusters] == [
        ("ml-cluster", "eks", True)
    ]
    missing = cli(jupyter_env, "connect", "no-such-cluster")
    assert missing.returncode == 3 and "sagemaker:DescribeCluster" in missing.stderr

    # `python -m jupyter_hyperpod.aws connect` is the same connect (the core's), as JSON.
    kubeconfig = Path(jupyter_env["JUPYTER_CONFIG_DIR"]) / "kubeconfig"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "jupyter_hyperpod.aws", "connect", "ml-cluster"),
            *("--kubeconfig", str(kubeconfig), "--namespace", "team-b"),
        ],
        env=jupyter_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    connected = json.loads(done.stdout)
    assert connected["orchestrator"] == "kubernetes" and connected["name"] == "ml-cluster"
    written = yaml.safe_load(kubeconfig.read_text())
    assert written["current-context"] == connected["details"]["context"]
    assert connected["details"]["namespace"] == "team-b"
