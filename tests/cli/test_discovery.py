"""Which server and partition the CLI uses: a running Jupyter server of this user that serves the
hyperpod API (found in the runtime directory, as `jupyter server list` finds it; servers without
the extension are passed over), else the core in this process, said on one stderr line with the
partition; reads never create the partition; doctor reports what the server uses."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, cli
from .test_cli import run_async

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def plain_server() -> Iterator[str]:
    """An HTTP server that is not a Jupyter server with the extension (every path is 404)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


async def test_the_cli_finds_the_running_server_with_the_extension(
    jp_serverapp: Any, jp_fetch: Any, api: Any, steps_script: Path, plain_server: str
) -> None:
    jp_serverapp.write_server_info_file()
    runtime = Path(jp_serverapp.runtime_dir)
    # A newer info file of a live process whose server has no hyperpod API: passed over.
    other = runtime / "jpserver-1.json"
    other.write_text(json.dumps({"pid": os.getpid(), "url": plain_server, "token": "x"}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_RUNTIME_DIR": str(runtime)}
    for key in (
        "JUPYTER_HYPERPOD_URL",
        "JUPYTER_TOKEN",
        "JUPYTER_HYPERPOD_TOKEN",
        "JPY_PARENT_PID",
    ):
        env.pop(key, None)
    job = await api.submit(
        {"name": "seen", "command": ["steps.py", "1", "0"], "workdir": "project"}
    )
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]

    code, out, err = await run_async(env, *base, "jobs", "--json")
    assert code == 0, err
    assert "standalone" not in err
    assert [j["id"] for j in json.loads(out)["jobs"]] == [job["id"]]

    code, out, err = await run_async(env, *base, "doctor", "--json")
    report = json.loads(out)
    checks = {c["name"]: c for c in report["checks"]}
    served = (await api.get("cluster")).body
    assert checks["Jupyter server"]["status"] == "pass"
    assert jp_serverapp.connection_url in checks["Jupyter server"]["detail"]
    # The server's own words for what it uses: its GET cluster's root and partition.
    assert served["filesystem"]["root"] in checks["shared file system"]["detail"]
    assert served["filesystem"]["partition"] in checks["partition"]["detail"]
    assert checks["orchestrator"]["detail"] == "local (configured)"
    assert report["where"].startswith(f"Jupyter server {jp_serverapp.connection_url}")
    assert "the Jupyter server (pid" in report["where"]

    # --direct: the core in this process, said on stderr.
    code, out, err = await run_async(env, *base, "jobs", "--json", "--direct")
    assert code == 0 and err.startswith("standalone (--direct): the core runs in this process")


def test_standalone_says_so_and_reads_create_no_partition(
    jupyter_env: dict[str, str], fs_root: Path
) -> None:
    config_file = Path(jupyter_env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
    config = json.loads(config_file.read_text())
    config["HyperPodApp"]["partition"] = "user"  # <root>/alice, which does not exist yet
    config_file.write_text(json.dumps(config))
    partition = fs_root / "alice"

    for verb in (["cluster"], ["jobs"], ["templates"], ["files"], ["doctor"]):
        done = cli(jupyter_env, *verb)
        lines = done.stderr.splitlines()
        assert lines[0] == (
            "standalone (no Jupyter server with jupyter-hyperpod runs for this user): the core "
            f"runs in this process, local orchestrator, partition {partition}"
        ), done.stderr
        assert not partition.exists(), f"{verb} created the partition"
    assert "does not exist in your partition" in cli(jupyter_env, "files").stderr
    doctor = json.loads(cli(jupyter_env, "doctor", "--json").stdout)
    partition_check = next(c for c in doctor["checks"] if c["name"] == "partition")
    assert (
        partition_check["status"] == "warn" and "created on first use" in partition_check["detail"]
    )

    # A dry run of a command needs no partition either; the first submit makes it.
    spec = Path(jupyter_env["JUPYTER_CONFIG_DIR"]) / "job.yaml"
    spec.write_text("name: hi\ncommand: [python3, -c, 'print(1)']\n")
    dry = cli(jupyter_env, "submit", "--dry-run", "--spec", str(spec))
    assert dry.returncode == 0 and not partition.exists(), dry.stderr
    done = cli(jupyter_env, "submit", "--wait", "--spec", str(spec))
    assert done.returncode == 0 and partition.is_dir(), done.stderr


def test_magics_standalone_read_nothing_then_a_cell_submit_makes_the_partition(
    jupyter_env: dict[str, str], fs_root: Path, shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = Path(jupyter_env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
    config = json.loads(config_file.read_text())
    config["HyperPodApp"]["partition"] = "user"
    config_file.write_text(json.dumps(config))
    partition = fs_root / "alice"

    assert list(shell.run_line_magic("hyperpod", "jobs")) == []
    assert shell.run_line_magic("hyperpod", "cluster").filesystem.partition == str(partition)
    assert not partition.exists()
    err = capsys.readouterr().err
    assert err.count("standalone (") == 1 and f"partition {partition}" in err  # said once

    job = shell.run_cell_magic("hyperpod", "submit --name first -w", "print('made it')\n")
    assert partition.is_dir() and job.spec.command[0].startswith(str(partition))
    assert shell.run_line_magic("hyperpod", f"logs {job.id}").strip() == "made it"
