"""Chains from the CLI, the magics and the Python client against a real Jupyter server (#24 item
4): `submit --after`, `chain JOB`, `chain --submit FILE`, `resume JOB --with-changes` build the
same jobs as REST; `wait` on a link the failed one cancelled exits 1 with the reason."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from ..helpers import Api
from .conftest import REPO
from .test_cli import run_async

MAGIC = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from jupyter_hyperpod.client import HyperPodClient
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_hyperpod")
    first, url, token = sys.argv[1:]
    connect = f"--url {url} --token {token}"
    job = ip.run_line_magic(
        "hyperpod", f"submit {connect} --after {first} --after-any --name magic chain/ok.py"
    )
    print("AFTER", json.dumps([job.spec.after, job.spec.after_any]))
    table = ip.run_line_magic("hyperpod", f"chain {job.id} {connect}")
    print("CHAIN", json.dumps([link["id"] for link in table.to_json()["links"]]))
    client = HyperPodClient(url, token)
    print("CLIENT", json.dumps([link.id for link in client.chain(job.id).links]))
    print("WAITED", client.wait(job.id, timeout=60).state.value)
    """
)


async def test_a_chain_from_the_cli_the_magics_and_the_client(
    jp_serverapp: Any, api: Api, partition: Path, tmp_path: Path
) -> None:
    project = partition / "chain"
    project.mkdir()
    (project / "ok.py").write_text("print('ok')\n")
    (project / "bad.py").write_text("raise SystemExit(4)\n")
    (project / "wait.py").write_text(
        "import pathlib, time\nwhile not pathlib.Path('go').exists():\n    time.sleep(0.05)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_RUNTIME_DIR": str(partition)}
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]
    token = jp_serverapp.identity_provider.token
    url = ["--url", jp_serverapp.connection_url, "--token", token]

    async def cli(*argv: str) -> tuple[int, str, str]:
        return await run_async(env, *base, *url, *argv)

    # prep runs until the chain is built (else train could fail before evaluate is submitted)
    code, out, err = await cli("submit", "--json", "--name", "prep", "chain/wait.py")
    assert code == 0, err
    prep = json.loads(out)["id"]
    code, out, err = await cli(
        "submit", "--json", "--name", "train", "--after", prep, "chain/bad.py"
    )
    assert code == 0, err
    train = json.loads(out)
    assert train["spec"]["after"] == [prep]
    code, out, err = await cli(
        "submit", "--json", "--name", "evaluate", "--after", f"{train['id']},{prep}", "chain/ok.py"
    )
    assert code == 0, err
    evaluate = json.loads(out)
    assert evaluate["spec"]["after"] == [train["id"], prep]
    (project / "go").write_text("")

    code, _, err = await cli("wait", evaluate["id"], "--timeout", "60")
    assert code == 1, err  # cancelled: train failed
    code, out, err = await cli("chain", evaluate["id"])
    assert code == 0, err
    lines = out.splitlines()
    row = next(line for line in lines if line.startswith(evaluate["id"]))
    assert "CANCELLED" in row and "train failed" in out
    assert f"`resume {train['id']}`" in out
    code, out, err = await cli("chain", evaluate["id"], "--json")
    assert code == 0, err
    chain = json.loads(out)
    assert [link["state"] for link in chain["links"]] == ["SUCCEEDED", "FAILED", "CANCELLED"]

    (project / "bad.py").write_text("print('fixed')\n")
    code, out, err = await cli("resume", train["id"], "--with-changes", "--json")
    assert code == 0, err
    new_train, new_evaluate = json.loads(out)["jobs"]
    assert new_evaluate["spec"]["after"] == [new_train["id"], prep]
    code, _, err = await cli("wait", new_evaluate["id"], "--timeout", "60")
    assert code == 0, err

    # A chain file: the same links in one request.
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "links": [
                    {"key": "a", "job": {"name": "a", "command": ["ok.py"], "workdir": "chain"}},
                    {
                        "key": "b",
                        "job": {"name": "b", "command": ["ok.py", "{{a.id}}"], "workdir": "chain"},
                        "after": ["a"],
                    },
                ]
            }
        )
    )
    code, out, err = await cli("chain", "--submit", str(path), "--json")
    assert code == 0, err
    a, b = json.loads(out)["jobs"]
    assert b["spec"]["after"] == [a["id"]] and b["spec"]["command"][-1] == a["id"]
    path.write_text(
        yaml.safe_dump(
            {
                "links": [
                    {"key": "a", "job": {"name": "a", "command": ["ok.py"]}, "after": ["b"]},
                    {"key": "b", "job": {"name": "b", "command": ["ok.py"]}, "after": ["a"]},
                ]
            }
        )
    )
    code, _, err = await cli("chain", "--submit", str(path))
    assert code == 2 and "the chain has a cycle: a -> b -> a" in err, err

    code, out, err = await run_async(
        env, sys.executable, "-c", MAGIC, prep, jp_serverapp.connection_url, token
    )
    assert code == 0, err
    assert json.loads(out.split("AFTER ", 1)[1].splitlines()[0]) == [[prep], True]
    magic_chain = json.loads(out.split("CHAIN ", 1)[1].splitlines()[0])
    assert magic_chain[0] == prep and len(magic_chain) >= 5
    assert json.loads(out.split("CLIENT ", 1)[1].splitlines()[0]) == magic_chain
    assert "WAITED SUCCEEDED" in out
