"""Step clocks from what the real writers print (our training loop, tqdm, the Trainer's
callback, a user pattern), read incrementally from real files; the hang and straggler rules."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from jupyter_hyperpod.core.backend import FileLogReader
from jupyter_hyperpod.core.models import WatchdogSpec
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.core.stepclock import (
    FIRST_READ_BYTES,
    JobClocks,
    RankClockState,
    user_pattern,
)
from jupyter_hyperpod.core.watchdog import assess, config_for


class CountingReader(FileLogReader):
    """A file log that counts the bytes read from it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.bytes_read = 0

    def read(self, offset: int, max_bytes: int) -> bytes:
        data = super().read(offset, max_bytes)
        self.bytes_read += len(data)
        return data


def test_our_loop_lines_are_read_incrementally(tmp_path: Path) -> None:
    from jupyter_hyperpod.training.progress import Progress

    log = tmp_path / "rank-0.log"
    progress = Progress(total=100, initial=0, enabled=False)
    clocks = JobClocks(pattern=None)
    reader = CountingReader(log)
    with log.open("a") as out:
        for step in range(1, 6):
            out.write(progress.update(step, loss=1.0, lr=1e-4, tokens_per_second=10.0) + "\n")
        out.write("step 6/100 | loss 1.0")  # a line still being written (a tqdm redraw)
        out.flush()
        clocks.read(0, reader, now=10.0)
        assert clocks.ranks[0].step == 6 and clocks.ranks[0].last_step_at == 10.0
        first = reader.bytes_read
        out.write(" | lr 1.00e-04\n")
        out.write(progress.update(7, loss=1.0, lr=1e-4, tokens_per_second=10.0) + "\n")
        out.flush()
        clocks.read(0, reader, now=12.0)
    clock = clocks.ranks[0]
    assert (clock.step, clock.total, clock.last_step_at) == (7, 100, 12.0)
    assert clock.step_seconds == pytest.approx(2.0)  # 1 step in 2 s
    assert reader.bytes_read == log.stat().st_size > first  # every byte read once
    clocks.read(0, reader, now=13.0)
    assert reader.bytes_read == log.stat().st_size and clock.last_step_at == 12.0


def test_a_long_log_met_late_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text("".join(f"step {n}/100000 | loss 1.0\n" for n in range(1, 50001)))
    reader = CountingReader(log)
    clocks = JobClocks(pattern=None)
    clocks.read(0, reader, now=1.0)
    assert clocks.ranks[0].step == 50000
    assert reader.bytes_read <= FIRST_READ_BYTES < log.stat().st_size


def test_tqdm_redraws_and_the_trainer_logs(tmp_path: Path) -> None:
    from tqdm import tqdm

    out = io.StringIO()
    bar = tqdm(total=50, file=out, mininterval=0)
    for _ in range(17):
        bar.update(1)
    log = tmp_path / "tqdm.log"
    log.write_text(out.getvalue())
    clocks = JobClocks(pattern=None)
    clocks.read(0, FileLogReader(log), now=1.0)
    assert (clocks.ranks[0].step, clocks.ranks[0].total) == (17, 50)
    bar.close()

    callbacks = pytest.importorskip("transformers.trainer_callback")
    text = io.StringIO()
    state = SimpleNamespace(is_world_process_zero=True, max_steps=40, global_step=0)
    with contextlib.redirect_stderr(text), contextlib.redirect_stdout(text):
        callback = callbacks.ProgressCallback()
        callback.on_train_begin(None, state, None)
        for step in range(1, 9):
            state.global_step = step
            callback.on_step_end(None, state, None)
            callback.on_log(None, state, None, logs={"loss": 1.0 / step})
    log = tmp_path / "trainer.log"
    log.write_text(text.getvalue())
    clocks = JobClocks(pattern=None)
    clocks.read(0, FileLogReader(log), now=1.0)
    assert clocks.ranks[0].step == 8


def test_a_user_pattern(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    log.write_text("iter=41 took 0.3s\niter=42 took 0.3s\nsomething else\n")
    clocks = JobClocks(pattern=user_pattern(r"iter=(?P<step>\d+)"))
    clocks.read(0, FileLogReader(log), now=1.0)
    assert clocks.ranks[0].step == 42
    ticks = JobClocks(pattern=user_pattern(r"took \d"))  # no group: one step per match
    ticks.read(0, FileLogReader(log), now=1.0)
    assert ticks.ranks[0].step == 2


def test_the_rules() -> None:
    settings = HyperPodSettings(user="u", shared_fs_root="/tmp")
    config = config_for(
        WatchdogSpec(hang_factor=4, hang_floor_seconds=2, window_seconds=1, straggler_windows=2),
        settings,
    )
    assert config.start_cutoff_seconds == settings.watchdog_start_cutoff_seconds
    clocks = JobClocks(pattern=None)
    nodes: dict[int, str | None] = {0: "a", 1: "b", 2: "c"}
    for rank in nodes:
        clocks.ranks[rank] = RankClockState()
    now = 0.0
    for tick in range(1, 31):  # every 0.5 s rank 2 steps once, the others three times
        now = tick * 0.5
        for rank, clock in clocks.ranks.items():
            clock.saw((clock.step or 0) + (1 if rank == 2 else 3), now)
        verdict = assess(clocks, config, started=0.0, now=now, nodes=nodes)
    assert [(s.rank, s.node) for s in verdict.stragglers] == [(2, "c")]
    assert verdict.stalled_since is None
    assert verdict.bound_seconds == 2.0  # max(4 x median 1/6 s, 2 s)
    clocks.ranks[0].saw(clocks.ranks[0].step + 1, now + 0.5)  # type: ignore[operator]
    stalled = assess(clocks, config, started=0.0, now=now + 3.0, nodes=nodes)
    assert stalled.stalled_since == now + 0.5
    assert [c.rank for c in stalled.stopped_first] == [2]  # the lowest step
    assert not stalled.stragglers
    fresh = JobClocks(pattern=None)
    quiet = assess(fresh, config, started=0.0, now=10**6, nodes={})  # the admin's: no cut-off
    assert quiet.stalled_since is None
    config = config_for(WatchdogSpec(start_cutoff_seconds=600), settings)
    late = assess(fresh, config, started=0.0, now=601, nodes={})
    assert late.stalled_since == 0.0 and "no step printed" in (late.stalled_detail or "")


def test_what_to_add_when_py_spy_is_missing_or_may_not_attach(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    from jupyter_hyperpod.core.stacks import (
        PTRACE_DENIED,
        PY_SPY_MISSING,
        dump_command,
        local_py_spy,
        read_dump,
        run_here,
    )

    missing = read_dump(0, "n", 1, *run_here(dump_command(str(tmp_path / "py-spy"), 1)))
    assert missing.fix == PY_SPY_MISSING and "pip install" in missing.fix
    py_spy, runuser = local_py_spy(), shutil.which("runuser")
    if py_spy is None or runuser is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root, runuser and py-spy: an unprivileged user tracing root's process")
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        denied = read_dump(
            0,
            "n",
            target.pid,
            *run_here([runuser, "-u", "nobody", "--", *dump_command(py_spy, target.pid)]),
        )
    finally:
        target.kill()
        target.wait()
    assert denied.fix == PTRACE_DENIED and "SYS_PTRACE" in denied.fix
