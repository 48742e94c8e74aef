"""Kubernetes backend figures against the emulator (tests/kubernetes/emulator.py) over real HTTP:

1. node listing, 2,000 nodes + 1,000 GPU pods, p50/p99: the raw `kubernetes` client doing the
   work (typed `list_node()` + `list_pod_for_all_namespaces()`, GPUs summed per node), the
   backend's `list_nodes()` listing directly (the old path, `watch_cache=False`) and from its
   watch cache (cache.py), and the same two through REST (`GET /hyperpod/api/nodes` on a real
   Jupyter server); then how long a cordon (PATCH) takes to show in `list_nodes()` and in REST;
2. multi-rank log follow: N worker pods with M MiB of log each, followed by the backend into its
   spool files (on disk, and on tmpfs to measure the follower without this machine's disk),
   against the raw client's `read_namespaced_pod_log(follow=True)` streams read to memory; twice:
   with the API double in this process (sharing its GIL, as the earlier figures were measured)
   and in a process of its own on a CPU of its own, as a real API server runs on machines of its
   own (the goal's figure). The double streams a log as the API server does: 32-KiB HTTP chunks,
   the streams of concurrent requests progressing together (tests/kubernetes/emulator.py);
3. the spool's writes alone, as the followers make them (N threads, M MiB each, 224 KiB a
   `writev`), with room reserved ahead of them (core/preallocate.py) and without, in turns.

Run: PYTHONPATH=. python bench/kubernetes/bench.py [--nodes 2000] [--ranks 8] [--mib 8]
     [--repeat 5] [--only nodes|logs] [--no-rest]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import free_port, percentile  # noqa: E402
from kubernetes import client as k8s_client  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from traitlets.config import Config  # noqa: E402

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator  # noqa: E402
from jupyter_hyperpod.backends.kubernetes.logs import SpoolLogReader, _Spool  # noqa: E402
from jupyter_hyperpod.core.backend import StoredJob  # noqa: E402
from jupyter_hyperpod.core.models import JobSpec, JobState  # noqa: E402
from jupyter_hyperpod.core.preallocate import (  # noqa: E402
    LAZY_ALLOCATING,
    RoomAhead,
    filesystem_type,
)
from jupyter_hyperpod.core.settings import HyperPodSettings  # noqa: E402
from tests.kubernetes.conftest import node_object  # noqa: E402
from tests.kubernetes.emulator import EmulatorThread, now_iso  # noqa: E402

Staged = tuple[str, list[str], int]
"""A staged log job: its name, its worker pods, the bytes of all their logs."""


def samples(fn: Any, count: int) -> list[float]:
    """`count` timings of fn() in ms, after one warm-up call."""
    fn()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def p50_p99(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), percentile(times, 0.99)


def settings(fs_root: Path, kubeconfig: Path, watch_cache: bool = True) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.KubernetesOrchestrator.kubeconfig = str(kubeconfig)
    config.KubernetesOrchestrator.image = "bench:latest"
    config.KubernetesOrchestrator.node_cache_seconds = 0.0
    config.KubernetesOrchestrator.watch_cache = watch_cache
    return HyperPodSettings(config=config)


def start_jupyter(
    workdir: Path, kubeconfig: Path, fs_root: Path, watch_cache: bool = True
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
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
                    "watch_cache": watch_cache,
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


def rest_body(base: str) -> bytes:
    """The whole `GET nodes` body, as the server sent it (what the server's latency is)."""
    with urllib.request.urlopen(f"{base}/hyperpod/api/nodes?token=bench", timeout=120) as response:
        return response.read()  # type: ignore[no-any-return]


def rest_nodes(base: str) -> list[dict[str, Any]]:
    return json.loads(rest_body(base))["nodes"]  # type: ignore[no-any-return]


def visibility(core: Any, read: Any, count: int) -> list[float]:
    """ms from sending a cordon/uncordon (PATCH) until `read()` shows it."""
    times = []
    for index in range(count):
        name = f"hyperpod-i-{index * 7:05d}"
        cordon = index % 2 == 0
        wanted = "cordoned" if cordon else "ready"
        start = time.perf_counter()
        core.patch_node(name, {"spec": {"unschedulable": cordon or None}})
        deadline = time.monotonic() + 10
        while not any(n["name"] == name and n["state"] == wanted for n in read()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} never showed {wanted}")
        times.append((time.perf_counter() - start) * 1000)
        # Leave it as it was: every other round undoes the previous one.
        if not cordon:
            continue
        core.patch_node(name, {"spec": {"unschedulable": None}})
        deadline = time.monotonic() + 10
        while not any(n["name"] == name and n["state"] == "ready" for n in read()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} never showed ready again")
    return times


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
    slow, fast = max(5, repeat), max(50, repeat * 10)

    api = k8s_config.new_client_from_config(str(kubeconfig))
    core = k8s_client.CoreV1Api(api)

    def raw() -> int:
        listed = core.list_node().items
        used: dict[str, int] = {}
        for pod in core.list_pod_for_all_namespaces(
            field_selector="status.phase!=Succeeded,status.phase!=Failed"
        ).items:
            if pod.spec is None:
                continue
            node = pod.spec.node_name or ""
            for container in pod.spec.containers:
                limits = (container.resources.limits or {}) if container.resources else {}
                used[node] = used.get(node, 0) + int(limits.get("nvidia.com/gpu", 0))
        return len(listed)

    rows: list[tuple[str, list[float]]] = []
    rows.append(("raw client typed list_node + list_pod", samples(raw, slow)))

    direct = KubernetesOrchestrator(settings=settings(fs_root, kubeconfig, watch_cache=False))
    assert len(direct.list_nodes()) == count
    rows.append(("backend list_nodes(), direct list (old)", samples(direct.list_nodes, slow)))
    direct.close()

    cached = KubernetesOrchestrator(settings=settings(fs_root, kubeconfig))
    cached.list_nodes()
    deadline = time.monotonic() + 60
    while not (cached._cache.nodes.fresh and cached._cache.pods.fresh):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the watch cache never synced: {cached.cache_status()}")
        time.sleep(0.05)
    nodes = cached.list_nodes()
    assert len(nodes) == count and sum(n.gpus.allocated for n in nodes) == 8 * len(pods)
    rows.append(("backend list_nodes(), watch cache", samples(cached.list_nodes, fast)))

    def in_process() -> list[dict[str, Any]]:
        return [{"name": n.name, "state": n.state} for n in cached.list_nodes()]

    seen = [("change visible to list_nodes()", visibility(core, in_process, 20))]
    cached.close()

    if rest:
        for label, watch_cache, rounds in (
            ("REST GET /hyperpod/api/nodes, direct list (old)", False, slow),
            ("REST GET /hyperpod/api/nodes, watch cache", True, fast),
        ):
            workdir = Path(tempfile.mkdtemp(prefix="bench-jupyter-"))
            process, base = start_jupyter(workdir, kubeconfig, fs_root, watch_cache)
            try:
                deadline = time.monotonic() + 60
                while len(rest_nodes(base)) != count:
                    if time.monotonic() > deadline:
                        raise RuntimeError("REST never listed every node")
                if watch_cache:
                    time.sleep(2.0)  # let the server's cache sync (reads list until it has)
                rows.append((label, samples(lambda base=base: rest_body(base), rounds)))
                if watch_cache:
                    parsed = "REST GET nodes, watch cache, + json.loads"
                    rows.append((parsed, samples(lambda base=base: rest_nodes(base), rounds)))
                if watch_cache:
                    seen.append(
                        (
                            "change visible via REST (PATCH -> GET)",
                            visibility(core, lambda base=base: rest_nodes(base), 20),
                        )
                    )
            finally:
                os.killpg(process.pid, 15)
                process.wait(10)
    api.close()

    print(f"nodes: {count} nodes + {len(pods)} pods")
    print(f"  {'':48} {'p50 ms':>9} {'p99 ms':>9} {'n':>5}")
    for label, times in rows + seen:
        p50, p99 = p50_p99(times)
        print(f"  {label:48} {p50:9.1f} {p99:9.1f} {len(times):5d}")


LOG_LINE = "rank {rank}/{world} step {step:07d} loss 0.123456 lr 2.0e-04 grad_norm 1.2345 tokens/s 12345.6\n"


def stage_logs(emulator: EmulatorThread, attempt: int, ranks: int, mib: int) -> Staged:
    """A finished PyTorchJob of `ranks` worker pods, each with `mib` MiB of log, in the double."""
    assert emulator.emulator is not None
    per_rank = mib * 1024 * 1024
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
    total = 0
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
            text = LOG_LINE.format(rank=rank, world=ranks, step=step)
            chunk.append(text)
            written += len(text)
            step += 1
        log = "".join(chunk).encode()
        emulator.emulator.logs.write("default", pod, log)
        emulator.emulator.logs.finish("default", pod)
        total += len(log)
    return name, pods, total


def bench_logs(
    kubeconfig: Path,
    fs_root: Path,
    staged: list[Staged],
    ranks: int,
    mib: int,
    where: str,
    *,
    goal: bool = False,
) -> None:
    """Follow each staged job's logs three ways (raw client, our spool on disk and on tmpfs),
    against the double `where` it runs (this process's thread, or a process of its own);
    `goal`: print the ratio that issue 27's goal is judged on."""
    repeat = len(staged)
    per_rank = mib * 1024 * 1024
    results: list[dict[str, float]] = []
    # Spooling to memory too: this measures the follower, not the machine's disk.
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else ""
    memory = tempfile.mkdtemp(dir=tmpfs) if tmpfs else ""
    for attempt, (name, pods, total) in enumerate(staged):

        def job_in(root: Path, name: str = name) -> StoredJob:
            job_dir = root / "jobs" / name
            job_dir.mkdir(parents=True)
            return StoredJob(
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

        def run_ours(root: Path, total: int = total) -> tuple[float, float]:
            backend = KubernetesOrchestrator(settings=settings(root, kubeconfig))
            job = job_in(root)
            # As in the Jupyter server, whose refresh keeps it running: the client is built and
            # the watch cache has the pods (a follower finds its pod in memory, not by a GET).
            backend.list_nodes()
            deadline = time.monotonic() + 60
            while not backend._cache.pods.fresh:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the watch cache never synced: {backend.cache_status()}")
                time.sleep(0.02)
            start, cpu = time.perf_counter(), time.process_time()
            readers = [cast(SpoolLogReader, backend.log_reader(job, rank)) for rank in range(ranks)]
            for reader in readers:
                reader.follower.wait_done(600)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert sum(reader.size() for reader in readers) == total
            for reader in readers:
                reader.close()
            backend.close()
            shutil.rmtree(root / "jobs", ignore_errors=True)
            return elapsed, cpu

        def run_raw(pods: list[str] = pods, total: int = total) -> tuple[float, float]:
            api = k8s_config.new_client_from_config(str(kubeconfig))
            core = k8s_client.CoreV1Api(api)
            received = [0] * ranks

            def follow(rank: int) -> None:
                response: Any = core.read_namespaced_pod_log(  # urllib3's, not preloaded
                    pods[rank], "default", follow=True, _preload_content=False
                )
                for data in response.stream(64 * 1024):
                    received[rank] += len(data)
                response.release_conn()

            start, cpu = time.perf_counter(), time.process_time()
            threads = [threading.Thread(target=follow, args=(rank,)) for rank in range(ranks)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert sum(received) == total
            api.close()
            return elapsed, cpu

        runs = {
            "raw": run_raw,
            "disk": lambda: run_ours(fs_root),
            "memory": lambda: run_ours(Path(memory)) if memory else (0.0, 0.0),
        }
        # Rotate which goes first, so that none always meets a cold server.
        order = list(runs)[attempt % 3 :] + list(runs)[: attempt % 3]
        timings: dict[str, float] = {}
        for key in order:
            timings[key], timings[f"{key} cpu"] = runs[key]()
        results.append(timings)
    size = ranks * per_rank / 1024 / 1024
    raw = median_of(results, "raw")
    print(f"logs: {ranks} ranks x {mib} MiB followed to the end, median of {repeat}; {where}")
    print(f"  {'':52} {'ms':>8} {'MiB/s':>8} {'x raw':>6} {'CPU ms':>7}")
    rows = [("raw client follow streams -> memory", "raw")]
    rows.append(("backend followers -> spool files on disk", "disk"))
    if tmpfs:
        rows.append((f"backend followers -> spool files on tmpfs ({tmpfs})", "memory"))
    for label, key in rows:
        seconds, cpu = median_of(results, key), median_of(results, f"{key} cpu")
        print(
            f"  {label:52} {seconds * 1000:8.1f} {size / seconds:8.1f} {raw / seconds:6.2f}"
            f" {cpu * 1000:7.0f}"
        )
    print(
        "  (CPU: this process's while the logs are followed, user + system;"
        " with the double in it, the double's too)"
    )
    if goal:
        ratio = raw / median_of(results, "disk")
        verdict = "met" if ratio >= 0.9 else "NOT met"
        print(
            f"goal (issue 27) spool on disk vs the raw client: {ratio:.2f}x, limit 0.9x ({verdict})"
        )
    if memory:
        shutil.rmtree(memory, ignore_errors=True)


def bench_spool_writes(directory: Path, ranks: int, mib: int, repeat: int) -> None:
    """The followers' spool writes without the network: `ranks` threads appending `mib` MiB each
    through `_Spool` as one read's decoded pieces (7 chunks of 32 KiB), with and without room
    reserved ahead, in turns; this process's CPU (user + system)."""
    read = [memoryview(bytes(32 * 1024)) for _ in range(7)]
    per_read = sum(map(len, read))

    def spools(room: Callable[[int], RoomAhead]) -> float:
        def write(rank: int) -> None:
            with _Spool(directory / f"spool-{rank}.log", None, room) as out:
                for _ in range(mib * 1024 * 1024 // per_read):
                    out.append(read)

        threads = [threading.Thread(target=write, args=(rank,)) for rank in range(ranks)]
        cpu = time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cpu = time.process_time() - cpu
        for rank in range(ranks):
            (directory / f"spool-{rank}.log").unlink()
        return cpu

    def unreserved(fd: int) -> RoomAhead:
        return RoomAhead(fd, fallocate=None)

    fd = os.open(directory, os.O_RDONLY)
    kind = filesystem_type(fd) or "unknown"
    os.close(fd)
    times: dict[str, list[float]] = {"reserved": [], "plain": []}
    for _ in range(repeat):
        times["reserved"].append(spools(RoomAhead))
        times["plain"].append(spools(unreserved))
    reserved, plain = (statistics.median(times[key]) * 1000 for key in ("reserved", "plain"))
    applies = "reserved" if kind in LAZY_ALLOCATING else "not reserved on this file system"
    print(
        f"spool writes alone, {ranks} x {mib} MiB on {kind} ({applies}), median of {repeat}:"
        f" room ahead {reserved:.1f} ms CPU, without {plain:.1f} ms ({reserved / plain:.2f}x)"
    )


def median_of(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def serve_logs(args: argparse.Namespace) -> None:
    """`--serve-logs KUBECONFIG`: the double in a process of its own, as a real API server is:
    stage the log jobs, write the kubeconfig, print the staged jobs as a JSON line, serve until
    stdin closes."""
    emulator = EmulatorThread()
    emulator.start()
    try:
        staged = [
            stage_logs(emulator, attempt, args.ranks, args.mib) for attempt in range(args.repeat)
        ]
        emulator.write_kubeconfig(Path(args.serve_logs))
        print(json.dumps(staged), flush=True)
        sys.stdin.read()
    finally:
        emulator.stop()


def split_cores() -> tuple[set[int], set[int]] | None:
    """This process's CPUs split in two: the double's (the last) and the followers' (the rest),
    as a real API server runs on machines of its own; None with a single CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[-1]}, set(cpus[:-1])) if len(cpus) > 1 else None


def logs_from_a_double_process(work: Path, fs_root: Path, args: argparse.Namespace) -> None:
    kubeconfig = work / "kubeconfig-process"
    cores = split_cores()
    mine = os.sched_getaffinity(0)
    double = subprocess.Popen(
        [
            *(["taskset", "-c", ",".join(map(str, cores[0]))] if cores else []),
            sys.executable,
            __file__,
            "--serve-logs",
            str(kubeconfig),
            "--ranks",
            str(args.ranks),
            "--mib",
            str(args.mib),
            "--repeat",
            str(args.repeat),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert double.stdout is not None
        staged = [
            (name, list(pods), total) for name, pods, total in json.loads(double.stdout.readline())
        ]
        if cores:
            os.sched_setaffinity(0, cores[1])
        where = "the API double in its own process" + (
            f" on CPU {min(cores[0])}, the followers on the other {len(cores[1])}" if cores else ""
        )
        bench_logs(kubeconfig, fs_root, staged, args.ranks, args.mib, where, goal=True)
        bench_spool_writes(fs_root, args.ranks, args.mib, max(args.repeat, 9))
    finally:
        os.sched_setaffinity(0, mine)
        assert double.stdin is not None
        double.stdin.close()
        double.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--no-rest", action="store_true", help="skip the Jupyter server measurement"
    )
    parser.add_argument("--only", choices=["nodes", "logs"], default="")
    parser.add_argument("--serve-logs", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_logs:
        serve_logs(args)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
    fs_root = work / "fsx"
    fs_root.mkdir()
    emulator = EmulatorThread()
    emulator.start()
    try:
        kubeconfig = emulator.write_kubeconfig(work / "kubeconfig")
        if args.only in ("", "nodes"):
            bench_nodes(emulator, kubeconfig, fs_root, args.nodes, args.repeat, not args.no_rest)
        if args.only in ("", "logs"):
            staged = [
                stage_logs(emulator, attempt, args.ranks, args.mib)
                for attempt in range(args.repeat)
            ]
            bench_logs(
                kubeconfig, fs_root, staged, args.ranks, args.mib, "the API double in this process"
            )
    finally:
        emulator.stop()
    if args.only in ("", "logs"):
        logs_from_a_double_process(work, fs_root, args)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
