"""The MCP endpoint of a real Jupyter server (`hyperpod/mcp`, streamable HTTP) with the SDK's
client: the tools, render then submit, follow to the end, why, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from .conftest import endpoint, http_session, structured

pytestmark = pytest.mark.timeout(120)
TOOL_NAMES = {
    "cluster", "nodes", "templates", "files", "read_file", "render", "submit", "jobs", "job",
    "logs", "why", "metrics", "queue", "cancel",
}  # fmt: skip


async def _jobs(api: Any) -> list[dict[str, Any]]:
    return (await api.get("jobs")).body["jobs"]  # type: ignore[no-any-return]


async def test_render_submit_follow_and_why_over_http(
    jp_serverapp: Any, api: Any, scripts: Path, partition: Path
) -> None:
    async with http_session(jp_serverapp, "?actions=on") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOL_NAMES
        assert tools["submit"].input_schema["properties"]["spec"]["oneOf"]
        assert tools["cancel"].annotations.destructive_hint
        assert structured(await client.call_tool("cluster", {}))["agent_actions"] is True

        listing = structured(await client.call_tool("files", {"path": "project"}))
        assert {e["name"] for e in listing["entries"]} == {"steps.py", "fails.py"}
        read = structured(await client.call_tool("read_file", {"path": "project/steps.py"}))
        assert "step {step}/5" in read["text"]

        spec = {"name": "agent-steps", "command": ["project/steps.py"]}
        preview = structured(await client.call_tool("render", {"spec": spec}))
        assert "project/steps.py" in preview["text"] and preview["preview_token"]
        job = structured(
            await client.call_tool(
                "submit", {"spec": spec, "preview_token": preview["preview_token"]}
            )
        )
        assert job["name"] == "agent-steps"
        assert any("by an agent via MCP" in event for event in job["events"])

        text, offset, ended = "", None, False
        for _ in range(20):  # bounded follows, each continuing from the last offset
            arguments: dict[str, Any] = {"job_id": job["id"], "follow_seconds": 5}
            if offset is not None:
                arguments["offset"] = offset
            part = structured(await client.call_tool("logs", arguments))
            text += part["text"]
            offset, ended = part["offset"], part["ended"]
            if ended:
                break
        assert ended and part["state"] == "SUCCEEDED" and part["exit_code"] == 0
        assert [line for line in text.splitlines() if line.startswith("step")] == [
            f"step {n}/5 loss={1.0 / n:.3f}" for n in range(1, 6)
        ]
        assert text.endswith("done\n")
        stored = (await api.get(f"jobs/{job['id']}")).body
        assert any("submitted by an agent via MCP" in event for event in stored["events"])

        failing = {"name": "agent-fails", "command": ["project/fails.py"]}
        token = structured(await client.call_tool("render", {"spec": failing}))["preview_token"]
        failed = structured(
            await client.call_tool("submit", {"spec": failing, "preview_token": token})
        )
        await api.wait_for(failed["id"], {"FAILED"})
        why = structured(await client.call_tool("why", {"job_id": failed["id"]}))
        assert why["state"] == "FAILED" and why["exit_code"] == 3 and why["failed_rank"] == 0
        assert "FileNotFoundError: missing.csv" in why["last_lines"]
        assert "rank 0 failed first" in why["summary"]

        nodes = structured(await client.call_tool("nodes", {}))["nodes"]
        assert len(nodes) == 1  # the local backend: this machine
        assert structured(await client.call_tool("templates", {}))["templates"]
        listed = structured(await client.call_tool("jobs", {"state": "succeeded,failed"}))
        assert {j["id"] for j in listed["jobs"]} == {job["id"], failed["id"]}
        one = structured(await client.call_tool("job", {"job_id": job["id"]}))
        assert one["state"] == "SUCCEEDED" and one["spec"] == preview["spec"]
        metrics = structured(await client.call_tool("metrics", {"job_id": job["id"]}))
        assert metrics["metrics"] == {} and metrics["message"]  # the script logs no MLflow run

        spec_resource = await client.read_resource(f"hyperpod://jobs/{job['id']}/spec")
        assert json.loads(spec_resource.contents[0].text)["command"] == ["project/steps.py"]
        log_resource = await client.read_resource(f"hyperpod://jobs/{failed['id']}/log")
        assert "loading data" in log_resource.contents[0].text


async def test_refusals_say_why_and_create_nothing(
    jp_serverapp: Any, api: Any, scripts: Path, fs_root: Path
) -> None:
    (fs_root / "secret.txt").write_text("not yours")
    spec = {"name": "agent-refused", "command": ["project/steps.py"]}
    async with http_session(jp_serverapp, "?actions=on") as client:
        missing = await client.call_tool("submit", {"spec": spec})
        assert missing.is_error and "needs the preview_token that render returns" in (
            missing.content[0].text
        )
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        changed = {**spec, "env": {"LR": "1"}}
        wrong = await client.call_tool("submit", {"spec": changed, "preview_token": token})
        assert wrong.is_error and "not the one render returned for this spec" in (
            wrong.content[0].text
        )
        forged = await client.call_tool("submit", {"spec": spec, "preview_token": "0" * 64})
        assert forged.is_error

        for path in ("../secret.txt", "/etc/passwd"):
            outside = await client.call_tool("read_file", {"path": path})
            assert outside.is_error
            assert structured(outside)["error"]["code"] == "path_not_allowed"
            assert "partition" in outside.content[0].text
        (scripts / "escape").symlink_to(fs_root / "secret.txt")
        linked = await client.call_tool("read_file", {"path": "project/escape"})
        assert structured(linked)["error"]["code"] == "path_not_allowed"
        escaping = await client.call_tool(
            "render", {"spec": {"name": "x", "command": ["../secret.txt"], "workdir": ".."}}
        )
        assert escaping.is_error

        unknown = await client.call_tool("cancel", {"job_id": "nope-abc123", "name": "nope"})
        assert structured(unknown)["error"]["code"] == "not_found"
        bad = await client.call_tool("logs", {"job_id": "x", "tail": -1})
        assert bad.is_error and structured(bad)["error"]["field"] == "tail"
    assert await _jobs(api) == []

    async with http_session(jp_serverapp) as client:  # no ?actions=on: read only
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        refused = await client.call_tool("submit", {"spec": spec, "preview_token": token})
        assert refused.is_error and "actions are off" in refused.content[0].text
        assert "?actions=on" in refused.content[0].text
        assert structured(await client.call_tool("cluster", {}))["agent_actions"] is False
    assert await _jobs(api) == []


async def test_cancel_confirms_the_name_and_is_recorded(
    jp_serverapp: Any, api: Any, scripts: Path
) -> None:
    (scripts / "sleeps.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    spec = {"name": "agent-sleeps", "command": ["project/sleeps.py"]}
    async with http_session(jp_serverapp, "?actions=on") as client:
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        job = structured(await client.call_tool("submit", {"spec": spec, "preview_token": token}))
        await api.wait_for(job["id"], {"RUNNING"})
        wrong = await client.call_tool("cancel", {"job_id": job["id"], "name": "other"})
        assert wrong.is_error and "is named 'agent-sleeps', not 'other'" in wrong.content[0].text
        assert (await api.get(f"jobs/{job['id']}")).body["state"] == "RUNNING"
        done = structured(
            await client.call_tool("cancel", {"job_id": job["id"], "name": "agent-sleeps"})
        )
        assert done["job"]["state"] == "CANCELLED"
    stored = (await api.get(f"jobs/{job['id']}")).body
    assert stored["state"] == "CANCELLED"
    assert "cancel requested by an agent via MCP" in stored["events"]


async def test_the_endpoint_refuses_without_the_token(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    with pytest.raises((MCPError, Exception)):
        async with http_session(jp_serverapp, token="wrong") as client:
            await client.list_tools()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    for headers in ({}, {"Authorization": "token wrong"}):
        response = await http_server_client.fetch(
            f"{jp_base_url}hyperpod/mcp", method="POST", body=body, headers=headers,
            raise_error=False,
        )  # fmt: skip
        assert response.code == 403
    assert endpoint(jp_serverapp).endswith("/hyperpod/mcp")


async def test_why_explains_a_pending_job(jp_serverapp: Any, api: Any, scripts: Path) -> None:
    """local_max_parallel_jobs is 2 here: a third job waits, and why says what holds it."""
    (scripts / "sleeps.py").write_text("import time\ntime.sleep(60)\n")
    async with http_session(jp_serverapp, "?actions=on") as client:
        ids = []
        for n in range(3):
            spec = {"name": f"agent-wait-{n}", "command": ["project/sleeps.py"]}
            token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
            job = structured(
                await client.call_tool("submit", {"spec": spec, "preview_token": token})
            )
            ids.append(job["id"])
        await api.wait_for(ids[0], {"RUNNING"})
        await api.wait_for(ids[1], {"RUNNING"})
        why = structured(await client.call_tool("why", {"job_id": ids[2]}))
        assert why["state"] == "PENDING"
        assert why["summary"].startswith(f"job {ids[2]} is pending: ")
        assert "waiting for a free slot" in why["summary"]  # the local queue's own words
        assert why["queue"]["position"] == 1  # its queue row: first of the pending
        queue = structured(await client.call_tool("queue", {"mine": True}))
        assert {row["job_id"] for row in queue["jobs"]} == set(ids)
        for n, job_id in enumerate(ids):
            await client.call_tool("cancel", {"job_id": job_id, "name": f"agent-wait-{n}"})
