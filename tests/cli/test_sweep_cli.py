"""Sweeps from the CLI, the magics and the Python client against a real Jupyter server (#24 item
3): `submit SCRIPT --sweep args=... --sweep ... --max-concurrent 1 --wait` makes the grid as
`POST sweeps` does and waits for it, `sweeps` lists the group row, `sweep ID` shows the members,
`sweep ID --cancel` cancels them; a bad --sweep is a usage error and creates nothing."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

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
    url, token = sys.argv[1:]
    connect = f"--url {url} --token {token}"
    table = ip.run_line_magic(
        "hyperpod",
        f"submit {connect} --name slow --sweep args=60,61,62 --max-concurrent 1 sweep/sleep.py",
    )
    found = table.to_json()
    print("MAGIC", json.dumps([job["name"] for job in found["jobs"]]))
    sweep_id = found["summary"]["id"]
    client = HyperPodClient(url, token)
    print("LISTED", json.dumps([row.id for row in client.sweeps().sweeps]))
    print("HELD", json.dumps([job.held is not None for job in client.sweep(sweep_id).jobs]))
    cancelled = ip.run_line_magic("hyperpod", f"sweep {connect} {sweep_id} --cancel")
    print("CANCELLED", json.dumps(cancelled.to_json()["summary"]["counts"]))
    """
)


async def test_a_sweep_from_the_cli_the_magics_and_the_client(
    jp_serverapp: Any, api: Api, partition: Path
) -> None:
    project = partition / "sweep"
    project.mkdir()
    (project / "sleep.py").write_text(
        "import sys, time\ntime.sleep(float(sys.argv[1]) / 100)\nprint('slept', sys.argv[1])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_RUNTIME_DIR": str(partition)}
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]
    token = jp_serverapp.identity_provider.token
    url = ["--url", jp_serverapp.connection_url, "--token", token]

    async def cli(*argv: str) -> tuple[int, str, str]:
        return await run_async(env, *base, *url, *argv)

    code, out, err = await cli(
        "submit",
        "--json",
        "--name",
        "grid",
        "--sweep",
        "args=1,2",
        "--sweep",
        "nodes=1",
        "--max-concurrent",
        "1",
        "--wait",
        "--timeout",
        "60",
        "sweep/sleep.py",
    )
    assert code == 0, err
    done = json.loads(out)
    assert [job["name"] for job in done["jobs"]] == ["grid-1-n1", "grid-2-n1"]
    assert done["summary"]["state"] == "SUCCEEDED" and done["summary"]["max_concurrent"] == 1
    assert "Submitted sweep grid-" in err and "2 jobs, at most 1 at once" in err
    sweep_id = done["summary"]["id"]

    code, out, err = await cli("sweeps")
    assert code == 0, err
    assert sweep_id in out and "SUCCEEDED" in out and "100%" in out and "2 succeeded" in out
    code, out, err = await cli("sweep", sweep_id)
    assert code == 0, err
    assert "args=1, nodes=1" in out and f"compare {done['jobs'][0]['id']}" in out

    code, _, err = await cli("submit", "--sweep", "args", "sweep/sleep.py")
    assert code == 2 and "--sweep takes PARAM=A,B[,C]" in err
    code, _, err = await cli("submit", "--sweep", "lr=1,2", "sweep/sleep.py")
    assert code != 0 and "unknown parameter 'lr'" in err
    assert (await api.get("jobs")).body["total"] == 2

    code, out, err = await run_async(
        env, sys.executable, "-c", MAGIC, jp_serverapp.connection_url, token
    )
    assert code == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert json.loads(lines["MAGIC"]) == ["slow-60", "slow-61", "slow-62"]
    assert len(json.loads(lines["LISTED"])) == 2
    assert json.loads(lines["HELD"]) == [False, True, True]
    assert json.loads(lines["CANCELLED"])["CANCELLED"] == 3
