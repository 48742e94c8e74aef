"""The demo workspace, followed as its README tells a newcomer, through the REST API of a real server.

Every path the demo writes for the user (its README, the config's header) must be accepted as
written by the submit form (the same REST call), and the jobs it describes must succeed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.demo import QLORA_PROJECT, write_demo

from .helpers import Api, copy_checkout

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return hyperpod_config


@pytest.mark.slow
@pytest.mark.training
async def test_the_demo_readme_works_as_written(api: Api, fs_root: Path, partition: Path) -> None:
    assert write_demo(fs_root, log=lambda _: None) == partition.resolve()
    readme = (partition / QLORA_PROJECT / "README.md").read_text()
    told = re.findall(r"config `([^`]+)`", readme)
    assert len(told) == 1, readme
    config = told[0]
    header = (partition / QLORA_PROJECT / "args-fine-tuning.yaml").read_text().splitlines()[:4]
    assert any(f"(config: {config})" in line for line in header), header

    train = await api.submit(
        {"name": "demo-train", "template": "qlora-finetune", "params": {"config": config}}
    )
    done = await api.wait_for(train["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=600)
    log = (await api.get(f"jobs/{train['id']}/logs", rank=0, tail=60)).body["text"]
    assert done["state"] == "SUCCEEDED", log
    model = partition / QLORA_PROJECT / "model"
    assert list(model.rglob("adapter_model.safetensors")), sorted(model.rglob("*"))
    # The job ran with the server's interpreter, whatever `python3` is first on PATH.
    assert train["spec"]["command"][0] == sys.executable

    evaluate = await api.submit(
        {"name": "demo-eval", "template": "evaluate", "params": {"config": config}}
    )
    done = await api.wait_for(evaluate["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=600)
    log = (await api.get(f"jobs/{evaluate['id']}/logs", rank=0, tail=60)).body["text"]
    assert done["state"] == "SUCCEEDED", log
    assert re.search(r"rouge", log, re.IGNORECASE), log


async def test_the_demo_examples_run_on_two_ranks(api: Api, fs_root: Path) -> None:
    pytest.importorskip("tqdm")
    write_demo(fs_root, log=lambda _: None)
    job = await api.submit(
        {
            "name": "hello",
            "template": "script",
            "params": {"script": "examples/hello_ranks.py", "procs_per_node": 2},
        }
    )
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=120)
    text = (await api.get(f"jobs/{job['id']}/logs", rank=1, tail=40)).body["text"]
    assert done["state"] == "SUCCEEDED", text
    assert "rank 1: sum of all ranks = 1 (expected 1)" in text


def test_writing_the_demo_again_keeps_the_users_edits(tmp_path: Path) -> None:
    partition = write_demo(tmp_path, log=lambda _: None)
    script = partition / "examples" / "hello_ranks.py"
    script.write_text("print('mine')\n")
    write_demo(tmp_path, log=lambda _: None)
    assert script.read_text() == "print('mine')\n"
    assert not list(partition.glob("*.partial"))


def _checkout_copy(target: Path) -> None:
    """What a user's own clone holds, plus the frontend's packages and yarn's cache (a clone
    would download them: minutes more, same result)."""
    copy_checkout(target)
    for folder in ("node_modules", ".yarn"):
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, target / folder, symlinks=True)


def _network_settings() -> dict[str, str]:
    """What any user's shell on this machine has to reach the package registries."""
    wanted = ("CERT", "CA_BUNDLE", "CA_CERTS", "SSL", "PROXY", "PIP_", "LANG", "LC_")
    return {k: v for k, v in os.environ.items() if any(w in k.upper() for w in wanted)}


@pytest.mark.slow
@pytest.mark.fresh_machine
@pytest.mark.timeout(1800)  # a whole first install: pip downloads every package, yarn builds
def test_the_demo_command_runs_without_root_or_apt() -> None:
    """`scripts/demo.sh` as an ordinary user in their own checkout: no apt, no sudo, its own venv
    made with the system's Python, the demo served. A whole first install from the package
    registries (8 minutes on 2 cores, longer on a slow network): run by `scripts/test.sh --fresh`
    (HYPERPOD_FRESH_MACHINE=1), not on every run."""
    if os.environ.get("HYPERPOD_FRESH_MACHINE") != "1":
        pytest.skip("a fresh machine's first install: scripts/test.sh --fresh runs it")
    system_python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not system_python.exists():
        pytest.skip("needs root (to make an unprivileged user) and /usr/bin/python3")
    user = "hyperpod-demo"
    if subprocess.run(["id", user], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--create-home", user], check=True)
    # Not under pytest's tmp_path: its parents are private to root.
    top = Path(tempfile.mkdtemp(prefix="hyperpod-demo-"))
    top.chmod(0o755)
    checkout, demo, home = top / "checkout", top / "demo", top / "home"
    _checkout_copy(checkout)
    for path in (demo, home):
        path.mkdir()
    subprocess.run(["chown", "-R", user, str(checkout), str(demo), str(home)], check=True)
    port = 18000 + os.getpid() % 1000
    token = "demo-test-token"
    # PATH without /usr/sbin: apt-get would fail; the script must not need it.
    env = {
        **_network_settings(),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "PYTHON": str(system_python),
        "HYPERPOD_DEMO_DIR": str(demo),
    }
    argv = [
        "setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--",
        "bash", str(checkout / "scripts" / "demo.sh"), "--no-browser", f"--port={port}",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
    ]  # fmt: skip
    server = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=home
    )
    try:
        deadline = time.monotonic() + 1500
        while True:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/hyperpod/api/files?path={QLORA_PROJECT}",
                headers={"Authorization": f"token {token}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    listing = response.read().decode()
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"demo.sh exited {server.returncode}:\n{server.stdout.read()}")  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the demo did not answer in 25 minutes"
                time.sleep(1)
        assert "args-fine-tuning.yaml" in listing
        uid = int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
        assert (demo / "shared" / QLORA_PROJECT).stat().st_uid == uid
        assert (checkout / ".venv" / "bin" / "python").exists()
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
        shutil.rmtree(top, ignore_errors=True)
    # Progress was shown while installing, and nothing asked for root.
    assert "==> pip install -e .[demo]" in output and "Collecting" in output, output
    # torch's build was chosen and said why (scripts/torch_build.py: the CPU build here).
    assert "==> torch: " in output and "the CPU build" in output, output
    assert "apt-get" not in output and "Permission denied" not in output, output
