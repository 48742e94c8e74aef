"""`jupyter hyperpod mcp` as an agent starts it: a subprocess speaking MCP on stdio, which
drives the running Jupyter server through the Python client (as every CLI verb does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.cli.conftest import cli

from .conftest import structured

pytestmark = pytest.mark.timeout(120)


def _mcp(serverapp: Any, env: dict[str, str], *extra: str) -> Client:
    url = ["--url", serverapp.connection_url, "--token", serverapp.identity_provider.token]
    command = [sys.executable, "-m", "jupyter_hyperpod.cli", "mcp", *url, *extra]
    return Client(StdioServerParameters(command=command[0], args=command[1:], env=env))


async def test_stdio_render_submit_follow_why(
    jp_serverapp: Any, api: Any, jupyter_env: dict[str, str], scripts: Path
) -> None:
    async with _mcp(jp_serverapp, jupyter_env, "--allow-actions") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"render", "submit", "logs", "why", "cancel"} <= names
        cluster = structured(await client.call_tool("cluster", {}))
        assert cluster["user"] == "alice" and cluster["agent_actions"] is True

        spec = {"name": "stdio-steps", "command": ["project/steps.py"]}
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        job = structured(await client.call_tool("submit", {"spec": spec, "preview_token": token}))
        text, offset = "", None
        for _ in range(20):
            arguments: dict[str, Any] = {"job_id": job["id"], "follow_seconds": 5}
            if offset is not None:
                arguments["offset"] = offset
            part = structured(await client.call_tool("logs", arguments))
            text, offset = text + part["text"], part["offset"]
            if part["ended"]:
                break
        assert part["state"] == "SUCCEEDED" and text.count("\nstep ") == 4 and "done" in text

        failing = {"name": "stdio-fails", "command": ["project/fails.py"]}
        token = structured(await client.call_tool("render", {"spec": failing}))["preview_token"]
        failed = structured(
            await client.call_tool("submit", {"spec": failing, "preview_token": token})
        )
        await api.wait_for(failed["id"], {"FAILED"})
        why = structured(await client.call_tool("why", {"job_id": failed["id"]}))
        assert why["failed_rank"] == 0 and "FileNotFoundError" in why["last_lines"]

        outside = await client.call_tool("read_file", {"path": "../../etc/passwd"})
        assert structured(outside)["error"]["code"] == "path_not_allowed"
    served = {job["id"]: job for job in (await api.get("jobs")).body["jobs"]}  # the server's
    assert set(served) == {job["id"], failed["id"]}
    assert "submitted by an agent via MCP" in served[job["id"]]["events"][0]


async def test_stdio_is_read_only_by_default_and_when_the_admin_says_so(
    jp_serverapp: Any, api: Any, jupyter_env: dict[str, str], scripts: Path, tmp_path: Path
) -> None:
    spec = {"name": "stdio-refused", "command": ["project/steps.py"]}
    async with _mcp(jp_serverapp, jupyter_env) as client:
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        refused = await client.call_tool("submit", {"spec": spec, "preview_token": token})
        assert refused.is_error and "--allow-actions" in refused.content[0].text

    config = tmp_path / "jupyter-config" / "jupyter_server_config.json"
    settings = json.loads(config.read_text())
    settings["HyperPodApp"]["mcp_actions"] = "off"
    config.write_text(json.dumps(settings))
    async with _mcp(jp_serverapp, jupyter_env, "--allow-actions") as client:
        assert structured(await client.call_tool("cluster", {}))["agent_actions"] is False
        token = structured(await client.call_tool("render", {"spec": spec}))["preview_token"]
        refused = await client.call_tool("submit", {"spec": spec, "preview_token": token})
        assert refused.is_error and "administrator turned agent actions off" in (
            refused.content[0].text
        )
    assert (await api.get("jobs")).body["jobs"] == []


def test_the_skill_file_prints_and_has_its_front_matter(jupyter_env: dict[str, str]) -> None:
    done = cli(jupyter_env, "mcp", "--skill")
    assert done.returncode == 0, done.stderr
    front, body = done.stdout.split("---\n", 2)[1:]
    import yaml

    meta = yaml.safe_load(front)
    assert meta["name"] == "hyperpod-jobs" and "Use when" in meta["description"]
    assert len(meta["description"]) <= 1024
    for step in ("Discover", "Render", "Submit", "Follow", "Diagnose", "Compare"):
        assert f". {step}" in body


def test_the_magic_prints_the_skill_but_never_serves_in_a_kernel(shell: Any) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="not in a notebook"):
        shell.run_line_magic("hyperpod", "mcp --allow-actions")
    assert "name: hyperpod-jobs" in str(shell.run_line_magic("hyperpod", "mcp --skill"))


async def test_stdio_with_the_core_in_its_own_process(
    jupyter_env: dict[str, str], scripts: Path
) -> None:
    """--direct: no server; the core runs in the MCP process with the Jupyter config files."""
    command = [sys.executable, "-m", "jupyter_hyperpod.cli", "mcp", "--direct"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=jupyter_env)
    async with Client(params) as client:
        assert structured(await client.call_tool("cluster", {}))["orchestrator"] == "local"
        read = structured(await client.call_tool("read_file", {"path": "project/fails.py"}))
        assert "sys.exit(3)" in read["text"]
        spec = {"name": "direct", "command": ["project/fails.py"]}
        preview = structured(await client.call_tool("render", {"spec": spec}))
        assert "project/fails.py" in preview["text"]
        refused = await client.call_tool(
            "submit", {"spec": spec, "preview_token": preview["preview_token"]}
        )
        assert refused.is_error and "read-only" in refused.content[0].text
