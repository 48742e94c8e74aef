"""Kubernetes backend figures against the emulator (tests/kubernetes/emulator.py) over real HTTP:

1. node listing, 2,000 nodes + 1,000 GPU pods: our REST API (`GET /hyperpod/api/nodes` on a real
   Jupyter server), the backend's `list_nodes()`, and the raw `kubernetes` client doing the same
   work (typed `list_node()` + `list_pod_for_all_namespaces()`, GPUs summed per node);
2. multi-rank log follow: N worker pods with M MiB of log each, followed by the backend into its
   spool files, and the raw client's `read_namespaced_pod_log(follow=True)` streams read to memory.

Run: PYTHONPATH=. python bench/kubernetes/bench.py [--nodes 2000] [--ranks 8] [--mib 8] [--repeat 3]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kubernetes import client as k8s_client  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from traitlets.config import Config  # noqa: E402

from jupyter_hyperpod.backends.base import StoredJob  # noqa: E402
from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator  # noqa: E402
from jupyter_hyperpod.core.models import JobSpec, JobState  # noqa: E402
from jupyter_hyperpod.core.settings import HyperPodSettings  # noqa: E402
from tests.kubernetes.conftest import node_object  # noqa: E402
from tests.kubernetes.emulator import EmulatorThread, now_iso  # noqa: E402


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def settings(fs_root: Path, kubeconfig: Path) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.KubernetesOrchestrator.kubeconfig = str(kubeconfig)
    config.KubernetesOrchestrator.image = "bench:latest"
    config.KubernetesOrchestrator.node_cache_seconds = 0.0
    return HyperPodSettings(config=config)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_jupyter(
    workdir: Path, kubeconfig: Path, fs_root: Path
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = workdir / "jupyter_server_config.json"
    config.write_text(
        json.dumps(
            {
                "ServerApp": {
                    "jpserver_extensions": {"jupyter_hyperpod": True},
                    "port": port,
                    "open_browser": False,
                    "root_dir": str(workdir),
                    "allow_root": True,
                },
                "IdentityProvider": {"token": "bench"},
                "HyperPodApp": {
                    "orchestrator": "kubernetes",
                    "shared_fs_root": str(fs_root),
                    "user": "bench",
                    "job_store": str(workdir / "jobs.sqlite"),
                },
                "KubernetesOrchestrator": {
                    "kubeconfig": str(kubeconfig),
                    "node_cache_seconds": 0.0,
                    "image": "bench:latest",
                },
            }
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "JUPYTER_CONFIG_DIR": str(workdir),
        "JUPYTER_RUNTIME_DIR": str(workdir / "rt"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--config={config}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status?token=bench", timeout=2).read()
            return process, base
        except OSError:
            time.sleep(0.3)
    process.terminate()
    raise RuntimeError("jupyter server did not start")


def bench_nodes(
    emulator: EmulatorThread, kubeconfig: Path, fs_root: Path, count: int, repeat: int, rest: bool
) -> None:
    emulator.put_many("v1/nodes", [node_object(i) for i in range(count)])
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "spec": {
                "nodeName": f"hyperpod-i-{i:05d}",
                "containers": [
                    {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                ],
            },
            "status": {"phase": "Running"},
        }
        for i in range(0, count, 2)
    ]
    emulator.put_many("v1/pods", pods)

    backend = KubernetesOrchestrator(settings=settings(fs_root, kubeconfig))
    ours, nodes = timed(backend.list_nodes, repeat)
    assert len(nodes) == count

    api = k8s_config.new_client_from_config(str(kubeconfig))
    core = k8s_client.CoreV1Api(api)

    def raw() -> int:
        listed = core.list_node().items
        used: dict[str, int] = {}
        for pod in core.list_pod_for_all_namespaces(
            field_selector="status.phase!=Succeeded,status.phase!=Failed"
        ).items:
            for container in pod.spec.containers:
                limits = (container.resources.limits or {}) if container.resources else {}
                used[pod.spec.node_name] = used.get(pod.spec.node_name, 0) + int(
                    limits.get("nvidia.com/gpu", 0)
                )
        return len(listed)

    raw_time, raw_count = timed(raw, repeat)
    assert raw_count == count
    print(f"nodes: {count} nodes + {len(pods)} pods, median of {repeat}")
    print(f"  backend list_nodes()                 {ours * 1000:8.1f} ms")
    print(
        f"  raw kubernetes client (typed models) {raw_time * 1000:8.1f} ms   ({raw_time / ours:.1f}x the backend)"
    )
    if rest:
        workdir = Path(tempfile.mkdtemp(prefix="bench-jupyter-"))
        process, base = start_jupyter(workdir, kubeconfig, fs_root)
        try:

            def via_rest() -> int:
                with urllib.request.urlopen(
                    f"{base}/hyperpod/api/nodes?token=bench", timeout=120
                ) as response:
                    return len(json.loads(response.read())["nodes"])

            rest_time, rest_count = timed(via_rest, repeat)
            assert rest_count == count
            print(f"  REST GET /hyperpod/api/nodes         {rest_time * 1000:8.1f} ms")
        finally:
            os.killpg(process.pid, 15)
            process.wait(10)
    backend.close()
    api.close()


def bench_logs(
    emulator: EmulatorThread, kubeconfig: Path, fs_root: Path, ranks: int, mib: int, repeat: int
) -> None:
    assert emulator.emulator is not None
    line = "rank {rank}/{world} step {step:07d} loss 0.123456 lr 2.0e-04 grad_norm 1.2345 tokens/s 12345.6\n"
    per_rank = mib * 1024 * 1024
    results: list[tuple[float, float]] = []
    for attempt in range(repeat):
        name = f"logbench-{attempt}"
        emulator.put(
            "kubeflow.org/v1/pytorchjobs",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {
                        "app.kubernetes.io/managed-by": "jupyter-hyperpod",
                        "hyperpod.jupyter.org/job-id": name,
                    },
                },
                "spec": {},
                "status": {
                    "conditions": [
                        {"type": "Succeeded", "status": "True", "lastTransitionTime": now_iso()}
                    ]
                },
            },
        )
        pods = []
        for rank in range(ranks):
            pod = f"{name}-worker-{rank}"
            pods.append(pod)
            emulator.put(
                "v1/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": "default",
                        "labels": {
                            "hyperpod.jupyter.org/job-id": name,
                            "training.kubeflow.org/replica-index": str(rank),
                        },
                    },
                    "spec": {"containers": [{"name": "pytorch", "image": "i"}]},
                    "status": {
                        "phase": "Succeeded",
                        "containerStatuses": [
                            {
                                "name": "pytorch",
                                "containerID": f"c://{pod}",
                                "restartCount": 0,
                                "state": {"terminated": {"exitCode": 0}},
                            }
                        ],
                    },
                },
            )
            emulator.emulator.logs.start("default", pod)
            written, step = 0, 0
            chunk: list[str] = []
            while written < per_rank:
                text = line.format(rank=rank, world=ranks, step=step)
                chunk.append(text)
                written += len(text)
                step += 1
            emulator.emulator.logs.write("default", pod, "".join(chunk))
            emulator.emulator.logs.finish("default", pod)
        total = sum(len(emulator.emulator.logs.read("default", pod, 0)[0]) for pod in pods)  # type: ignore[index]

        backend = KubernetesOrchestrator(settings=settings(fs_root, kubeconfig))
        job_dir = fs_root / "jobs" / name
        job_dir.mkdir(parents=True)
        job = StoredJob(
            id=name,
            spec=JobSpec(name="logbench", command=["x"], nodes=ranks),
            state=JobState.RUNNING,
            backend_id=name,
            created=time.time(),
            started=None,
            data={
                "namespace": "default",
                "kind": "PyTorchJob",
                "workers": ranks,
                "job_dir_local": str(job_dir),
            },
        )

        def run_ours(backend: Any = backend, job: StoredJob = job, total: int = total) -> float:
            start = time.perf_counter()
            readers = [backend.log_reader(job, rank) for rank in range(ranks)]
            for reader in readers:
                reader.follower.wait_done(600)
            elapsed = time.perf_counter() - start
            assert sum(reader.size() for reader in readers) == total
            for reader in readers:
                reader.close()
            backend.close()
            return elapsed

        def run_raw(pods: list[str] = pods, total: int = total) -> float:
            api = k8s_config.new_client_from_config(str(kubeconfig))
            core = k8s_client.CoreV1Api(api)
            received = [0] * ranks

            def follow(rank: int) -> None:
                response = core.read_namespaced_pod_log(
                    pods[rank], "default", follow=True, _preload_content=False
                )
                for data in response.stream(64 * 1024):
                    received[rank] += len(data)
                response.release_conn()

            start = time.perf_counter()
            threads = [threading.Thread(target=follow, args=(rank,)) for rank in range(ranks)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            assert sum(received) == total
            api.close()
            return elapsed

        # Alternate which goes first, so that neither always meets a cold server.
        if attempt % 2:
            raw = run_raw()
            ours = run_ours()
        else:
            ours = run_ours()
            raw = run_raw()
        results.append((ours, raw))
    ours = statistics.median(r[0] for r in results)
    raw = statistics.median(r[1] for r in results)
    size = ranks * per_rank / 1024 / 1024
    print(f"logs: {ranks} ranks x {mib} MiB followed to the end, median of {repeat}")
    print(f"  backend followers -> spool files     {ours * 1000:8.1f} ms  {size / ours:7.1f} MiB/s")
    print(f"  raw client follow streams -> memory  {raw * 1000:8.1f} ms  {size / raw:7.1f} MiB/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--no-rest", action="store_true", help="skip the Jupyter server measurement"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
    fs_root = work / "fsx"
    fs_root.mkdir()
    emulator = EmulatorThread()
    emulator.start()
    try:
        kubeconfig = emulator.write_kubeconfig(work / "kubeconfig")
        bench_nodes(emulator, kubeconfig, fs_root, args.nodes, args.repeat, not args.no_rest)
        bench_logs(emulator, kubeconfig, fs_root, args.ranks, args.mib, args.repeat)
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
