"""The watchdog on the Kubernetes backend, the kubelet double running real gloo ranks in two pods:
one rank asleep before its all_reduce hangs the job; "Dump stacks" reaches both ranks through the
pods' exec subresource (the emulator's WebSocket of the v4.channel.k8s.io protocol, the kubelet
double's exec_in), the sleeping frame marked."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_hyperpod.core.models import Job
from jupyter_hyperpod.render import job_detail

from ..helpers import Api
from ..watchdog.test_local import watch_until
from .conftest import IMAGE
from .controller import Controller
from .emulator import EmulatorThread

pytest.importorskip("torch")
PROGRAM = Path(__file__).parents[1] / "watchdog" / "gloo_ranks.py"


@pytest.fixture
def k8s_traits(
    kubeconfig: Path, controller: Controller, fs_root: Path, k8s: EmulatorThread
) -> Iterator[dict[str, Any]]:
    controller.kubelet.claims["fsx-claim"] = str(fs_root)
    assert k8s.emulator is not None
    k8s.emulator.exec_runner = controller.kubelet.exec_in
    yield {"kubeconfig": str(kubeconfig), "image": IMAGE, "node_cache_seconds": 0.0}
    k8s.emulator.exec_runner = None
    controller.end_all_jobs()


@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any], k8s_traits: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
            "KubernetesOrchestrator": k8s_traits,
        }
    )


async def test_a_hang_in_pods_and_their_stacks_through_exec(api: Api, partition: Path) -> None:
    (partition / "project").mkdir()
    shutil.copy(PROGRAM, partition / "project" / "gloo_ranks.py")
    job = await api.submit(
        {
            "name": "hang",
            "command": ["gloo_ranks.py", "hang", "1000", "0.2"],
            "workdir": "project",
            "nodes": 2,
            "watchdog": {"hang_factor": 3, "hang_floor_seconds": 3},
            # Kubeflow's operator has no log monitoring: HyperPod's would act on the hang by
            # itself (test_hyperpod_acts_on_the_hang_and_the_panel_shows_its_verdict).
            "kind": "PyTorchJob",
        }
    )
    stalled = await watch_until(
        api, job["id"], lambda j: j["watchdog"] and j["watchdog"]["stalled_since"], timeout=180
    )
    assert stalled["state"] == "RUNNING"
    assert {r["step"] for r in stalled["watchdog"]["ranks"]} == {4}
    assert all(r["node"] for r in stalled["watchdog"]["stopped_first"])
    reply = await api.post(f"jobs/{job['id']}/stacks", {})
    assert reply.status == 200, reply.body
    by_rank = {r["rank"]: r for r in reply.body["ranks"]}
    assert set(by_rank) == {0, 1} and not [r for r in by_rank.values() if r["error"]], reply.body
    sleeper = [
        f for f in by_rank[1]["threads"][0]["frames"] if f["name"] == "sleep_before_all_reduce"
    ]
    assert sleeper and sleeper[0]["differs"]
    assert any(f["name"] == "all_reduce" for f in by_rank[0]["threads"][0]["frames"])
    assert all((r["node"] or "").startswith("hyperpod-i-") for r in by_rank.values())


async def test_hyperpod_acts_on_the_hang_and_the_panel_shows_its_verdict(
    api: Api, partition: Path
) -> None:
    """The HyperPodPyTorchJob carries our hang rule (logMonitoringConfiguration); the operator
    double's agents find it HANGING, the operator restarts the job once (retries 1), then fails
    it on the second hang. Its verdict, decided by the Kubernetes backend, is on the job (REST,
    the Python client's model, the CLI's words) beside our watchdog's."""
    (partition / "project").mkdir()
    shutil.copy(PROGRAM, partition / "project" / "gloo_ranks.py")
    job = await api.submit(
        {
            "name": "hp-hang",
            "command": ["gloo_ranks.py", "hang", "1000", "0.2"],
            "workdir": "project",
            "nodes": 2,
            "max_retries": 1,
            "kind": "HyperPodPyTorchJob",
            "watchdog": {"hang_factor": 3, "hang_floor_seconds": 2},
        }
    )
    restarting = await watch_until(api, job["id"], lambda j: j["operator_verdict"], timeout=180)
    verdict = restarting["operator_verdict"]
    assert verdict["state"] == "HANGING" and verdict["rule"] == "hyperpod-watchdog-hang"
    assert verdict["reason"] == "LogHang_hyperpod-watchdog-hang"
    assert verdict["action"].startswith("restart") and "restart 1" in verdict["action"]
    assert "step 4/1000" in (verdict["message"] or ""), verdict  # the last matched line
    assert verdict["nodes"] and set(verdict["ranks"]) <= {0, 1}
    failed = await watch_until(api, job["id"], lambda j: j["state"] == "FAILED", timeout=180)
    final = failed["operator_verdict"]
    assert final["action"] == "failed the job" and final["state"] == "HANGING"
    # The same verdict in the CLI's and the magics' words (render.job_detail).
    shown = job_detail(Job.model_validate(failed))
    assert "HyperPod: HANGING (rule hyperpod-watchdog-hang)" in shown and "failed the job" in shown
