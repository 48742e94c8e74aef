"""The OpenAPI document, the routes and the real responses agree."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jupyter_hyperpod.app import ROUTES
from jupyter_hyperpod.openapi import openapi_document

from .helpers import Api

DOC = openapi_document()
PROJECT = Path(__file__).resolve().parents[1]


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    resource = Resource.from_contents(
        {**DOC, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    )
    registry = Registry().with_resource("urn:openapi", resource)
    rewritten = json.loads(json.dumps(schema).replace('"#/components', '"urn:openapi#/components'))
    return Draft202012Validator(rewritten, registry=registry)


def check(path: str, method: str, status: int, body: Any) -> None:
    """Validate a response body against the document's schema for that route and status."""
    operation = DOC["paths"][path][method.lower()]
    assert str(status) in operation["responses"], f"{method} {path} documents no {status}"
    schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
    errors = sorted(_validator(schema).iter_errors(body), key=str)
    assert not errors, (
        f"{method} {path} {status}: {errors[0].message} at {list(errors[0].absolute_path)}"
    )


def test_every_route_is_documented_and_every_documented_path_is_served() -> None:
    served = {
        re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern).removeprefix("hyperpod/api")
        for pattern, _ in ROUTES
    }
    assert served == set(DOC["paths"])
    for pattern, handler in ROUTES:
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern).removeprefix("hyperpod/api")
        documented = {m for m in DOC["paths"][path] if m != "parameters"}
        implemented = {
            m for m in ("get", "post", "delete", "put", "patch") if m in handler.__dict__
        }
        assert documented == implemented, path


def test_the_committed_document_is_current() -> None:
    """docs/openapi.json is what `python -m jupyter_hyperpod.openapi` writes."""
    committed = json.loads((PROJECT / "docs" / "openapi.json").read_text())
    assert committed == DOC


async def test_responses_match_the_document(api: Api, partition: Path) -> None:
    (partition / "train.py").write_text("print('hello')\n")
    served = await api.get("openapi.json")
    assert served.status == 200 and served.body["paths"] == DOC["paths"]

    for route in ("cluster", "nodes", "templates"):
        reply = await api.get(route)
        check(f"/{route}", "GET", reply.status, reply.body)
        if route == "cluster":  # the local backend has no watch cache (Kubernetes: test_cache.py)
            assert reply.body["watch_cache"] is None
    reply = await api.get("files", limit=1, sort="-mtime")
    check("/files", "GET", reply.status, reply.body)

    body = {"name": "contract", "template": "script", "params": {"script": "train.py"}}
    reply = await api.post("jobs/render", body)
    check("/jobs/render", "POST", reply.status, reply.body)
    reply = await api.post("jobs", body)
    check("/jobs", "POST", reply.status, reply.body)
    job_id = reply.body["id"]
    await api.wait_for(job_id, {"SUCCEEDED"})
    for route, path in [
        (f"jobs/{job_id}", "/jobs/{job_id}"),
        (f"jobs/{job_id}/logs", "/jobs/{job_id}/logs"),
        (f"jobs/{job_id}/metrics", "/jobs/{job_id}/metrics"),
        ("jobs", "/jobs"),
    ]:
        reply = await api.get(route)
        check(path, "GET", reply.status, reply.body)
    reply = await api.delete(f"jobs/{job_id}")
    check("/jobs/{job_id}", "DELETE", reply.status, reply.body)


@pytest.mark.parametrize(
    ("method", "route", "path", "body", "status"),
    [
        ("GET", "files?path=nope", "/files", None, 404),
        ("POST", "jobs", "/jobs", {"name": "x"}, 400),
        ("POST", "jobs/render", "/jobs/render", {"name": "x", "command": ["ls"], "nodes": 0}, 400),
        ("GET", "jobs/nope-123456", "/jobs/{job_id}", None, 404),
        ("GET", "jobs/nope-123456/logs", "/jobs/{job_id}/logs", None, 404),
    ],
)
async def test_errors_match_the_document(
    api: Api, method: str, route: str, path: str, body: Any, status: int
) -> None:
    name, _, query = route.partition("?")
    params = dict(item.split("=") for item in query.split("&")) if query else {}
    reply = await api.call(method, name, body, **params)
    assert reply.status == status
    check(path, method, reply.status, reply.body)
