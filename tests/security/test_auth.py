"""Authentication on every route, the partition boundary, no shell, and 400s that name the field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from tornado.websocket import websocket_connect

from jupyter_hyperpod.app import AGENT_ROUTES, ROUTES

from ..helpers import Api, log_text

SAMPLE_ID = "some-job-abc123"


def _concrete(pattern: str) -> str:
    """Each id of the route (job_id, other_id) as SAMPLE_ID."""
    return re.sub(r"\(\?P<\w+>[^)]*\)", SAMPLE_ID, pattern)


@pytest.mark.parametrize(
    ("pattern", "method"),
    [
        (pattern, method)
        for pattern, handler in ROUTES + AGENT_ROUTES
        for method in ("GET", "POST", "DELETE")
        if method.lower() in handler.__dict__ and not pattern.endswith("stream")
    ],
)
async def test_every_rest_route_refuses_unauthenticated(
    http_server_client: Any, jp_base_url: str, pattern: str, method: str
) -> None:
    body = b"{}" if method == "POST" else None
    response = await http_server_client.fetch(
        f"{jp_base_url}{_concrete(pattern)}", method=method, body=body, raise_error=False
    )
    assert response.code == 403
    assert json.loads(response.body)["error"]["code"] == "forbidden"


async def test_a_wrong_token_is_refused(http_server_client: Any, jp_base_url: str) -> None:
    response = await http_server_client.fetch(
        f"{jp_base_url}hyperpod/api/cluster",
        headers={"Authorization": "token nope"},
        raise_error=False,
    )
    assert response.code == 403


async def test_the_log_stream_refuses_unauthenticated(
    http_server_client: Any, jp_base_url: str
) -> None:
    port = http_server_client.get_http_port()
    url = f"ws://127.0.0.1:{port}{jp_base_url}hyperpod/api/jobs/{SAMPLE_ID}/logs/stream"
    with pytest.raises(HTTPClientError) as caught:
        await websocket_connect(url)
    assert caught.value.code == 403


@pytest.fixture
def outside(tmp_path: Path, partition: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.pem").write_text("private")
    (partition / "escape").symlink_to(secret)
    (partition / "data").mkdir()
    (partition / "data" / "ok.txt").write_text("fine")
    return secret


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("..", 403),
        ("../..", 403),
        ("data/../..", 403),
        ("/etc", 403),
        ("escape", 403),
        ("escape/", 403),
        ("data/../escape", 403),
        ("%2e%2e", 404),  # already decoded: a literal name '%2e%2e', which does not exist
        ("..%2f..", 404),  # the same: a literal name
    ],
)
async def test_no_path_leaves_the_partition(
    api: Api, outside: Path, path: str, status: int
) -> None:
    reply = await api.get("files", path=path)
    assert reply.status == status, reply.body
    assert reply.body["error"]["field"] == "path"
    assert "key.pem" not in json.dumps(reply.body)


async def test_percent_encoded_dots_in_the_url_are_caught(
    http_server_client: Any, jp_base_url: str, jp_auth_header: dict, outside: Path
) -> None:
    for query in ("%2E%2E%2Fsecret", "%2e%2e", "data%2F%2E%2E%2F%2E%2E", "%2Fetc"):
        response = await http_server_client.fetch(
            f"{jp_base_url}hyperpod/api/files?path={query}",
            headers=jp_auth_header,
            raise_error=False,
        )
        assert response.code == 403, query


async def test_nul_bytes_never_reach_the_file_system(
    http_server_client: Any, jp_base_url: str, jp_auth_header: dict, outside: Path
) -> None:
    response = await http_server_client.fetch(
        f"{jp_base_url}hyperpod/api/files?path=escape%00", headers=jp_auth_header, raise_error=False
    )
    assert response.code in (400, 403)  # Tornado drops control characters: 'escape' is then refused
    assert b"key.pem" not in response.body


async def test_the_symlink_out_is_listed_but_never_followed(api: Api, outside: Path) -> None:
    reply = await api.get("files")
    entries = {e["name"]: e for e in reply.body["entries"]}
    assert entries["escape"]["type"] == "symlink"
    assert (await api.get("files", path="data")).body["entries"][0]["name"] == "ok.txt"


async def test_arguments_never_pass_through_a_shell(
    api: Api, partition: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    hostile = [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", "a b", "'\""]
    (partition / "echo.py").write_text("import sys\nfor a in sys.argv[1:]: print(repr(a))\n")
    job = await api.submit({"name": "quotes", "command": ["echo.py", *hostile]})
    frames, _ = await api.follow(job["id"])
    assert log_text(frames).splitlines() == [repr(a) for a in hostile]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "x", "command": ["ls"], "nodes": -1}, "nodes", "greater than or equal to 1"),
        (
            {"name": "x", "command": ["ls"], "procs_per_node": 0},
            "procs_per_node",
            "greater than or equal to 1",
        ),
        ({"name": "x", "command": []}, "command", "at least 1"),
        ({"name": "x", "command": [""]}, "command", "needs a program"),
        ({"name": "Bad Name!", "command": ["ls"]}, "name", "a space and '!' are not allowed"),
        ({"name": "x", "command": ["ls"], "workdir": "../.."}, "workdir", "above your partition"),
        ({"name": "x", "command": ["ls"], "workdir": "missing"}, "workdir", "does not exist"),
        ({"name": "x", "command": ["ls"], "nodes": 2}, "nodes", "one node"),
        (
            {"name": "x", "command": ["ls"], "env": {"1BAD": "x"}},
            "env",
            "not a valid environment variable",
        ),
        ({"name": "x", "command": ["ls"], "privileged": True}, "privileged", "unknown field"),
        ({"name": "x", "template": "nope"}, "template", "unknown template"),
        ({"name": "x", "template": "script", "params": {}}, "params.script", "required"),
        (
            {"name": "x", "template": "script", "params": {"script": "a.py", "nodes": "two"}},
            "params.nodes",
            "whole number",
        ),
        (
            {"name": "x", "template": "script", "params": {"script": "nope.py"}},
            "params.script",
            "does not exist",
        ),
        (
            {"name": "x", "template": "script", "params": {"script": "../a.py"}},
            "params.script",
            "above your partition",
        ),
        (
            {"name": "x", "template": "script", "params": {"script": "a.py", "env": "1BAD=x"}},
            "params.env",
            "not a valid environment variable",
        ),
        (
            {"name": "x", "template": "script", "params": {"script": "a.py", "colour": 1}},
            "params.colour",
            "unknown parameter",
        ),
    ],
)
async def test_bad_specs_get_400_naming_the_field(
    api: Api, body: dict, field: str, words: str
) -> None:
    for path in ("jobs", "jobs/render"):
        reply = await api.post(path, body)
        assert reply.status in (400, 403), reply.body
        assert reply.body["error"]["field"] == field
        assert words in reply.body["error"]["message"]


async def test_not_json_and_not_an_object(api: Api) -> None:
    assert (await api.post("jobs", "{nope")).status == 400
    reply = await api.post("jobs", [1, 2])
    assert reply.status == 400 and "JSON object" in reply.body["error"]["message"]


async def test_unknown_job_is_404(api: Api) -> None:
    for call in (
        api.get(f"jobs/{SAMPLE_ID}"),
        api.delete(f"jobs/{SAMPLE_ID}"),
        api.get(f"jobs/{SAMPLE_ID}/logs"),
    ):
        reply = await call
        assert reply.status == 404 and SAMPLE_ID in reply.body["error"]["message"]
    frames, ws = await api.follow(SAMPLE_ID)
    # The error frame carries the whole message (a close reason holds only 123 bytes).
    assert [(f["type"], f["code"], f["close"]) for f in frames] == [("error", "not_found", 4004)]
    assert SAMPLE_ID in frames[0]["message"] and ws.close_code == 4004
