"""The sbatch started ahead of the next submit (backends/slurm/standby.py), with real processes:
a stand-in `sbatch` that reads its script from standard input as sbatch does, records what it
was given and prints its pid as the job id. The real cluster's side is in test_backend_cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jupyter_hyperpod.backends.slurm.commands import SlurmCommands

FAKE_SBATCH = """#!/bin/sh
# Reads the script from standard input (sbatch without a script argument), as sbatch does
# before it talks to slurmctld: an empty script submits nothing.
echo "$$" >> "$FAKE_SLURM_DIR/started"
cat > "$FAKE_SLURM_DIR/reading-$$"
if [ ! -s "$FAKE_SLURM_DIR/reading-$$" ]; then
  rm -f "$FAKE_SLURM_DIR/reading-$$"
  echo "sbatch: error: Batch script is empty!" >&2
  exit 1
fi
mv "$FAKE_SLURM_DIR/reading-$$" "$FAKE_SLURM_DIR/submitted-$$"
echo "$$"
"""


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    (tmp_path / "slurm.conf").write_text("SlurmctldHost=head(127.0.0.1)\n")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def commands(fake_slurm: Path) -> Iterator[SlurmCommands]:
    made = SlurmCommands(
        bin_dir=str(fake_slurm / "bin"),
        standby_seconds=30.0,
        slurm_conf=str(fake_slurm / "slurm.conf"),
    )
    yield made
    made.close()


def submit(commands: SlurmCommands, script: str) -> int:
    return int(commands.run("sbatch", ["--parsable"], input=script).stdout)


def standby_pid(commands: SlurmCommands, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (pid := commands.standby.waiting_pid) is None:
        assert time.monotonic() < deadline, "no sbatch was started ahead"
        time.sleep(0.01)
    return pid


def submitted(fake_slurm: Path) -> dict[int, str]:
    return {
        int(path.name.split("-")[1]): path.read_text() for path in fake_slurm.glob("submitted-*")
    }


def started(fake_slurm: Path) -> list[str]:
    """The pids of the fake sbatch processes that ran their first line."""
    path = fake_slurm / "started"
    return path.read_text().split() if path.exists() else []


def gone(pid: int, timeout: float = 5.0) -> bool:
    """The process ended and was reaped (no zombie left behind)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid):
            return True
        time.sleep(0.02)
    return False


def test_the_next_submit_takes_the_sbatch_started_ahead(
    commands: SlurmCommands, fake_slurm: Path
) -> None:
    first = submit(commands, "#!/bin/sh\necho one\n")
    ahead = standby_pid(commands)
    assert ahead != first
    second = submit(commands, "#!/bin/sh\necho two\n")
    assert second == ahead and commands.standby.taken == 1
    assert submitted(fake_slurm) == {first: "#!/bin/sh\necho one\n", ahead: "#!/bin/sh\necho two\n"}
    third_ahead = standby_pid(commands)
    assert third_ahead not in (first, second)


def test_a_changed_environment_or_slurm_conf_starts_a_new_sbatch(
    commands: SlurmCommands, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit(commands, "#!/bin/sh\ntrue\n")
    stale = standby_pid(commands)
    monkeypatch.setenv("HYPERPOD_TEST_CHANGED", "1")  # sbatch copies its environment into the job
    job = submit(commands, "#!/bin/sh\necho env\n")
    assert job != stale and commands.standby.taken == 0
    assert gone(stale) and stale not in submitted(fake_slurm)

    stale = standby_pid(commands)
    conf = fake_slurm / "slurm.conf"
    conf.write_text("SlurmctldHost=other(127.0.0.2)\n")
    os.utime(conf, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    job = submit(commands, "#!/bin/sh\necho conf\n")
    assert job != stale and commands.standby.taken == 0
    assert gone(stale) and stale not in submitted(fake_slurm)


def test_a_standby_waits_at_most_its_max_age_and_submits_nothing(fake_slurm: Path) -> None:
    commands = SlurmCommands(bin_dir=str(fake_slurm / "bin"), standby_seconds=0.5)
    try:
        submit(commands, "#!/bin/sh\ntrue\n")
        expired = standby_pid(commands)
        assert gone(expired, timeout=5.0), "the watch neither stopped nor reaped it"
        job = submit(commands, "#!/bin/sh\necho late\n")  # started cold, then a new standby
        assert job != expired and commands.standby.taken == 0
        assert expired not in submitted(fake_slurm)
    finally:
        commands.close()


def test_closing_stops_the_standby_and_starts_no_other(
    commands: SlurmCommands, fake_slurm: Path
) -> None:
    submit(commands, "#!/bin/sh\ntrue\n")
    waiting = standby_pid(commands)
    # (Closed before its shell ran a line, it would never say it started: 2 below, not 3.)
    deadline = time.monotonic() + 10
    while str(waiting) not in started(fake_slurm):
        assert time.monotonic() < deadline, "the sbatch started ahead never ran"
        time.sleep(0.01)
    commands.close()
    assert gone(waiting) and waiting not in submitted(fake_slurm)
    submit(commands, "#!/bin/sh\nafter close\n")
    time.sleep(0.3)
    assert commands.standby.waiting_pid is None
    assert len(started(fake_slurm)) == 3


def test_without_standby_seconds_nothing_is_started_ahead(fake_slurm: Path) -> None:
    commands = SlurmCommands(bin_dir=str(fake_slurm / "bin"))
    submit(commands, "#!/bin/sh\ntrue\n")
    submit(commands, "#!/bin/sh\ntrue\n")
    time.sleep(0.3)
    assert commands.standby.waiting_pid is None
    assert len(started(fake_slurm)) == 2


def test_commands_without_input_never_use_or_start_a_standby(
    commands: SlurmCommands, fake_slurm: Path
) -> None:
    done = commands.run("sbatch", ["--parsable"], ok_codes=(1,))  # stdin /dev/null: empty
    assert "Batch script is empty" in done.stderr
    time.sleep(0.3)
    assert commands.standby.waiting_pid is None


def test_submits_side_by_side_each_send_their_script_to_one_sbatch(
    commands: SlurmCommands, fake_slurm: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    scripts = [f"#!/bin/sh\necho {index}\n" for index in range(24)]
    with ThreadPoolExecutor(4) as pool:
        jobs = list(pool.map(lambda script: submit(commands, script), scripts))
    assert len(set(jobs)) == len(scripts)  # one sbatch each, none given two scripts
    sent = submitted(fake_slurm)
    assert [sent[job] for job in jobs] == scripts
    assert commands.standby.taken >= 1
