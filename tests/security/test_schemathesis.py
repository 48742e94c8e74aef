"""Schemathesis against the OpenAPI document the server serves (`GET /hyperpod/api/openapi.json`).

Every documented operation, with data that fits the document (positive) and data that does not
(negative), against a real server on 127.0.0.1: at least 1,000 requests, no 5xx, every response
as documented (schemathesis' `response_schema_conformance` and `content_type_conformance`), and
every error body the documented `{"error": {"code", "message", "field"}}` whatever its status.

The server runs the local orchestrator with an empty PATH (a generated command finds no program
to run) and AWS pointed at a closed loopback port, so that nothing leaves this machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from jupyter_hyperpod.core.models import ErrorResponse

from .conftest import record
from .live import TOKEN, LiveServer, free_port

EXAMPLES_PER_MODE = 30
MINIMUM_REQUESTS = 1000
AUTH = {"Authorization": f"token {TOKEN}"}
ERROR_BODY = Draft202012Validator(ErrorResponse.model_json_schema())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("fuzz")
    fs_root = base / "fsx"
    (fs_root / "shared" / "project").mkdir(parents=True)
    (fs_root / "shared" / "project" / "train.py").write_text("print('hello')\n")
    closed = free_port()
    live = LiveServer(
        base,
        {
            "orchestrator": "local",
            "shared_fs_root": str(fs_root),
            "partition": "shared",
            "user": "alice",
            "job_store": str(base / "jobs.sqlite"),
            "local_max_parallel_jobs": 2,
        },
    )
    environment = {
        "PATH": "/nonexistent",
        "KUBECONFIG": str(base / "kubeconfig"),
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": str(base / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(base / "aws-credentials"),
    }
    live.extra_env = environment
    live.start()
    yield live
    for job in live.request("GET", "jobs?limit=1000")[1].get("jobs", []):
        live.request("DELETE", f"jobs/{job['id']}")
    live.stop()


def _error_body_problems(response: Any) -> list[str]:
    if response.status_code < 400:
        return []
    try:
        body = response.json()
    except ValueError:
        return [f"{response.status_code} is not JSON: {response.text[:200]!r}"]
    return [error.message for error in ERROR_BODY.iter_errors(body)]


def _fuzz(
    operation: Any,
    mode: GenerationMode,
    checks: list[Any],
    figures: dict[str, Any],
    problems: list[str],
) -> None:
    """Up to EXAMPLES_PER_MODE generated requests to one operation, each checked."""

    @settings(
        max_examples=EXAMPLES_PER_MODE,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call(headers=AUTH, timeout=60)
        figures["requests"] += 1
        kind = f"{response.status_code // 100}xx"
        figures[kind] = figures.get(kind, 0) + 1
        label = f"{mode.value} {case.method} {case.formatted_path}"
        if response.status_code >= 500:
            figures["5xx"] += 1
            problems.append(f"{label}: {response.status_code} {response.text[:300]}")
        body_problems = _error_body_problems(response)
        try:
            case.validate_response(response, checks=checks)
        except (Failure, FailureGroup) as error:
            body_problems.append(str(error)[:500])
        if body_problems and response.status_code < 500:
            figures["schema violations"] += 1
            problems.append(f"{label} -> {response.status_code}: {body_problems[0]}")

    run()


@pytest.mark.slow
def test_the_served_document_holds_for_generated_requests(server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(
        f"{server.url}/hyperpod/api/openapi.json", headers=AUTH, timeout=30
    )
    checks = [not_a_server_error, response_schema_conformance, content_type_conformance]
    figures: dict[str, float] = {"requests": 0, "operations": 0, "5xx": 0, "schema violations": 0}
    problems: list[str] = []
    started = time.monotonic()
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an invalid schema raises here
        figures["operations"] += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, checks, figures, problems)
    figures["seconds"] = round(time.monotonic() - started, 1)
    for name, value in figures.items():
        record("schemathesis (served OpenAPI)", name, value)
    assert not problems, "\n".join(problems[:10])
    assert figures["requests"] >= MINIMUM_REQUESTS, figures
    assert figures["5xx"] == 0 and figures["schema violations"] == 0


def test_the_fuzzed_server_kept_its_partition(server: LiveServer) -> None:
    """Whatever was sent, the partition's own file is still there and nothing wrote above it."""
    root = Path(server.hyperpod["shared_fs_root"])
    assert (root / "shared" / "project" / "train.py").read_text() == "print('hello')\n"
    assert sorted(p.name for p in root.iterdir()) == ["shared"]
