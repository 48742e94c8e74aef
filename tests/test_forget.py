"""Remove a job from the history: cancelled first if it runs, its files kept or deleted as asked;
the answers follow the OpenAPI document."""

from __future__ import annotations

from pathlib import Path

from .helpers import Api
from .test_contract import check

SLEEP = "import time\nprint('working', flush=True)\ntime.sleep(60)\n"
QUICK = "print('done', flush=True)\n"


async def submit(api: Api, partition: Path, name: str, body: str) -> dict:
    (partition / f"{name}.py").write_text(body)
    return await api.submit(
        {"name": name, "template": "script", "params": {"script": f"{name}.py"}}
    )


async def test_forget_a_running_job_keeping_its_files(api: Api, partition: Path) -> None:
    job = await submit(api, partition, "sleeper", SLEEP)
    await api.wait_for(job["id"], {"RUNNING"})
    reply = await api.call("DELETE", f"jobs/{job['id']}", forget="true")
    assert reply.status == 200, reply.body
    check("/jobs/{job_id}", "DELETE", 200, reply.body)
    assert reply.body == {
        "id": job["id"],
        "cancelled": True,
        "files_deleted": False,
        "job_dir": f".hyperpod/jobs/{job['id']}",
    }
    assert (partition / ".hyperpod" / "jobs" / job["id"]).is_dir()
    assert (await api.get(f"jobs/{job['id']}")).status == 404
    listed = await api.get("jobs")
    assert job["id"] not in [j["id"] for j in listed.body["jobs"]]


async def test_forget_a_finished_job_and_delete_its_files(api: Api, partition: Path) -> None:
    job = await submit(api, partition, "quick", QUICK)
    await api.wait_for(job["id"], {"SUCCEEDED"})
    job_dir = partition / ".hyperpod" / "jobs" / job["id"]
    assert job_dir.is_dir()
    reply = await api.call("DELETE", f"jobs/{job['id']}", forget="true", delete_files="true")
    assert reply.status == 200, reply.body
    assert reply.body["files_deleted"] is True and reply.body["cancelled"] is False
    assert not job_dir.exists() and (partition / "quick.py").is_file()
    again = await api.call("DELETE", f"jobs/{job['id']}", forget="true")
    assert again.status == 404 and again.body["error"]["field"] == "id"


async def test_bad_flags_name_the_field(api: Api, partition: Path) -> None:
    job = await submit(api, partition, "flags", QUICK)
    reply = await api.call("DELETE", f"jobs/{job['id']}", forget="maybe")
    assert reply.status == 400 and reply.body["error"]["field"] == "forget"
    check("/jobs/{job_id}", "DELETE", 400, reply.body)
    reply = await api.call("DELETE", f"jobs/{job['id']}", delete_files="true")
    assert reply.status == 400 and reply.body["error"]["field"] == "delete_files"
    assert (await api.get(f"jobs/{job['id']}")).status == 200
