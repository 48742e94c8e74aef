"""`%hyperpod` in a real IPython shell without a server: the core runs in the shell's process with
the Jupyter configuration files."""

from __future__ import annotations

import _thread
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from jupyter_hyperpod.core.models import Job, JobState

pytestmark = pytest.mark.timeout(60)


def wait_state(ip: Any, job_id: str, states: set[str], timeout: float = 30) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = ip.run_line_magic("hyperpod", f"status {job_id}")
        if job.state.value in states or time.monotonic() > deadline:
            return job  # type: ignore[no-any-return]
        time.sleep(0.1)


def test_submit_a_script_then_list_it_as_a_rich_table(
    shell: Any, steps_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = shell.run_line_magic(
        "hyperpod", "submit --procs-per-node 2 project/steps.py 2 0.01 --config args.yaml"
    )

    assert isinstance(job, Job) and job.id.startswith("steps-")
    assert f"Submitted job {job.id}" in capsys.readouterr().out
    assert job.spec.command == ["steps.py", "2", "0.01", "--config", "args.yaml"]
    assert job.spec.workdir == "project" and job.spec.template == "script"
    done = wait_state(shell, job.id, {"SUCCEEDED", "FAILED"})
    assert done.state == JobState.SUCCEEDED
    card, _ = shell.display_formatter.format(done)
    assert re.search(r"^workdir +project$", card["text/plain"], re.M), card  # as the panel says

    jobs = shell.run_line_magic("hyperpod", "jobs")
    assert [j.id for j in jobs] == [job.id] and jobs.total == 1
    data, _ = shell.display_formatter.format(jobs)
    assert (
        "<table>" in data["text/html"]
        and "<td" in data["text/html"]
        and job.id in data["text/html"]
    )
    assert "SUCCEEDED" in data["text/plain"] and data["text/plain"].splitlines()[0].split()[:2] == [
        "id",
        "state",
    ]

    log = shell.run_line_magic("hyperpod", f"logs {job.id} --rank 1")
    assert (
        log
        == "rank 1 step 0 args ['--config', 'args.yaml']\nrank 1 step 1 args ['--config', 'args.yaml']\n"
    )


def test_cell_magic_submits_the_cell_body(shell: Any, partition: Path) -> None:
    (partition / "data").mkdir()
    (partition / "data" / "input.txt").write_text("hello from the partition\n")
    body = "import sys\nprint(open('data/input.txt').read().strip(), sys.argv[1:])\n"

    job = shell.run_cell_magic(
        "hyperpod", "submit --name cell-job --env GREETING=hi -- --lr 3", body
    )

    cell_file = Path(job.spec.command[0])
    assert cell_file.parent == partition / ".hyperpod" / "cells"
    assert cell_file.read_text() == body
    assert job.spec.command[1:] == ["--lr", "3"] and job.spec.env == {"GREETING": "hi"}
    assert wait_state(shell, job.id, {"SUCCEEDED", "FAILED"}).state == JobState.SUCCEEDED
    log = shell.run_line_magic("hyperpod", f"logs {job.id}")
    assert log.strip() == "hello from the partition ['--lr', '3']"


def test_dry_run_submits_nothing_and_shows_the_command(shell: Any, steps_script: Path) -> None:
    rendered = shell.run_line_magic(
        "hyperpod", "submit --dry-run --name preview project/steps.py 1 0"
    )

    assert rendered.spec.name == "preview"
    assert "steps.py 1 0" in rendered.text
    data, _ = shell.display_formatter.format(rendered)
    assert "nothing was submitted" in data["text/plain"]
    assert shell.run_line_magic("hyperpod", "jobs") == []


def test_our_options_after_the_script_are_caught(
    shell: Any, steps_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse gives whatever follows the script to the script: a trailing --dry-run would
    really submit, so it is refused; another of our options is passed on with a note."""
    with pytest.raises(UsageError, match="--dry-run came after the script"):
        shell.run_line_magic("hyperpod", "submit project/steps.py 1 0 --dry-run")
    assert shell.run_line_magic("hyperpod", "jobs") == []

    job = shell.run_line_magic("hyperpod", "submit project/steps.py 1 0 --follow")
    assert job.spec.command[-3:] == ["1", "0", "--follow"]
    assert "note: --follow came after the script, so the script gets it" in capsys.readouterr().out
    shell.run_line_magic("hyperpod", f"cancel {job.id}")

    explicit = shell.run_line_magic("hyperpod", "submit project/steps.py -- 1 0 --dry-run")
    assert explicit.spec.command[-1] == "--dry-run"  # `--`: the script's own, no note
    assert "came after the script" not in capsys.readouterr().out
    shell.run_line_magic("hyperpod", f"cancel {explicit.id}")


def test_forget_removes_a_job_and_keeps_its_files_unless_asked(
    shell: Any, steps_script: Path, partition: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept, deleted = (
        shell.run_line_magic("hyperpod", f"submit --name {name} project/steps.py 1000 0.05")
        for name in ("kept", "deleted")
    )
    gone = shell.run_line_magic("hyperpod", f"forget {kept.id}")
    assert gone.cancelled and not gone.files_deleted
    assert (partition / gone.job_dir).is_dir()
    assert f"Job {kept.id} cancelled, then removed from your history" in capsys.readouterr().out
    both = shell.run_line_magic("hyperpod", f"forget {deleted.id} --delete-files")
    assert both.files_deleted and not (partition / both.job_dir).exists()
    assert shell.run_line_magic("hyperpod", "jobs") == []
    with pytest.raises(UsageError, match="no job"):
        shell.run_line_magic("hyperpod", f"forget {kept.id}")


def test_errors_are_usage_errors_with_the_core_message(shell: Any, steps_script: Path) -> None:
    with pytest.raises(UsageError, match="the local cluster has one node: set nodes to 1"):
        shell.run_line_magic("hyperpod", "submit --nodes 2 project/steps.py 1 0")
    with pytest.raises(UsageError, match="unknown template 'nope'"):
        shell.run_line_magic("hyperpod", "submit --template nope --set x=1")
    with pytest.raises(
        UsageError, match=re.escape("'missing.py' does not exist in your partition")
    ):
        shell.run_line_magic("hyperpod", "submit missing.py")
    with pytest.raises(UsageError, match="invalid choice: 'launch'"):
        shell.run_line_magic("hyperpod", "launch")
    with pytest.raises(UsageError, match="only works with submit"):
        shell.run_cell_magic("hyperpod", "jobs", "print(1)")


def test_help_for_every_verb(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_line_magic("hyperpod", "--help") is None
    top = capsys.readouterr().out
    for verb in (
        "nodes",
        "jobs",
        "submit",
        "status",
        "logs",
        "cancel",
        "files",
        "templates",
        "connect",
        "doctor",
    ):
        assert verb in top
        assert shell.run_line_magic("hyperpod", f"{verb} --help") is None
        assert capsys.readouterr().out.count(f"usage: %hyperpod {verb}") == 1


@pytest.fixture
def cell_sigint() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt while a cell runs, as in ipykernel (kernelbase.py
    pre_handler_hook), even where pytest was started with SIGINT ignored (a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("cell_sigint")
def test_interrupt_stops_following_never_the_job(
    shell: Any, steps_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = shell.run_line_magic("hyperpod", "submit project/steps.py 1000 0.05")
    wait_state(shell, job.id, {"RUNNING"})
    log_file = Path(job.ranks[0].log or "")

    def interrupt_when_logging() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if log_file.exists() and log_file.read_text().count("\n") >= 5:
                time.sleep(0.3)  # let the follower print some lines
                _thread.interrupt_main()
                return
            time.sleep(0.05)

    threading.Thread(target=interrupt_when_logging, daemon=True).start()
    try:
        result = shell.run_line_magic("hyperpod", f"logs {job.id} -f")
        output = capsys.readouterr().out
        assert result.id == job.id and result.state == JobState.RUNNING
        assert "rank 0 step 4 args []" in output
        assert f"[stopped following {job.id} (still RUNNING); the job keeps running" in output
        assert f"cancel it with `%hyperpod cancel {job.id}`]" in output  # as typed here
        assert f"[job {job.id} RUNNING" not in output  # it was running before: no news
        time.sleep(0.5)
        assert shell.run_line_magic("hyperpod", f"status {job.id}").state == JobState.RUNNING
    finally:
        cancelled = shell.run_line_magic("hyperpod", f"cancel {job.id}")
    assert cancelled.state == JobState.CANCELLED


def test_follow_prints_live_log_until_the_job_ends(
    shell: Any, steps_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = shell.run_line_magic(
        "hyperpod", "submit --follow --procs-per-node 2 --env EXIT_CODE=3 project/steps.py 3 0.05"
    )

    output = capsys.readouterr().out
    assert job.state == JobState.FAILED and job.exit_code == 3
    assert output.count("rank 0 step") == 3 and "rank 1 step" not in output
    assert f"[job {job.id} FAILED (exit code 3)]" in output

    shell.run_line_magic("hyperpod", f"logs {job.id} --rank all --tail 1 -f")
    lines = capsys.readouterr().out.splitlines()
    assert "[0] rank 0 step 2 args []" in lines and "[1] rank 1 step 2 args []" in lines


COLOURED = (
    "import sys\n"
    "print('\\x1b[1;32mrank 0/2\\x1b[0m ready', flush=True)\n"
    "for pct in (10, 50, 100):\n"
    "    sys.stdout.write(f'\\rtraining {pct}%')\n"
    "print(flush=True)\n"
)


def test_a_log_shows_as_a_terminal_would(shell: Any, partition: Path) -> None:
    """Colours as HTML and a redrawn bar settled, in a notebook; plain text in a terminal."""
    (partition / "coloured.py").write_text(COLOURED)
    job = shell.run_line_magic("hyperpod", "submit coloured.py")
    assert wait_state(shell, job.id, {"SUCCEEDED"}).state == JobState.SUCCEEDED
    for value in (
        shell.run_line_magic("hyperpod", f"logs {job.id}"),
        shell.run_line_magic("hyperpod", f"logs {job.id} --rank all"),
    ):
        data, _ = shell.display_formatter.format(value)
        page = data["text/html"]
        assert '<span class="ansi-green-intense-fg ansi-bold">rank 0/2</span> ready' in page
        assert "training 100%" in page and "training 10%" not in page
        assert "\x1b" not in page and "\r" not in page
        assert "rank 0/2 ready\ntraining 100%" in data["text/plain"]
        assert "\x1b" not in data["text/plain"]


def test_results_are_python_objects(shell: Any, partition: Path) -> None:
    (partition / "a.txt").write_text("x" * 10)
    (partition / "sub").mkdir()

    files = shell.run_line_magic("hyperpod", "files")
    cluster = shell.run_line_magic("hyperpod", "status")
    nodes = shell.run_line_magic("hyperpod", "nodes")
    templates = shell.run_line_magic("hyperpod", "templates")

    assert [(e.name, e.type) for e in files] == [("sub", "directory"), ("a.txt", "file")]
    assert cluster.orchestrator == "local" and cluster.filesystem.partition == str(partition)
    assert len(nodes) == 1 and nodes[0].instance_type == "local"
    assert "script" in [t.name for t in templates]
    report = shell.run_line_magic("hyperpod", "doctor")
    assert report.ok and report["partition"].status == "pass" and report.orchestrator == "local"
    for value in (files, cluster, nodes, templates, report):
        data, _ = shell.display_formatter.format(value)
        assert data["text/html"].startswith('<div class="jp-hyperpod-result">')


def test_connect_says_what_aws_needs(
    shell: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))

    with pytest.raises(
        UsageError, match=re.escape("no AWS region: pass a region (--region), set AWS_REGION")
    ):
        shell.run_line_magic("hyperpod", "connect")
    with pytest.raises(UsageError, match="no AWS credentials for sagemaker:ListClusters"):
        shell.run_line_magic("hyperpod", "connect --region us-east-1")


HALF_LINES = (
    "import sys, time\n"
    "sys.stdout.write('loading'); sys.stdout.flush()\n"
    "time.sleep(0.3)\n"
    "print(' done', flush=True)\n"
    "sys.stdout.write('no newline at the end'); sys.stdout.flush()\n"
)


def test_the_job_s_news_is_never_in_the_middle_of_a_log_line(
    shell: Any, partition: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log that ends half a line: the job's end is said on a line of its own."""
    (partition / "half.py").write_text(HALF_LINES)
    job = shell.run_line_magic("hyperpod", "submit --follow half.py")
    lines = capsys.readouterr().out.splitlines()
    assert job.state == JobState.SUCCEEDED
    assert "loading done" in lines
    assert "no newline at the end" in lines
    assert f"[job {job.id} SUCCEEDED (exit code 0)]" in lines


def test_a_started_job_s_ranks_are_not_called_pending(shell: Any, steps_script: Path) -> None:
    """The card at submit shows the server's per-rank facts: a RUNNING job's ranks are
    STARTING (its supervisor is up) or RUNNING, never PENDING."""
    job = shell.run_line_magic("hyperpod", "submit --procs-per-node 2 project/steps.py 40 0.05")
    try:
        assert job.state == JobState.RUNNING
        states = [rank.state for rank in job.ranks]
        assert len(states) == 2 and set(states) <= {"STARTING", "RUNNING"}, states
        card = shell.display_formatter.format(job)[0]["text/plain"]
        assert "PENDING" not in card and "ranks: 0:" in card
        running = wait_state(shell, job.id, {"RUNNING"})
        assert all(rank.state in ("STARTING", "RUNNING") for rank in running.ranks)
    finally:
        shell.run_line_magic("hyperpod", f"cancel {job.id}")
