"""`jupyter hyperpod diff A B` / `compare A B C` and `%hyperpod diff` / `%hyperpod compare` against
a real Jupyter server (#24 item 2): the text a person reads, the same result as JSON, and the
exit codes of an unknown id and of a single one."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from ..helpers import Api
from ..test_compare_jobs import three_jobs
from .conftest import REPO
from .test_cli import run_async

MAGIC = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_hyperpod")
    a, b, c, url, token = sys.argv[1:]
    connect = f"--url {url} --token {token}"
    print("DIFF", type(ip.run_line_magic("hyperpod", f"diff {a} {b} {connect}")).__name__)
    print(ip.run_line_magic("hyperpod", f"diff {a} {b} {connect}"))
    table = ip.run_line_magic("hyperpod", f"compare {a} {b} {c} {connect}")
    print("COMPARE", json.dumps(table.to_json()))
    """
)


async def test_diff_and_compare_from_the_cli_and_the_magics(
    jp_serverapp: Any, api: Api, partition: Path
) -> None:
    a, b, c = (job["id"] for job in await three_jobs(api, partition))
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_RUNTIME_DIR": str(partition)}
    base = [sys.executable, "-m", "jupyter_hyperpod.cli"]
    url = ["--url", jp_serverapp.connection_url, "--token", jp_serverapp.identity_provider.token]

    code, out, err = await run_async(env, *base, "diff", a, b, *url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"diff {a} {b}" and "spec: the same" in lines
    assert "config config.yaml (changed):" in lines and "  lr: 0.001 -> 0.002" in lines
    assert "  2 changed, 0 added, 0 removed, 2 the same" in lines
    assert "  changed train.py" in lines
    assert "    -print('v1')" in lines and "    +print('v2')" in lines
    assert "environment: the same packages" in lines

    code, out, err = await run_async(env, *base, "diff", a, b, "--json", *url)
    assert code == 0, err
    diff = json.loads(out)
    assert diff["configs"][0]["values"] == [{"field": "lr", "a": 0.001, "b": 0.002}]
    assert sorted(f["path"] for f in diff["code"]["files"]) == ["config.yaml", "train.py"]

    code, out, err = await run_async(env, *base, "compare", a, b, c, *url)
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:] if line.strip()}
    assert rows["state"] == ["SUCCEEDED"] * 3
    assert rows["config.yaml:lr"] == ["0.001", "0.002", "0.003"]
    assert out.splitlines()[0].split() == [a, b, c]
    code, out, err = await run_async(env, *base, "compare", a, b, c, "--json", *url)
    assert code == 0, err
    assert [job["id"] for job in json.loads(out)["jobs"]] == [a, b, c]

    code, _, err = await run_async(env, *base, "diff", a, "no-such-job-9", *url)
    assert code == 3 and "no-such-job-9" in err
    code, _, err = await run_async(env, *base, "compare", a, *url)
    assert code == 2 and "needs 2 to 10 job ids (got 1)" in err

    token = jp_serverapp.identity_provider.token
    code, out, err = await run_async(
        env, sys.executable, "-c", MAGIC, a, b, c, jp_serverapp.connection_url, token
    )
    assert code == 0, err
    assert "DIFF DiffResult" in out and "  lr: 0.001 -> 0.002" in out
    assert "    +print('v2')" in out
    compared = json.loads(out.split("COMPARE ", 1)[1])
    assert compared["differing"] == ["config.yaml:lr"]
    assert [job["values"]["config.yaml:lr"] for job in compared["jobs"]] == [0.001, 0.002, 0.003]
