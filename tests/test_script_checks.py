"""The Script field takes what a rank can start: a file, executable unless its extension names
the interpreter (.py: the job's Python, .sh: bash, said in the preview's command).

Before this check a directory or a plain text file was accepted and every rank then failed with
"Permission denied"; now the preview and the submit refuse it beside the field, and nothing is
created. The CLI and the magics submit the same template, so they get the same message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_hyperpod.core.launch import program_argv, torchrun_argv

from .helpers import Api
from .test_contract import check


def body(script: str) -> dict:
    return {"name": "s", "template": "script", "params": {"script": script}}


NOT_EXECUTABLE = (
    "'tool' is not executable: make it so (chmod +x tool), "
    "or name it .py to run it with the job's Python or .sh to run it with bash"
)


@pytest.mark.parametrize(
    ("make", "script", "message"),
    [
        (lambda p: (p / "project").mkdir(), "project", "'project' is a directory"),
        (lambda p: (p / "tool").write_text("echo hi\n"), "tool", NOT_EXECUTABLE),
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
    assert not (partition / ".hyperpod" / "jobs").exists() or not any(
        (partition / ".hyperpod" / "jobs").iterdir()
    )


async def test_the_preview_says_the_interpreter_of_a_script(api: Api, partition: Path) -> None:
    (partition / "run.sh").write_text("echo from-sh\n")  # not executable: bash runs it
    (partition / "plain.py").write_text("print('from-py')\n")
    shown = {}
    for script in ("run.sh", "plain.py"):
        reply = await api.call("POST", "jobs/render", body=body(script))
        assert reply.status == 200, reply.body
        shown[script] = reply.body["text"]
    assert "bash ./run.sh" in shown["run.sh"]
    assert "plain.py" in shown["plain.py"] and "bash" not in shown["plain.py"].split("plain.py")[0]


async def test_an_executable_program_and_interpreted_scripts_run(api: Api, partition: Path) -> None:
    program = partition / "tool"
    program.write_text("#!/bin/sh\necho from-tool\n")
    program.chmod(0o755)
    (partition / "run.sh").write_text("echo from-sh\n")  # not executable: runs under bash
    (partition / "plain.py").write_text("print('from-py')\n")  # not executable: runs under Python
    for script in ("tool", "run.sh", "plain.py"):
        job = await api.submit(body(script) | {"name": script.replace(".", "-")})
        done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"})
        assert done["state"] == "SUCCEEDED", done


def test_the_extension_names_the_interpreter_for_every_backend() -> None:
    assert program_argv(["./run.sh", "a"], "/py") == ["bash", "./run.sh", "a"]
    assert program_argv(["train.py"], "/py") == ["/py", "train.py"]
    assert program_argv(["./tool"], "/py") == ["./tool"]
    argv = torchrun_argv(["./run.sh"], nnodes=2, nproc_per_node=1, rdzv_endpoint=None)
    assert argv[-3:] == ["--no-python", "bash", "./run.sh"]
