"""`jupyter hyperpod connect` with a server running: the core's connect runs in the server (moto's
AWS, the Kubernetes emulator as the EKS endpoint), which writes its kubeconfig context and
switches to the cluster; the standalone-only options are refused with the reason."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.aws import conftest as aws_doubles
from tests.aws import test_rest_connect as rest_connect

from .test_cli import run_async

# The AWS doubles (moto's server, the per-test AWS environment) and the EKS emulator of tests/aws.
moto_server = aws_doubles.moto_server
aws = aws_doubles.aws
kubeconfig_path = rest_connect.kubeconfig_path
jp_server_config = rest_connect.jp_server_config
eks_emulator = rest_connect.eks_emulator
clusters = rest_connect.clusters
pytestmark = pytest.mark.timeout(120)


async def test_connect_switches_the_running_server(
    jp_serverapp: Any, jp_fetch: Any, api: Any, clusters: str, kubeconfig_path: Path
) -> None:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(kubeconfig_path.parent.parent)}
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]
    url = ["--url", jp_serverapp.connection_url, "--token", jp_serverapp.identity_provider.token]
    assert (await api.get("cluster")).body["orchestrator"] == "local"

    code, out, err = await run_async(env, *base, "connect", "--json", *url)
    assert code == 0, err
    listed = {c["name"]: c for c in json.loads(out)["clusters"]}
    assert listed["ml-cluster"]["connectable"] and not listed["slurm-cluster"]["connectable"]

    code, out, err = await run_async(env, *base, "connect", "ml-cluster", "--json", *url)
    assert code == 0, err
    connected = json.loads(out)
    assert connected["orchestrator"] == "kubernetes" and connected["name"] == "ml-cluster"
    served = (await api.get("cluster")).body
    assert served["orchestrator"] == "kubernetes"
    assert served["details"]["context"] == connected["details"]["context"]
    assert kubeconfig_path.exists()  # the server's kubeconfig (c.KubernetesOrchestrator)

    code, _, err = await run_async(env, *base, "connect", "slurm-cluster", *url)
    assert code == 2 and "orchestrated by Slurm, not EKS" in err

    code, _, err = await run_async(
        env, *base, "connect", "ml-cluster", "--kubeconfig", "/tmp/other", *url
    )
    assert code == 2 and "uses its own AWS credentials and kubeconfig" in err
