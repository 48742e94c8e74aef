"""The agent tests: the SDK's own MCP client against a real Jupyter server (HTTP) and against
`jupyter hyperpod mcp` started as a subprocess (stdio), on the local backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.cli.conftest import jupyter_env, shell  # noqa: F401  (config files, IPython)

STEPS = """\
import sys, time
for step in range(1, 6):
    print(f"step {step}/5 loss={1.0 / step:.3f}", flush=True)
    time.sleep(0.2)
print("done", flush=True)
"""
FAILS = """\
import sys
print("loading data from missing.csv", flush=True)
print("FileNotFoundError: missing.csv", file=sys.stderr, flush=True)
sys.exit(3)
"""


@pytest.fixture
def scripts(partition: Path) -> Path:
    project = partition / "project"
    project.mkdir(exist_ok=True)
    (project / "steps.py").write_text(STEPS)
    (project / "fails.py").write_text(FAILS)
    return project


def endpoint(serverapp: Any, query: str = "") -> str:
    return f"{serverapp.connection_url.rstrip('/')}/hyperpod/mcp{query}"


@asynccontextmanager
async def http_session(
    serverapp: Any, query: str = "", token: str | None = None
) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, with the server's token (or the one given)."""
    given = serverapp.identity_provider.token if token is None else token
    http = create_mcp_http_client(headers={"Authorization": f"token {given}"})
    async with (
        http,
        Client(streamable_http_client(endpoint(serverapp, query), http_client=http)) as client,
    ):
        yield client


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content  # type: ignore[no-any-return]
