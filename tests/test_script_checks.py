"""The Script field takes what a rank can start: a file, executable unless it is a .py script.

Before this check a directory or a plain text file was accepted and every rank then failed with
"Permission denied"; now the preview and the submit refuse it beside the field, and nothing is
created.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import Api
from .test_contract import check


def body(script: str) -> dict:
    return {"name": "s", "template": "script", "params": {"script": script}}


@pytest.mark.parametrize(
    ("make", "script", "message"),
    [
        (lambda p: (p / "project").mkdir(), "project", "'project' is a directory"),
        (
            lambda p: (p / "run.sh").write_text("echo hi\n"),
            "run.sh",
            "'run.sh' is not executable: make it so (chmod +x run.sh)",
        ),
    ],
)
async def test_a_script_a_rank_cannot_start_is_refused_beside_the_field(
    api: Api, partition: Path, make, script: str, message: str
) -> None:
    make(partition)
    for route in ("jobs/render", "jobs"):
        reply = await api.call("POST", route, body=body(script))
        assert reply.status == 400, reply.body
        check(f"/{route}", "POST", 400, reply.body)
        assert reply.body["error"]["field"] == "params.script"
        assert message in reply.body["error"]["message"]
    assert (await api.get("jobs")).body["total"] == 0


async def test_an_executable_program_and_a_python_script_run(api: Api, partition: Path) -> None:
    program = partition / "run.sh"
    program.write_text("#!/bin/sh\necho from-sh\n")
    program.chmod(0o755)
    (partition / "plain.py").write_text("print('from-py')\n")  # not executable: runs under Python
    for script in ("run.sh", "plain.py"):
        job = await api.submit(body(script) | {"name": script.replace(".", "-")})
        done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"})
        assert done["state"] == "SUCCEEDED", done
