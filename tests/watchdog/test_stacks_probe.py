"""The stack probe (core/stacks.PROBE) as srun runs it on each node of a job: it dumps the ranks
of its own node only, so that two Slurm nodes on one machine never attach two py-spy to the same
process (both then fail: the CI failure of test_watchdog_slurm); and a rank read twice keeps the
stack that was read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from jupyter_hyperpod.core.stacks import PROBE, read_probe

SLEEPER = "import time\nwhile True: time.sleep(0.05)\n"


@pytest.fixture
def two_ranks_on_two_nodes() -> Iterator[list[subprocess.Popen[bytes]]]:
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", SLEEPER],
            env={
                **os.environ,
                "HYPERPOD_JOB_ID": "probe-1",
                "RANK": str(rank),
                "SLURMD_NODENAME": f"node{rank + 1}",
            },
        )
        for rank in (0, 1)
    ]
    time.sleep(0.5)
    yield ranks
    for process in ranks:
        process.kill()
        process.wait()


def test_the_probe_dumps_only_its_own_nodes_ranks(
    two_ranks_on_two_nodes: list[subprocess.Popen[bytes]],
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "probe-1", "20"],
        env={**os.environ, "SLURMD_NODENAME": "node2"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = json.loads(done.stdout)
    assert [(item["rank"], item["node"], item["pid"]) for item in found] == [
        (1, "node2", two_ranks_on_two_nodes[1].pid)
    ]
    assert found[0]["code"] == 0, found  # py-spy read it


def test_outside_srun_the_probe_dumps_every_rank_of_the_job(
    two_ranks_on_two_nodes: list[subprocess.Popen[bytes]],
) -> None:
    env = {key: value for key, value in os.environ.items() if key != "SLURMD_NODENAME"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "probe-1", "20"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert sorted(item["rank"] for item in json.loads(done.stdout)) == [0, 1]


def test_a_rank_read_twice_keeps_the_stack_that_was_read() -> None:
    failed = {
        "rank": 0,
        "pid": 7,
        "node": "node1",
        "code": 1,
        "out": "",
        "err": "Error: Operation not permitted (os error 1)",
    }
    read = {
        **failed,
        "code": 0,
        "err": "",
        "out": json.dumps(
            [
                {
                    "thread_id": 1,
                    "thread_name": "MainThread",
                    "active": True,
                    "frames": [{"name": "wait", "filename": "x.py", "line": 3}],
                }
            ]
        ),
    }
    for lines in ([failed], [read]), ([read], [failed]):
        stacks = read_probe("\n".join(json.dumps(line) for line in lines))
        assert stacks[0].error is None and stacks[0].threads[0].frames[0].name == "wait"
