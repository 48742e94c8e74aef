"""The real package: `python -m build` makes an sdist and a wheel with the production labextension,
and the wheel, installed (not editable) into a clean virtual environment, runs in `jupyter lab`.

This is what a Studio user gets from `pip install jupyter-hyperpod`: the server extension enabled
by the wheel's own config file, the labextension listed and served, the API answering.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from .helpers import copy_checkout

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # `jupyter ... list` colours its words even in a pipe


def _source_copy(target: Path) -> Path:
    """The checkout's files, with the frontend's packages the setup installed (`jlpm install`
    then only checks them)."""
    copy_checkout(target)
    (target / "node_modules").symlink_to(ROOT / "node_modules")
    return target


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(argv: list[str], **kwargs: object) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, (
        f"{argv} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return ANSI.sub("", str(result.stdout + result.stderr))


def _get(url: str, token: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status), bytes(response.read())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("package")
    source = _source_copy(work / "src")
    dist = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], timeout=900)
    sdists = list(dist.glob("jupyter_hyperpod-*.tar.gz"))
    wheels = list(dist.glob("jupyter_hyperpod-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    return wheels[0]


def test_wheel_has_the_prebuilt_labextension_and_the_server_config(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    data = next(n for n in names if ".data/data/" in n).split("/data/")[0] + "/data/"
    labext = data + "share/jupyter/labextensions/jupyter-hyperpod/"
    assert labext + "package.json" in names
    assert labext + "install.json" in names
    assert any(n.startswith(labext + "static/remoteEntry.") for n in names)
    assert data + "etc/jupyter/jupyter_server_config.d/jupyter_hyperpod.json" in names
    # The agent skill file (`jupyter hyperpod mcp --skill` reads it from the package).
    assert "jupyter_hyperpod/agent/skills/hyperpod-jobs/SKILL.md" in names
    package = json.loads(zipfile.ZipFile(wheel).read(labext + "package.json"))
    assert package["name"] == "jupyter-hyperpod"
    # A production build: no development source maps shipped.
    assert not any(n.endswith(".js.map") for n in names if n.startswith(labext))
    # It asks JupyterLab for the support floor (package.json), not the building JupyterLab's
    # versions: the compatibility check reads `dependencies`, and the shared-singleton consumes
    # of the code (webpack's `[1, major, minor, patch]` is `^major.minor.patch`) are what the page
    # warns about when JupyterLab's own are older.
    source = json.loads((ROOT / "package.json").read_text())["dependencies"]
    core = {k: v for k, v in source.items() if k.startswith("@jupyterlab/")}
    assert {k: package["dependencies"][k] for k in core} == core
    assert core["@jupyterlab/application"] == "^4.0.0"
    code = re.sub(
        r"\s",
        "",
        "".join(
            zipfile.ZipFile(wheel).read(n).decode()
            for n in names
            if n.startswith(labext + "static/") and n.endswith(".js")
        ),
    )
    for name, spec in core.items():
        version = spec.removeprefix("^").replace(".", ",")
        consume = re.escape(f'"{name}",') + r"(?:false|!1)," + re.escape(f"[1,{version}]")
        assert re.search(consume, code), f"{name}: the built extension does not ask for {spec}"


# The JupyterLab a Studio space already has, oldest and newest (README "Install": the support
# range). The floor is SageMaker Distribution 1.0's pair (aws/sagemaker-distribution
# build_artifacts/v1/v1.0/v1.0.0/cpu.env.out: jupyterlab-4.0.7, jupyter_server-2.8.0), the oldest
# image with JupyterLab 4 and the oldest jupyter_server of any JupyterLab 4 image.
STUDIO_JUPYTERLABS = {
    "floor": ["jupyterlab==4.0.7", "jupyter_server==2.8.0"],
    "newest": ["jupyterlab>=4.6,<5"],
}
KEPT = ("jupyterlab", "jupyter_server", "tornado", "traitlets")


def _installed(python: str, names: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    return dict(json.loads(_run([python, "-c", code, *names]).strip().splitlines()[-1]))


@pytest.mark.parametrize("jupyterlab", sorted(STUDIO_JUPYTERLABS))
def test_the_wheel_installed_in_a_clean_venv_runs_in_jupyterlab(
    wheel: Path, tmp_path: Path, jupyterlab: str
) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # What Studio already has; then the wheel, which must bring the rest and leave that alone.
    _run([*pip, *STUDIO_JUPYTERLABS[jupyterlab]], timeout=900)
    before = _installed(python, KEPT)
    _run([*pip, str(wheel)], timeout=900)
    assert _installed(python, KEPT) == before, "pip changed the JupyterLab the space had"
    home = tmp_path / "home"
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "HYPERPOD_FS_ROOT": str(tmp_path / "fsx"),
    }
    where = _run(
        [python, "-c", "import jupyter_hyperpod; print(jupyter_hyperpod.__file__)"],
        env=env,
        cwd=tmp_path,
    )
    assert where.strip().startswith(str(venv)), f"imported from {where!r}, not the installed wheel"
    servers = _run(
        [str(venv / "bin" / "jupyter"), "server", "extension", "list"], env=env, cwd=tmp_path
    )
    assert "jupyter_hyperpod enabled" in " ".join(servers.split()), servers
    labexts = _run([str(venv / "bin" / "jupyter"), "labextension", "list"], env=env, cwd=tmp_path)
    line = next(line for line in labexts.splitlines() if "jupyter-hyperpod" in line)
    assert "enabled" in line and "OK" in line, labexts

    port, token = _free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [
            str(venv / "bin" / "jupyter"),
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp_path}",
            "--allow-root",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                status, body = _get(f"{base}/hyperpod/api/cluster", token)
                break
            except OSError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "jupyter lab did not answer in 90 s"
                time.sleep(0.5)
        assert status == 200
        cluster = json.loads(body)
        assert cluster["orchestrator"] in {"local", "slurm"}  # auto: slurm only where sinfo answers
        # The labextension is served: JupyterLab's page lists it and its entry point loads.
        status, page = _get(f"{base}/lab", token)
        config = page.decode()
        assert status == 200 and '"name": "jupyter-hyperpod"' in config.replace('":"', '": "')
        entry = json.loads(
            (venv / "share/jupyter/labextensions/jupyter-hyperpod/package.json").read_text()
        )["jupyterlab"]["_build"]["load"]
        status, script = _get(f"{base}/lab/extensions/jupyter-hyperpod/{entry}", token)
        assert status == 200 and b"jupyter-hyperpod" in script
        # The log WebSocket authenticates on every jupyter_server (before 2.13: server_compat.py).
        stream = f"{base}/hyperpod/api/jobs/none/logs/stream"
        upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
        upgrade["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(stream, headers=upgrade), timeout=10)
        assert refused.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as plain:
            _get(stream, token)
        assert plain.value.code == 400 and b"Upgrade: websocket" in plain.value.read()
    finally:
        server.terminate()
        server.wait(timeout=30)
