"""Multi-node jobs whose ranks really find each other through what the operators give them: a
Kubeflow PyTorchJob (torchrun, c10d rendezvous on worker 0's Service from the operator's PET_*
variables) and a HyperPodPyTorchJob (hyperpodrun, here the shim of hyperpodrun_shim.py), each
rank in its own pod (hostname, /etc/hosts, /data) running torch's gloo all-reduce."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.models import JobState

from .conftest import make_launch, stored, wait_state
from .controller import Controller
from .test_journey import follow_until

WORKLOAD = Path(__file__).parent / "workloads" / "allreduce.py"


@pytest.mark.parametrize(
    ("kind", "nodes"),
    [
        ("PyTorchJob", 2),
        ("HyperPodPyTorchJob", 2),
        pytest.param("PyTorchJob", 4, marks=pytest.mark.slow),
        pytest.param("HyperPodPyTorchJob", 4, marks=pytest.mark.slow),
    ],
)
def test_ranks_rendezvous_and_all_reduce(
    backend: KubernetesOrchestrator,
    fs_root: Path,
    controller: Controller,
    kind: str,
    nodes: int,
) -> None:
    if not controller.kubelet.isolated:
        pytest.skip("pods need their own hostname and /etc/hosts (unshare is not allowed here)")
    shutil.copy(WORKLOAD, fs_root / "Data-Scientist" / "scripts" / "allreduce.py")
    launch = make_launch(
        fs_root, "allreduce", kind=kind, nodes=nodes, command=["scripts/allreduce.py"]
    )
    job = stored(launch, backend.submit(launch))
    readers = [backend.log_reader(job, rank) for rank in range(nodes)]
    final = wait_state(backend, job, JobState.SUCCEEDED, timeout=180)
    assert final.exit_code == 0 and len(final.ranks) == nodes
    total = nodes * (nodes + 1) // 2
    hosts = set()
    for rank, reader in enumerate(readers):
        text = follow_until(reader, r"all_reduce \d+", timeout=60)
        (line,) = [line for line in text.splitlines() if "all_reduce" in line]
        match = re.fullmatch(rf"rank (\d+)/{nodes} on (\S+): all_reduce {total}", line)
        assert match, text
        hosts.add(match.group(2))
        if kind == "HyperPodPyTorchJob":
            # A static rendezvous: the operator's rank for the pod is torch's rank.
            assert int(match.group(1)) == rank and match.group(2) == f"{job.backend_id}-pods-{rank}"
        reader.close()
    # Each rank ran in its own pod.
    replica = "pods" if kind == "HyperPodPyTorchJob" else "worker"
    assert hosts == {f"{job.backend_id}-{replica}-{i}" for i in range(nodes)}
    if kind == "PyTorchJob":
        pod = controller.runner_for(job.backend_id or "").pods[f"{job.backend_id}-worker-1"].pod
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["PET_RDZV_ENDPOINT"] == f"{job.backend_id}-worker-0:23456"
        assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_NNODES"] == f"{nodes}:{nodes}"
        assert "MASTER_ADDR" not in env  # no Master replica: the rendezvous is torchrun's
