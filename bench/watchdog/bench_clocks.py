"""Tracker CPU per refresh for the watchdog: 64 running jobs x 8 ranks (512 logs on disk).

Between two refreshes every rank prints 20 of our training loop's step lines (a fast job: 10
steps/s at a 2 s refresh); each log already holds 2 MB when the watchdog first meets it (a
server restarted under long runs). Prints the CPU time (`time.process_time`) of
`JobWatch.refresh` per refresh: the first (each log read from its last 64 KiB) and the steady
ones (only the bytes added), against re-reading every log's last 40 lines as the progress parser
does for rank 0 (`LogReader.tail` + parsing), for all 512 ranks.

    python bench/watchdog/bench_clocks.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import percentile

from jupyter_hyperpod.core.backend import FileLogReader
from jupyter_hyperpod.core.jobwatch import JobWatch
from jupyter_hyperpod.core.models import Job, JobSpec, JobState, RankInfo
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.progress import progress_of_log

JOBS, RANKS, LINES, REFRESHES, INITIAL_MB = 64, 8, 20, 30, 2


def line(step: int) -> str:
    return f"step {step}/1000000 | loss 1.2345 | lr 2.00e-04 | 1,234 tok/s | eta 1:02:03\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        block = "".join(line(n) for n in range(1, 1001)).encode()
        jobs: list[tuple[Job, dict[str, Any]]] = []
        paths: dict[tuple[str, int], Path] = {}
        for j in range(JOBS):
            spec = JobSpec(name=f"job-{j}", command=["train.py"], nodes=RANKS, procs_per_node=1)
            job = Job(
                id=f"job-{j}",
                name=spec.name,
                user="u",
                orchestrator="local",
                state=JobState.RUNNING,
                created=time.time(),
                started=time.time(),
                spec=spec,
                ranks=[RankInfo(rank=r, node=f"node-{r}") for r in range(RANKS)],
            )
            jobs.append((job, {}))
            for r in range(RANKS):
                path = paths[(job.id, r)] = root / f"{job.id}-{r}.log"
                with path.open("wb") as out:
                    for _ in range(INITIAL_MB * 1024 * 1024 // len(block)):
                        out.write(block)
        settings = HyperPodSettings(user="u", shared_fs_root=tmp)

        def reader(job: Job, data: dict[str, Any], rank: int) -> FileLogReader:
            return FileLogReader(paths[(job.id, rank)])

        watch = JobWatch(settings, reader, lambda job_id, evidence: None)
        step = 1000

        def grow() -> None:
            nonlocal step
            text = "".join(line(step + n) for n in range(LINES))
            step += LINES
            for path in paths.values():
                with path.open("a") as out:
                    out.write(text)

        start = time.process_time()
        watch.refresh(jobs)
        first = (time.process_time() - start) * 1000
        ours, tails = [], []
        for _ in range(REFRESHES):
            grow()
            start = time.process_time()
            watch.refresh(jobs)
            ours.append((time.process_time() - start) * 1000)
            start = time.process_time()
            for path in paths.values():
                tail_reader = FileLogReader(path)
                progress_of_log(tail_reader.tail(40)[0].decode())
                tail_reader.close()
            tails.append((time.process_time() - start) * 1000)
        assert all(c.step == step - 1 for j in watch.clocks.jobs.values() for c in j.ranks.values())
        print(f"{JOBS} jobs x {RANKS} ranks, {LINES} new step lines per rank per refresh")
        print(f"first refresh (every log read from its end): {first:8.1f} ms CPU")
        print(
            f"steady refresh, watchdog: p50 {statistics.median(ours):6.1f} ms  "
            f"p90 {percentile(ours, 0.9):6.1f} ms CPU  "
            f"({statistics.median(ours) * 1000 / (JOBS * RANKS):.0f} us per rank)"
        )
        print(
            f"re-reading the last 40 lines of every rank: p50 {statistics.median(tails):6.1f} ms  "
            f"p90 {percentile(tails, 0.9):6.1f} ms CPU"
        )
        watch.close()


if __name__ == "__main__":
    main()
