"""Faults of the machine and the cluster: a clear 4xx/503 with a message, nothing lost, nothing
half-created.

- A full and a read-only job directory: the server runs in a private mount namespace
  (`unshare -m`, as root) where `.hyperpod/jobs` of the partition is a 256 KiB tmpfs, filled and
  then remounted read-only from outside with `nsenter`.
- The Kubernetes API unreachable: a kubeconfig pointing at a closed loopback port.
- `kill -9` of the server right after it accepted jobs: a new server finds every record and
  every job runs to its end with its whole log.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import add, record
from .live import LiveServer, free_port

pytestmark = pytest.mark.slow

JOB = {"name": "ok", "command": ["hello.py"]}


def _hyperpod(base: Path, **extra: Any) -> dict[str, Any]:
    return {
        "orchestrator": "local",
        "shared_fs_root": str(base / "fsx"),
        "partition": "shared",
        "user": "alice",
        "job_store": str(base / "jobs.sqlite"),
        "refresh_interval": 0.2,
        "local_max_parallel_jobs": 4,
        **extra,
    }


def _partition(base: Path) -> Path:
    partition = base / "fsx" / "shared"
    partition.mkdir(parents=True, exist_ok=True)
    (partition / "hello.py").write_text(
        "import sys, time\nfor i in range(int(sys.argv[1]) if sys.argv[1:] else 1):\n"
        "    print(f'line {i}', flush=True)\n    time.sleep(0.05)\n"
    )
    return partition


def _wait(server: LiveServer, job_id: str, states: set[str], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status, job, _ = server.request("GET", f"jobs/{job_id}")
        assert status == 200, job
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def _refused(reply: tuple[int, Any, Any], status: int, code: str, words: str) -> None:
    got, body, headers = reply
    assert got == status, body
    assert headers["Content-Type"].startswith("application/json")
    assert body["error"]["code"] == code and words in body["error"]["message"], body
    add("faults", f"{status} {code}")


@pytest.fixture
def jobs_on_tmpfs(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("needs root, unshare and nsenter (a private mount namespace)")
    jobs = _partition(tmp_path) / ".hyperpod" / "jobs"
    jobs.mkdir(parents=True)
    script = f'mount -t tmpfs -o size=256k tmpfs "{jobs}" && exec "$@"'
    server = LiveServer(
        tmp_path, _hyperpod(tmp_path), prefix=["unshare", "-m", "--propagation", "private"]
    )
    server.prefix += ["sh", "-c", script, "sh"]
    server.start()
    yield server, jobs
    server.stop()


def _inside(server: LiveServer, *command: str) -> subprocess.CompletedProcess[str]:
    """A command in the server's mount namespace."""
    assert server.process is not None
    return subprocess.run(
        ["nsenter", "-t", str(server.process.pid), "-m", *command],
        capture_output=True,
        text=True,
        timeout=30,
    )


def _job_dirs(server: LiveServer, jobs: Path) -> set[str]:
    listing = _inside(server, "ls", "-1", str(jobs)).stdout.split()
    return {name for name in listing if name != "filler"}


def test_a_full_then_read_only_job_directory(jobs_on_tmpfs: tuple[LiveServer, Path]) -> None:
    server, jobs = jobs_on_tmpfs
    first = server.request("POST", "jobs", JOB)
    assert first[0] == 201, first[1]
    _wait(server, first[1]["id"], {"SUCCEEDED"})
    before = _job_dirs(server, jobs)
    assert before == {first[1]["id"]}

    filled = _inside(server, "dd", "if=/dev/zero", f"of={jobs}/filler", "bs=4k")
    assert "No space left" in filled.stderr, filled.stderr
    for route in ("jobs", "jobs"):
        _refused(server.request("POST", route, JOB), 503, "storage_unavailable", "is full")
    assert _job_dirs(server, jobs) == before, "a half-created job directory was left"
    status, listing, _ = server.request("GET", "jobs")
    assert status == 200 and [j["id"] for j in listing["jobs"]] == [first[1]["id"]]

    _inside(server, "rm", f"{jobs}/filler")
    second = server.request("POST", "jobs", JOB)
    assert second[0] == 201, second[1]  # space again: submitting works again
    _wait(server, second[1]["id"], {"SUCCEEDED"})

    remount = _inside(server, "mount", "-o", "remount,ro", str(jobs))
    assert remount.returncode == 0, remount.stderr
    _refused(server.request("POST", "jobs", JOB), 503, "storage_unavailable", "read-only")
    assert _job_dirs(server, jobs) == before | {second[1]["id"]}
    status, listing, _ = server.request("GET", "jobs")
    assert status == 200 and listing["total"] == 2  # every record kept, none for the refusals
    for job_id in (first[1]["id"], second[1]["id"]):
        status, logs, _ = server.request("GET", f"jobs/{job_id}/logs")
        assert status == 200 and logs["text"] == "line 0\n"
    record("faults", "full and read-only job directory", "503, nothing half-created")


def test_the_kubernetes_api_unreachable_is_a_503(tmp_path: Path) -> None:
    _partition(tmp_path)
    port = free_port()  # nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        f"clusters: [{{name: gone, cluster: {{server: 'https://127.0.0.1:{port}', "
        "insecure-skip-tls-verify: true}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: me, namespace: kubeflow}}]\n"
        "users: [{name: me, user: {token: not-used}}]\n"
    )
    server = LiveServer(tmp_path, _hyperpod(tmp_path, orchestrator="kubernetes"))
    server.extra_config = {"KubernetesOrchestrator": {"kubeconfig": str(kubeconfig)}}
    server.extra_env = {"KUBECONFIG": str(kubeconfig)}
    try:
        server.start(ready_route="templates")
        started = time.monotonic()
        _refused(server.request("GET", "nodes"), 503, "backend_unavailable", f"127.0.0.1:{port}")
        assert time.monotonic() - started < 10, "an unreachable API fails fast"
        reply = server.request("POST", "jobs", {**JOB, "image": "python:3.11"})
        _refused(reply, 503, "backend_unavailable", "")
        status, listing, _ = server.request("GET", "jobs")
        assert status in (200, 503), listing
        if status == 200:
            assert listing["total"] == 0  # the refused submit left no record
        jobs = tmp_path / "fsx" / "shared" / ".hyperpod" / "jobs"
        assert not jobs.exists() or not any(jobs.iterdir()), "a half-created job directory"
    finally:
        server.stop()


def test_kill_9_of_the_server_loses_no_record(tmp_path: Path) -> None:
    _partition(tmp_path)
    config = _hyperpod(tmp_path)
    server = LiveServer(tmp_path, config).start()
    ids = []
    for index in range(6):
        status, job, _ = server.request("POST", "jobs", {**JOB, "command": ["hello.py", "10"]})
        assert status == 201, job
        ids.append(job["id"])
        add("faults", "jobs accepted before kill -9")
        if index == 3:
            _wait(server, ids[0], {"RUNNING", "SUCCEEDED"})
    server.kill(signal.SIGKILL)
    record("faults", "kill -9", "sent")

    again = LiveServer(tmp_path, config).start()
    try:
        status, listing, _ = again.request("GET", "jobs?limit=100")
        assert status == 200
        assert {j["id"] for j in listing["jobs"]} == set(ids), "a record was lost"
        for job_id in ids:
            job = _wait(again, job_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=120)
            assert job["state"] == "SUCCEEDED", job
            status, logs, _ = again.request("GET", f"jobs/{job_id}/logs", timeout=30)
            assert logs["text"] == "".join(f"line {i}\n" for i in range(10)), logs
        record("faults", "records after kill -9", f"{len(ids)}/{len(ids)}, logs whole")
    finally:
        again.stop()
