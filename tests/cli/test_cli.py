"""`jupyter hyperpod` as a subprocess: without a server (the core in the CLI's process, configured
by the Jupyter config files), with --url/--token against a real server, and a kernel-like IPython
process that finds the server it runs under."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, cli

pytestmark = pytest.mark.timeout(120)


def job_id_of(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("Submitted job "):
            return line.split()[2]
    raise AssertionError(f"no job id in {stdout!r}")


def test_submit_wait_and_exit_codes(jupyter_env: dict[str, str], steps_script: Path) -> None:
    ok = cli(
        jupyter_env,
        "submit",
        "--wait",
        "--procs-per-node",
        "2",
        "project/steps.py",
        "2",
        "0.01",
        "--lr",
        "1",
    )
    assert ok.returncode == 0, ok.stderr
    job_id = job_id_of(ok.stdout)
    assert f"job {job_id} SUCCEEDED (exit code 0)" in ok.stdout

    failed = cli(
        jupyter_env,
        "submit",
        "-w",
        "-e",
        "EXIT_CODE=3",
        "--name",
        "bad",
        "project/steps.py",
        "1",
        "0",
    )
    assert failed.returncode == 1
    assert "FAILED (exit code 3)" in failed.stdout

    status = cli(jupyter_env, "status", job_id, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["state"] == "SUCCEEDED"
    jobs = json.loads(cli(jupyter_env, "jobs", "--json").stdout)
    assert jobs["total"] == 2 and {j["state"] for j in jobs["jobs"]} == {"SUCCEEDED", "FAILED"}
    failed_only = cli(jupyter_env, "jobs", "--state", "failed")
    assert "bad-" in failed_only.stdout and job_id not in failed_only.stdout

    logs = cli(jupyter_env, "logs", job_id, "--rank", "all", "-f")
    assert logs.returncode == 0
    assert "[1] rank 1 step 1 args ['--lr', '1']" in logs.stdout.splitlines()
    failed_logs = cli(jupyter_env, "logs", "-f", job_id_of(failed.stdout))
    assert failed_logs.returncode == 1


def test_usage_errors_and_not_found(jupyter_env: dict[str, str], steps_script: Path) -> None:
    local = cli(jupyter_env, "submit", "--nodes", "2", "project/steps.py", "1", "0")
    assert local.returncode == 2
    standalone, error = local.stderr.strip().splitlines()
    assert standalone.startswith("standalone (no Jupyter server with jupyter-hyperpod runs")
    assert error == "error: the local cluster has one node: set nodes to 1"

    bad_param = cli(
        jupyter_env,
        "submit",
        "--template",
        "script",
        "--set",
        "script=project/steps.py",
        "--set",
        "nodes=many",
    )
    assert (
        bad_param.returncode == 2
        and "Nodes must be a whole number, not 'many' (--set nodes=VALUE)" in bad_param.stderr
    )

    unknown = cli(jupyter_env, "launch")
    assert unknown.returncode == 2 and "invalid choice: 'launch'" in unknown.stderr
    missing_value = cli(jupyter_env, "submit", "--nodes", "x", "a.py")
    assert missing_value.returncode == 2 and "'x' is not a whole number" in missing_value.stderr

    assert cli(jupyter_env, "status", "nope-123456").returncode == 3
    assert cli(jupyter_env, "templates", "nope").returncode == 3

    helped = cli(jupyter_env, "submit", "--help")
    assert helped.returncode == 0 and "usage: jupyter hyperpod submit" in helped.stdout
    assert "--gpus-per-node" in helped.stdout and "--dry-run" in helped.stdout


def test_dry_run_and_json_outputs(
    jupyter_env: dict[str, str], steps_script: Path, partition: Path
) -> None:
    dry = cli(
        jupyter_env,
        "submit",
        "--dry-run",
        "--json",
        "--gpus-per-node",
        "0",
        "project/steps.py",
        "1",
        "0",
    )
    rendered = json.loads(dry.stdout)
    assert dry.returncode == 0 and rendered["format"] == "command"
    assert (
        rendered["spec"]["command"] == ["steps.py", "1", "0"]
        and rendered["spec"]["workdir"] == "project"
    )
    assert f"cd {partition}/project" in rendered["text"]
    assert json.loads(cli(jupyter_env, "jobs", "--json").stdout) == {"jobs": [], "total": 0}

    # Options the script template does not take override the spec it builds.
    dry_override = json.loads(
        cli(
            jupyter_env,
            "submit",
            "--dry-run",
            "--json",
            "--launcher",
            "plain",
            "--workdir",
            "",
            "project/steps.py",
            "1",
        ).stdout
    )
    assert dry_override["spec"]["launcher"] == "plain"
    assert dry_override["spec"]["command"] == [f"{partition}/project/steps.py", "1"]

    templates = json.loads(cli(jupyter_env, "templates", "--json").stdout)
    assert "script" in [t["name"] for t in templates]
    files = json.loads(cli(jupyter_env, "files", "project", "--json").stdout)
    assert files["path"] == "project" and [e["name"] for e in files["entries"]] == ["steps.py"]


def test_wait_timeout_then_cancel(jupyter_env: dict[str, str], steps_script: Path) -> None:
    submitted = cli(jupyter_env, "submit", "project/steps.py", "1000", "0.1")
    job_id = job_id_of(submitted.stdout)
    timed_out = cli(jupyter_env, "wait", job_id, "--timeout", "0.5")
    assert timed_out.returncode == 124 and f"job {job_id} is still RUNNING" in timed_out.stderr

    cancelled = cli(jupyter_env, "cancel", job_id)
    assert cancelled.returncode == 0 and f"Cancelled job {job_id} (CANCELLED)" in cancelled.stdout
    assert cli(jupyter_env, "wait", job_id).returncode == 1


def test_doctor_on_the_local_cluster(
    jupyter_env: dict[str, str], partition: Path, fs_root: Path
) -> None:
    done = cli(jupyter_env, "doctor", "--json")
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert done.returncode == 0 and report["ok"] is True and report["orchestrator"] == "local"
    assert (
        checks["shared file system"]["status"] == "pass"
        and str(fs_root) in checks["shared file system"]["detail"]
    )
    assert checks["partition"]["status"] == "pass"
    assert checks["Jupyter server"]["status"] == "skip"

    # A partition that is a file, not a directory: the check fails with its fix (even as root).
    (fs_root / "not-a-dir").write_text("")
    config_file = Path(jupyter_env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
    config = json.loads(config_file.read_text())
    config["HyperPodApp"]["partition"] = "not-a-dir"
    config_file.write_text(json.dumps(config))
    broken = cli({**jupyter_env, "COLUMNS": "100"}, "doctor")
    assert broken.returncode == 1 and "give this user write access" in " ".join(
        broken.stdout.split()
    )
    # The table fits a 100-column terminal: its detail and fix columns wrap.
    assert max(map(len, broken.stdout.splitlines())) <= 100, broken.stdout


# -- with a server -------------------------------------------------------------------------------------


async def run_async(env: dict[str, str], *argv: str, timeout: float = 60) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def server_env(jp_serverapp: Any, jp_fetch: Any) -> dict[str, str]:
    """Environment of a process started by the server (a kernel): JPY_PARENT_PID and the server's
    info file in the runtime directory, as a real server writes it."""
    jp_serverapp.write_server_info_file()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "JPY_PARENT_PID": str(os.getpid()),
        "JUPYTER_RUNTIME_DIR": jp_serverapp.runtime_dir,
    }
    for key in ("JUPYTER_HYPERPOD_URL", "JUPYTER_TOKEN", "JUPYTER_HYPERPOD_TOKEN"):
        env.pop(key, None)
    return env


async def test_cli_against_a_server(jp_serverapp: Any, jp_fetch: Any, steps_script: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_RUNTIME_DIR": str(steps_script.parent)}
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]
    url = ["--url", jp_serverapp.connection_url, "--token", jp_serverapp.identity_provider.token]

    code, out, err = await run_async(
        env, *base, "submit", *url, "-f", "project/steps.py", "3", "0.02"
    )
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("rank 0 step")] == [
        f"rank 0 step {i} args []" for i in range(3)
    ]
    code, out, _ = await run_async(env, *base, "jobs", "--json", *url)
    assert code == 0 and json.loads(out)["jobs"][0]["state"] == "SUCCEEDED"

    code, _, err = await run_async(
        env, *base, "jobs", "--url", jp_serverapp.connection_url, "--token", "wrong"
    )
    assert code == 5 and "refused the token" in err
    code, _, err = await run_async(env, *base, "jobs", "--url", "http://127.0.0.1:9/")
    assert code == 4 and "cannot reach the Jupyter server" in err


KERNEL = textwrap.dedent(
    """
    import signal
    # Ctrl-C raises KeyboardInterrupt while a cell runs, as in ipykernel (kernelbase.py
    # pre_handler_hook), even where the kernel was started with SIGINT ignored (a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_hyperpod")
    job = ip.run_line_magic("hyperpod", "submit project/steps.py 1000 0.05")
    print("SESSION", ip.magics_manager.registry["HyperPodMagics"]._session.description, flush=True)
    print("JOB", job.id, flush=True)
    ip.run_line_magic("hyperpod", f"logs {job.id} -f")
    print("AFTER", ip.run_line_magic("hyperpod", f"status {job.id}").state.value, flush=True)
    """
)


async def test_a_kernel_finds_its_server_and_an_interrupt_stops_only_the_follow(
    server_env: dict[str, str], jp_serverapp: Any, api: Any, steps_script: Path
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        KERNEL,
        env=server_env,
        cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while sum("rank 0 step" in line for line in lines) < 3:
            line = await asyncio.wait_for(
                process.stdout.readline(), max(0.1, deadline - time.monotonic())
            )
            assert line, f"the kernel ended early: {lines} {(await process.stderr.read()).decode()}"  # type: ignore[union-attr]
            lines.append(line.decode())
        process.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
    lines.extend(out.decode().splitlines(keepends=True))
    text = "".join(lines)
    job_id = next(line.split()[1] for line in lines if line.startswith("JOB "))
    assert (
        f"SESSION Jupyter server {jp_serverapp.connection_url} (parent Jupyter server (pid {os.getpid()}))"
        in text
    )
    assert f"[stopped following {job_id} (still RUNNING); the job keeps running" in text, (
        err.decode()
    )
    assert "AFTER RUNNING" in text
    assert process.returncode == 0

    reply = await api.get(f"jobs/{job_id}")
    assert reply.body["state"] == "RUNNING"
    assert (await api.delete(f"jobs/{job_id}")).body["state"] == "CANCELLED"


@pytest.mark.skipif(shutil.which("jupyter-hyperpod") is None, reason="the package is not installed")
def test_jupyter_dispatches_to_the_console_script(jupyter_env: dict[str, str]) -> None:
    done = subprocess.run(
        ["jupyter", "hyperpod", "--help"],
        env=jupyter_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (
        done.returncode == 0
        and "usage: jupyter hyperpod" in done.stdout
        and "exit codes:" in done.stdout
    )


def test_a_trailing_dry_run_submits_nothing(
    jupyter_env: dict[str, str], steps_script: Path
) -> None:
    """`submit x.py --dry-run`: argparse would give --dry-run to the script and really submit."""
    done = cli(jupyter_env, "submit", "project/steps.py", "1", "0", "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "put it before the script (submit --dry-run SCRIPT ...)" in done.stderr
    assert json.loads(cli(jupyter_env, "jobs", "--json").stdout)["total"] == 0


def test_an_interrupted_follow_says_the_cli_s_cancel(
    jupyter_env: dict[str, str], steps_script: Path
) -> None:
    submitted = cli(jupyter_env, "submit", "--json", "project/steps.py", "1000", "0.05")
    job_id = json.loads(submitted.stdout)["id"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "jupyter_hyperpod.cli", "logs", job_id, "-f"],
        env=jupyter_env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As in a terminal: a suite started in the background (`cmd &` in a script) ignores
        # SIGINT, a child inherits that, and Python then installs no KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert follower.stdout is not None
        seen = [follower.stdout.readline() for _ in range(3)]
        assert all("step" in line for line in seen), seen
        follower.send_signal(signal.SIGINT)
        out, _ = follower.communicate(timeout=30)
        assert f"cancel it with `jupyter hyperpod cancel {job_id}`]" in out
        assert cli(jupyter_env, "status", "--json", job_id).stdout.count('"RUNNING"') >= 1
    finally:
        if follower.poll() is None:
            follower.kill()
        cli(jupyter_env, "cancel", job_id)
