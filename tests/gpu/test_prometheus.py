"""GPU figures through a real Prometheus scraping DCGM-format series: by node, by job (its Slurm
nodes, its Kubernetes pods), and through the AMP (SigV4) and Grafana (bearer) doubles."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.core.gpu_models import GpuPlacement
from jupyter_hyperpod.core.models import Job, JobSpec, JobState, RankInfo
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.gpu import GpuMetrics

from .conftest import GRAFANA_TOKEN, Exporter, unique, wait_until


def settings(**traits: Any) -> HyperPodSettings:
    return HyperPodSettings(config=Config({"HyperPodSettings": traits}))


def node_of(metrics: GpuMetrics, host: str) -> Any:
    found = metrics.nodes(this_machine=False)
    return next((node for node in found.nodes if node.node == host), None)


def job(
    name: str, started: float, *, ended: float | None = None, nodes: list[str] | None = None
) -> Job:
    return Job(
        id=name,
        name=name.rsplit("-", 1)[0],
        user="alice",
        orchestrator="slurm",
        backend_id=name,
        state=JobState.SUCCEEDED if ended else JobState.RUNNING,
        created=started - 1,
        started=started,
        ended=ended,
        spec=JobSpec(name=name.rsplit("-", 1)[0], command=["train.py"]),
        ranks=[RankInfo(rank=i, node=n) for i, n in enumerate(nodes or [])],
    )


def test_nodes_show_every_gpu_figure_and_follow_the_exporter(
    prometheus: str, exporter: Exporter
) -> None:
    host = unique("node")
    exporter.set(host, 0, utilization=37, memory_used_mb=2048, memory_free_mb=79872, xid_error=0)
    exporter.set(host, 1, utilization=81, memory_used_mb=40960, memory_free_mb=40960, xid_error=79)
    metrics = GpuMetrics(settings(gpu_metrics_url=prometheus))
    node = wait_until(lambda: node_of(metrics, host), what="the node's series")
    assert metrics.nodes(this_machine=False).source == "prometheus"
    assert [gpu.gpu for gpu in node.gpus] == ["0", "1"]
    first, second = node.gpus
    assert (first.utilization, first.memory_used_mb, first.memory_total_mb) == (37, 2048, 81920)
    assert (first.power_w, first.temperature_c, first.xid_error) == (120.5, 41, 0)
    assert first.model == "NVIDIA H100 80GB HBM3" and first.uuid and first.uuid.startswith("GPU-")
    assert second.xid_error == 79  # "GPU has fallen off the bus": the driver's last XID
    assert node.utilization == pytest.approx(59) and node.memory_used_mb == 43008
    assert node.memory_total_mb == 2 * 81920

    exporter.set(host, 0, utilization=5)
    wait_until(
        lambda: (found := node_of(metrics, host)) and found.gpus[0].utilization == 5,
        what="the new utilisation",
    )
    exporter.remove(host)  # the exporter stops serving it: Prometheus marks the series stale
    wait_until(lambda: node_of(metrics, host) is None, what="the node to go")


def test_a_slurm_job_gets_the_series_of_its_nodes_only(prometheus: str, exporter: Exporter) -> None:
    tag = unique("gpu")
    mine, other = f"{tag}-01", f"{tag}-03"
    exporter.set(mine, 0, utilization=10)
    exporter.set(other, 0, utilization=99)
    metrics = GpuMetrics(settings(gpu_metrics_url=prometheus))
    wait_until(lambda: node_of(metrics, mine), what="the node's series")
    started = time.time()
    time.sleep(2.5)
    exporter.set(mine, 0, utilization=90, memory_used_mb=30000)
    time.sleep(2.5)
    ran = job("train-a1b2c3", started, ended=time.time())
    # The placement as the Slurm backend decides it from what it keeps with the job.
    placement = SlurmOrchestrator.gpu_placement(ran, {"nodes": f"{tag}-[01-02]"})
    assert placement.nodes == (f"{tag}-01", f"{tag}-02")
    answer = metrics.job(ran, placement, step=1)
    assert answer.source == "prometheus" and answer.message is None
    util = [s for s in answer.series if s.metric == "utilization"]
    assert {(s.node, s.gpu) for s in util} == {(mine, "0")}
    values = [v for _, v in util[0].points]
    assert values[0] == 10 and values[-1] == 90
    assert all(started - 1 <= t <= ran.ended + 1 for t, _ in util[0].points)  # type: ignore[operator]
    memory = [s for s in answer.series if s.metric == "memory_used_mb"]
    assert memory and memory[0].points[-1][1] == 30000
    exporter.remove(mine)
    exporter.remove(other)


def test_a_kubernetes_job_gets_the_gpus_of_its_pods(prometheus: str, exporter: Exporter) -> None:
    host = unique("hyperpod-i")
    name = f"{unique('train')[-11:].replace('-', 'x')}-a1b2c3"
    namespace = "hyperpod-ns-team-a"
    exporter.set(host, 0, utilization=70, pod=f"{name}-worker-0", namespace=namespace)
    exporter.set(host, 1, utilization=71, pod=f"{name}-worker-1", namespace=namespace)
    exporter.set(host, 2, utilization=5, pod=f"{name}-worker-0", namespace="other-team")
    exporter.set(host, 3, utilization=6, pod=f"{name}-extra-worker-0", namespace=namespace)
    metrics = GpuMetrics(settings(gpu_metrics_url=prometheus))
    node = wait_until(lambda: node_of(metrics, host), what="the node")
    assert {(g.gpu, g.pod, g.namespace) for g in node.gpus} >= {
        ("0", f"{name}-worker-0", namespace)
    }
    started = time.time() - 30
    answer = wait_until(
        lambda: (
            (
                found := metrics.job(
                    job(name, started),
                    KubernetesOrchestrator.gpu_placement(
                        job(name, started), {"namespace": namespace}
                    ),
                )
            ).series
            and found
        ),
        what="the job's series",
    )
    util = {s.gpu for s in answer.series if s.metric == "utilization"}
    assert util == {"0", "1"}
    exporter.remove(host)


def test_amazon_managed_prometheus_is_signed_with_sigv4(
    amp: str, exporter: Exporter, aws_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = unique("amp-node")
    exporter.set(host, 0, utilization=42)
    metrics = GpuMetrics(settings(gpu_metrics_url=amp, gpu_metrics_kind="amp"))
    assert metrics.prometheus is not None and metrics.prometheus.region == ""
    metrics = GpuMetrics(
        settings(gpu_metrics_url=amp, gpu_metrics_kind="amp", gpu_metrics_region="us-east-1")
    )
    node = wait_until(lambda: node_of(metrics, host), what="the node through AMP")
    assert metrics.nodes(this_machine=False).source == "amp" and node.gpus[0].utilization == 42

    # The double refuses what AMP refuses: no signature, and a signature with the wrong secret.
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(f"{amp}/api/v1/query?query=up", timeout=5)
    assert unsigned.value.code == 403
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    refused = GpuMetrics(
        settings(gpu_metrics_url=amp, gpu_metrics_kind="amp", gpu_metrics_region="us-east-1")
    ).nodes(this_machine=False)
    assert refused.nodes == [] and refused.source == "amp"
    assert "HTTP 403" in (refused.message or "") and "signature" in (refused.message or "")
    exporter.remove(host)


def test_grafana_data_source_proxy_with_a_token(grafana: str, exporter: Exporter) -> None:
    host = unique("grafana-node")
    exporter.set(host, 0, utilization=64)
    metrics = GpuMetrics(settings(gpu_metrics_url=grafana, gpu_metrics_token=GRAFANA_TOKEN))
    assert metrics.prometheus is not None and metrics.prometheus.kind == "grafana"
    node = wait_until(lambda: node_of(metrics, host), what="the node through Grafana")
    assert node.gpus[0].utilization == 64
    refused = GpuMetrics(settings(gpu_metrics_url=grafana, gpu_metrics_token="wrong")).nodes(
        this_machine=False
    )
    assert refused.nodes == [] and "HTTP 401" in (refused.message or "")
    exporter.remove(host)


def test_no_endpoint_or_a_dead_one_shows_nothing_with_the_reason() -> None:
    quiet = GpuMetrics(settings()).nodes(this_machine=False)
    assert quiet.nodes == [] and quiet.source is None and "gpu_metrics_url" in (quiet.message or "")
    dead = GpuMetrics(settings(gpu_metrics_url="http://127.0.0.1:9")).nodes(this_machine=False)
    assert dead.nodes == [] and "cannot reach" in (dead.message or "")
    pending = GpuMetrics(settings(gpu_metrics_url="http://127.0.0.1:9")).job(
        job("train-a1b2c3", time.time()).model_copy(
            update={"state": JobState.PENDING, "started": None}
        ),
        GpuPlacement(),
    )
    assert pending.series == [] and pending.message == "the job has not started"


def test_doctor_check_of_the_endpoint(prometheus: str, exporter: Exporter) -> None:
    host = unique("doctor-node")
    exporter.set(host, 0)
    metrics = GpuMetrics(settings(gpu_metrics_url=prometheus))
    wait_until(lambda: node_of(metrics, host), what="the node")
    status, detail, _ = metrics.check(this_machine=False)
    assert status == "pass" and "GPU(s) reporting" in detail
    exporter.remove(host)
    status, detail, fix = GpuMetrics(settings(gpu_metrics_url="http://127.0.0.1:9")).check(
        this_machine=False
    )
    assert status == "fail" and "cannot reach" in detail and "gpu_metrics_url" in fix
    assert GpuMetrics(settings()).check(this_machine=False)[0] == "skip"


def gpu_check(traits: dict[str, Any]) -> str:
    """The doctor's "GPU metrics" status, through whichever diagnosis entry point this tree has
    (the service's `diagnose()`, or the older `doctor.diagnose`)."""
    from jupyter_hyperpod import doctor
    from jupyter_hyperpod.core.service import HyperPodService

    configured = settings(**traits)
    if hasattr(HyperPodService, "diagnose"):
        service = HyperPodService(configured)
        try:
            checks = service.diagnose().checks  # type: ignore[attr-defined]
        finally:
            service.close()
    else:
        checks = getattr(doctor, "diagnose")(configured, kind="local").checks  # noqa: B009
    return next(c.status for c in checks if c.name == "GPU metrics")


def test_the_doctor_reports_the_gpu_endpoint(
    prometheus: str, exporter: Exporter, tmp_path: Any
) -> None:
    host = unique("doctor-node")
    exporter.set(host, 0)
    common = {
        "orchestrator": "local",
        "shared_fs_root": str(tmp_path),
        "job_store": str(tmp_path / "jobs.sqlite"),
        "user": "alice",
    }
    metrics = GpuMetrics(settings(gpu_metrics_url=prometheus))
    wait_until(lambda: node_of(metrics, host), what="the node")
    assert gpu_check({"gpu_metrics_url": prometheus, **common}) == "pass"
    assert gpu_check({"gpu_metrics_url": "http://127.0.0.1:9", **common}) == "fail"
    exporter.remove(host)
