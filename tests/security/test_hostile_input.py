"""What an adversarial client sends gets a 4xx with a message naming the field, never a 500.

A real Jupyter server (pytest-jupyter) with the extension on a temp file system, loopback only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from .conftest import add

DEEP = 100_000


def assert_error(reply: Any, status: int | tuple[int, ...], field: str | None = None) -> None:
    statuses = (status,) if isinstance(status, int) else status
    assert reply.status in statuses, (reply.status, reply.body)
    error = reply.body["error"]
    assert set(error) == {"code", "message", "field"} and error["message"], error
    if field is not None:
        assert error["field"] == field, error
    add("hostile requests", "answered 4xx with a message")


async def test_a_name_that_is_not_utf8_is_skipped_with_a_note(api: Api, partition: Path) -> None:
    folder = partition / "bytes"
    folder.mkdir()
    (folder / "good.txt").write_text("fine")
    with open(os.fsencode(folder) + b"/bad-\xff\xfe.txt", "wb") as handle:
        handle.write(b"latin-1 name")
    reply = await api.get("files", path="bytes")
    assert reply.status == 200, reply.body
    assert [e["name"] for e in reply.body["entries"]] == ["good.txt"]
    assert reply.body["skipped"] == 1 and "UTF-8" in reply.body["note"]
    assert (await api.get("files")).status == 200  # the partition root still lists
    for sort in ("-size", "mtime"):
        assert (await api.get("files", path="bytes", sort=sort)).body["total"] == 1


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("a" * 256, "255"),
        ("ok/" + "é" * 128, "255"),  # 256 bytes in UTF-8, 128 characters
        ("d/" * 2100, "too long"),
        ("loop", "symlink loop"),
        ("ping/x", "symlink loop"),
    ],
)
async def test_names_too_long_and_symlink_loops(
    api: Api, partition: Path, path: str, words: str
) -> None:
    (partition / "loop").symlink_to("loop")
    (partition / "ping").symlink_to("pong")
    (partition / "pong").symlink_to("ping")
    (partition / "x.py").write_text("print(1)\n")
    reply = await api.get("files", path=path)
    assert_error(reply, 400, "path")
    assert words in reply.body["error"]["message"]
    for body, field in [
        ({"name": "w", "command": ["x.py"], "workdir": path}, "workdir"),
        ({"name": "t", "template": "script", "params": {"script": f"{path}/x.py"}}, None),
    ]:
        for route in ("jobs", "jobs/render"):
            reply = await api.post(route, body)
            assert_error(reply, 400, field or "params.script")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"name": "s", "command": ["\\ud800"]}', "command.0"),
        ('{"name": "s", "command": ["x.py", "--a", "\\udfff"]}', "command.2"),
        ('{"name": "s", "command": ["x.py"], "env": {"A": "\\ud800"}}', "env.A"),
        ('{"name": "s", "command": ["x.py"], "env": {"\\ud800": "a"}}', "env"),
        ('{"name": "s", "command": ["x.py"], "image": "\\ud800"}', "image"),
        ('{"name": "s", "command": ["x.py"], "workdir": "\\udc80"}', "workdir"),
        ('{"name": "s", "template": "script", "params": {"script": "\\ud800"}}', "params.script"),
        (
            '{"name": "s", "template": "script", "params": {"script": "x.py", "args": "\\ud834"}}',
            "params.args",
        ),
    ],
)
async def test_lone_surrogates_are_refused_naming_the_field(
    api: Api, partition: Path, body: str, field: str
) -> None:
    (partition / "x.py").write_text("print(1)\n")
    for route in ("jobs", "jobs/render"):
        assert_error(await api.post(route, body), 400, field)
    assert (await api.get("jobs")).body["total"] == 0  # nothing started, nothing recorded


async def test_a_query_path_that_is_not_utf8(
    http_server_client: Any, jp_base_url: str, jp_auth_header: dict
) -> None:
    for query in ("%ED%A0%80", "%FF", "a%C0%AF"):  # a UTF-8-encoded surrogate, bad bytes
        response = await http_server_client.fetch(
            f"{jp_base_url}hyperpod/api/files?path={query}",
            headers=jp_auth_header,
            raise_error=False,
        )
        assert response.code == 400, (query, response.body)
        assert response.headers["Content-Type"].startswith("application/json")
        add("hostile requests", "answered 4xx with a message")


async def test_deep_json_is_a_400(api: Api) -> None:
    for body in ("[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP):
        for route in ("jobs", "jobs/render", "aws/connect"):
            assert_error(await api.post(route, body), 400)
    nested = {"name": "n", "command": ["x"], "env": {"A": "1"}}
    for _ in range(40):
        nested = {"name": "n", "command": ["x"], "env": nested}  # type: ignore[dict-item]
    assert_error(await api.post("jobs", nested), 400)


@pytest.mark.parametrize(
    ("route", "params", "field"),
    [
        ("jobs", {"offset": 2**63}, "offset"),
        ("jobs", {"offset": -(2**63)}, "offset"),
        ("jobs", {"limit": 2**64}, "limit"),
        ("jobs", {"offset": "1e3"}, "offset"),
        ("jobs", {"offset": "٣"}, "offset"),  # an Arabic-Indic digit: int() takes it, we do not
        ("files", {"offset": 2**63}, "offset"),
        ("files", {"limit": "9" * 5000}, "limit"),
        ("jobs/nope-123456/logs", {"tail": 2**63}, "tail"),
        ("jobs/nope-123456/logs", {"rank": -(2**70)}, "rank"),
    ],
)
async def test_huge_or_odd_numbers_are_a_400(
    api: Api, route: str, params: dict[str, Any], field: str
) -> None:
    assert_error(await api.get(route, **params), 400, field)


@pytest.mark.parametrize("region", ["not a region", "us-east-1; rm -rf /", "-1", "x" * 200, "../"])
async def test_an_invalid_aws_region_is_a_400(api: Api, region: str) -> None:
    assert_error(await api.get("aws/clusters", region=region), 400, "region")
    reply = await api.post("aws/connect", {"cluster": "demo", "region": region})
    assert_error(reply, 400, "region")


@pytest.mark.parametrize(
    ("method", "route"),
    [
        ("GET", "jobs/UPPER-case"),
        ("GET", "jobs/-starts-with-dash"),
        ("DELETE", "jobs/" + "a" * 64),
        ("GET", "jobs/ok-123456/nope"),
        ("GET", "jobs/ok-123456/logs/extra/parts"),
        ("POST", "jobs/ok_123"),
        ("GET", "nope"),
        ("PUT", "cluster/x"),
    ],
)
async def test_ids_off_the_route_pattern_get_the_json_404(
    api: Api, method: str, route: str
) -> None:
    reply = await api.call(method, route, "{}" if method in ("POST", "PUT") else None)
    assert_error(reply, 404)
    assert reply.body["error"]["code"] == "not_found"


async def test_unknown_routes_still_need_authentication(
    http_server_client: Any, jp_base_url: str
) -> None:
    for path in ("hyperpod/api/jobs/UPPER", "hyperpod/api/nope", "hyperpod/"):
        response = await http_server_client.fetch(f"{jp_base_url}{path}", raise_error=False)
        assert response.code == 403, path
        assert response.headers["Content-Type"].startswith("application/json")
