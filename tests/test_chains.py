"""Chains on the local backend through the real server (#24 items 4 and 5): a 3-link chain whose
middle link fails cancels the last with the reason and resumes from the failed link; a chain
submitted in one request passes one link's output to the next; hostile input (a cycle, another
user's job, an unknown id) is refused and creates nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.models import Job, JobSpec, JobState
from jupyter_hyperpod.core.store import JobStore

from .helpers import Api, log_text


def write_project(partition: Path) -> Path:
    project = partition / "chain"
    project.mkdir()
    (project / "prepare.py").write_text(
        "import pathlib\npathlib.Path('data.txt').write_text('prepared')\nprint('prepared')\n"
    )
    (project / "train.py").write_text(
        "import sys\nprint('train: the data is', open('data.txt').read())\nsys.exit(3)  # the bug\n"
    )
    (project / "evaluate.py").write_text("print('evaluated')\n")
    return project


def jobs_of(partition: Path) -> set[str]:
    jobs = partition / ".hyperpod" / "jobs"
    return {path.name for path in jobs.iterdir()} if jobs.is_dir() else set()


def snapshots_of(partition: Path) -> set[str]:
    snapshots = partition / ".hyperpod" / "snapshots"
    found = {path.name for path in snapshots.iterdir()} if snapshots.is_dir() else set()
    return found - {"objects"}  # the content store the snapshots share


async def test_a_failed_middle_link_cancels_the_rest_and_the_chain_resumes_from_it(
    api: Api, partition: Path
) -> None:
    project = write_project(partition)
    prepare = await api.submit({"name": "prepare", "command": ["prepare.py"], "workdir": "chain"})
    train = await api.submit(
        {"name": "train", "command": ["train.py"], "workdir": "chain", "after": [prepare["id"]]}
    )
    evaluate = await api.submit(
        {"name": "evaluate", "command": ["evaluate.py"], "workdir": "chain", "after": [train["id"]]}
    )
    # Held by the server until the link before it succeeded, with why.
    assert train["state"] == "PENDING" and evaluate["state"] == "PENDING"
    assert evaluate["held"] == f"waiting for {train['id']} (train)"
    assert evaluate["state_reason"] == evaluate["held"]
    assert evaluate["backend_id"] is None

    assert (await api.wait_for(prepare["id"], {"SUCCEEDED", "FAILED"}, 30))["state"] == "SUCCEEDED"
    failed = await api.wait_for(train["id"], {"SUCCEEDED", "FAILED"}, 30)
    assert failed["state"] == "FAILED" and failed["exit_code"] == 3
    # train started only after prepare had written its output
    log = Path(failed["ranks"][0]["log"]).read_text()
    assert "train: the data is prepared" in log
    cancelled = await api.wait_for(evaluate["id"], {"CANCELLED", "SUCCEEDED", "FAILED"}, 30)
    assert cancelled["state"] == "CANCELLED"
    assert cancelled["state_reason"].startswith("train failed: ")
    assert cancelled["state_reason"].endswith(f"({train['id']})")
    assert cancelled["held"] is None and cancelled["backend_id"] is None
    assert evaluate["id"] not in jobs_of(partition)  # never started: no job directory
    # Its log (never written) reads as empty, followed or not, never as a server error.
    reply = await api.get(f"jobs/{evaluate['id']}/logs", rank=0, tail=10)
    assert reply.status == 200 and reply.body["text"] == "", reply.body

    chain = (await api.get(f"jobs/{evaluate['id']}/chain")).body
    assert [link["id"] for link in chain["links"]] == [prepare["id"], train["id"], evaluate["id"]]
    assert [link["state"] for link in chain["links"]] == ["SUCCEEDED", "FAILED", "CANCELLED"]
    assert chain["failed"] == train["id"]
    assert chain["links"][2]["after"] == [train["id"]]

    # Fix the bug; resume from the failed link: a new train and a new evaluate waiting for it.
    (project / "train.py").write_text("print('train: the data is', open('data.txt').read())\n")
    reply = await api.post(f"jobs/{train['id']}/resume", {"with_changes": True})
    assert reply.status == 201, reply.body
    new_train, new_evaluate = reply.body["jobs"]
    assert new_train["name"] == "train" and new_train["spec"]["after"] == [prepare["id"]]
    assert new_evaluate["spec"]["after"] == [new_train["id"]]
    assert (await api.wait_for(new_train["id"], {"SUCCEEDED", "FAILED"}, 30))["state"] == (
        "SUCCEEDED"
    )
    done = await api.wait_for(new_evaluate["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, 30)
    assert done["state"] == "SUCCEEDED", done
    assert Path(done["ranks"][0]["log"]).read_text() == "evaluated\n"

    # A resume of a link that succeeded is refused with why.
    reply = await api.post(f"jobs/{prepare['id']}/resume", {})
    assert reply.status == 400 and "SUCCEEDED" in reply.body["error"]["message"]


async def test_a_chain_in_one_request_passes_one_links_output_to_the_next(
    api: Api, partition: Path
) -> None:
    project = partition / "pipe"
    project.mkdir()
    (project / "make.py").write_text(
        # ${VAR} expanded as the training config is (output_dir: out/${HYPERPOD_JOB_ID})
        "import os, pathlib, sys\nout = pathlib.Path(os.path.expandvars(sys.argv[1]))\n"
        "out.mkdir(parents=True)\n"
        "(out / 'adapter.txt').write_text(os.environ['HYPERPOD_JOB_ID'])\n"
    )
    (project / "use.py").write_text("import sys\nprint('adapter of', open(sys.argv[1]).read())\n")
    reply = await api.post(
        "chains",
        {
            "links": [
                {
                    "key": "use",
                    "job": {
                        "name": "use",
                        "command": ["use.py", "{{make.OUT}}/adapter.txt"],
                        "workdir": "pipe",
                    },
                    "after": ["make"],
                },
                {
                    "key": "make",
                    "job": {
                        "name": "make",
                        "command": ["make.py", "out/${HYPERPOD_JOB_ID}"],
                        "workdir": "pipe",
                        "env": {"OUT": "out/${HYPERPOD_JOB_ID}"},
                    },
                },
            ]
        },
    )
    assert reply.status == 201, reply.body
    make, use = reply.body["jobs"]  # in chain order, whatever the request's
    assert make["name"] == "make" and use["spec"]["after"] == [make["id"]]
    done = await api.wait_for(use["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, 30)
    assert done["state"] == "SUCCEEDED", done
    assert Path(done["ranks"][0]["log"]).read_text() == f"adapter of {make['id']}\n"


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (
            {
                "links": [
                    {"key": "a", "job": {"name": "a", "command": ["x.py"]}, "after": ["c"]},
                    {"key": "b", "job": {"name": "b", "command": ["x.py"]}, "after": ["a"]},
                    {"key": "c", "job": {"name": "c", "command": ["x.py"]}, "after": ["b"]},
                ]
            },
            400,
            "the chain has a cycle: a -> c -> b -> a",
        ),
        (
            {"links": [{"key": "a", "job": {"name": "a", "command": ["x.py"]}, "after": ["a"]}]},
            400,
            "cycle: a -> a",
        ),
        (
            {
                "links": [
                    {"key": "a", "job": {"name": "a", "command": ["x.py"]}},
                    {"key": "b", "job": {"name": "b", "command": ["x.py", "{{c.id}}"]}},
                ]
            },
            400,
            "does not wait for 'c'",
        ),
        (
            {"links": [{"job": {"name": "a", "command": ["x.py"]}, "after": ["bobs-1a2b3c"]}]},
            403,
            "is not yours",
        ),
        (
            {"links": [{"job": {"name": "a", "command": ["x.py"]}, "after": ["nobody-000000"]}]},
            400,
            "no job 'nobody-000000'",
        ),
    ],
)
async def test_a_hostile_chain_is_refused_and_creates_nothing(
    api: Api, partition: Path, hyperpod_config: dict[str, Any], body: Any, status: int, words: str
) -> None:
    (partition / "x.py").write_text("print(1)\n")
    _someone_elses_job(hyperpod_config)
    reply = await api.post("chains", body)
    assert reply.status == status, reply.body
    assert words in reply.body["error"]["message"]
    assert (await api.get("jobs")).body["total"] == 0
    assert jobs_of(partition) == set() and snapshots_of(partition) == set()


async def test_a_job_after_someone_elses_or_an_unknown_job_is_refused_and_creates_nothing(
    api: Api, partition: Path, hyperpod_config: dict[str, Any]
) -> None:
    (partition / "x.py").write_text("print(1)\n")
    _someone_elses_job(hyperpod_config)
    spec = {"name": "mine", "command": ["x.py"]}
    reply = await api.post("jobs", {**spec, "after": ["bobs-1a2b3c"]})
    assert reply.status == 403, reply.body
    assert reply.body["error"]["field"] == "after"
    assert "not yours" in reply.body["error"]["message"]
    reply = await api.post("jobs", {**spec, "after": ["ghost-abcdef"]})
    assert reply.status == 400 and reply.body["error"]["field"] == "after"
    reply = await api.post("jobs", {**spec, "after": ["Not An Id"]})
    assert reply.status == 400 and reply.body["error"]["field"] == "after"
    # What already failed cannot be waited for with success required.
    (partition / "boom.py").write_text("raise SystemExit(2)\n")
    boom = await api.submit({"name": "boom", "command": ["boom.py"]})
    await api.wait_for(boom["id"], {"FAILED"}, 30)
    reply = await api.post("jobs", {**spec, "after": [boom["id"]]})
    assert reply.status == 400 and "can never succeed" in reply.body["error"]["message"]
    assert (await api.get("jobs")).body["total"] == 1  # boom: nothing of the refused ones
    assert jobs_of(partition) == {boom["id"]}
    assert snapshots_of(partition) == {boom["id"]}
    # with after_any it waits for it to end, whatever its state: it starts at once
    job = await api.submit({**spec, "after": [boom["id"]], "after_any": True})
    assert (await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, 30))["state"] == "SUCCEEDED"


async def test_a_held_jobs_log_is_empty_until_it_starts_then_followed(
    api: Api, partition: Path
) -> None:
    (partition / "wait.py").write_text(
        "import pathlib, time\nwhile not pathlib.Path('go').exists():\n    time.sleep(0.05)\n"
    )
    (partition / "hello.py").write_text("print('hello from the second link')\n")
    first = await api.submit({"name": "first", "command": ["wait.py"]})
    second = await api.submit({"name": "second", "command": ["hello.py"], "after": [first["id"]]})
    reply = await api.get(f"jobs/{second['id']}/logs", rank=0, tail=10)
    assert reply.status == 200 and reply.body["text"] == ""
    # Followed while it is held: the stream waits, then reads the log once it started.
    follow = asyncio.create_task(api.follow(second["id"], rank="0"))
    await asyncio.sleep(1.0)
    assert (await api.get(f"jobs/{second['id']}")).body["held"] is not None
    (partition / "go").write_text("")
    frames, _ = await follow
    assert "hello from the second link" in log_text(frames, 0), frames
    assert frames[0]["type"] == "status" and frames[0]["state"] == "PENDING"
    assert frames[-1]["type"] == "end" and frames[-1]["state"] == "SUCCEEDED"


async def test_a_held_job_cancelled_by_the_user_never_starts(api: Api, partition: Path) -> None:
    (partition / "wait.py").write_text(
        "import pathlib, time\nwhile not pathlib.Path('go').exists():\n    time.sleep(0.05)\n"
    )
    (partition / "x.py").write_text("print(1)\n")
    first = await api.submit({"name": "first", "command": ["wait.py"]})
    second = await api.submit({"name": "second", "command": ["x.py"], "after": [first["id"]]})
    reply = await api.delete(f"jobs/{second['id']}")
    assert reply.status == 200 and reply.body["state"] == "CANCELLED", reply.body
    (partition / "go").write_text("")
    await api.wait_for(first["id"], {"SUCCEEDED"}, 30)
    time.sleep(0.5)
    again = (await api.get(f"jobs/{second['id']}")).body
    assert again["state"] == "CANCELLED" and again["backend_id"] is None
    assert second["id"] not in jobs_of(partition)


def _someone_elses_job(config: dict[str, Any]) -> None:
    store = JobStore(config["job_store"])
    try:
        store.insert(
            Job(
                id="bobs-1a2b3c",
                name="bobs",
                user="bob",
                orchestrator="local",
                state=JobState.RUNNING,
                created=time.time(),
                spec=JobSpec(name="bobs", command=["x.py"]),
            ),
            "local",
            {},
        )
    finally:
        store.close()
