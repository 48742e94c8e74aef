"""Helpers for the REST and WebSocket tests (imported by the tests of every backend)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tornado.httpclient import HTTPClientError


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any


class Api:
    """JSON calls to /hyperpod/api/... that return the status instead of raising on 4xx/5xx."""

    def __init__(self, fetch: Any, ws_fetch: Any) -> None:
        self._fetch = fetch
        self._ws_fetch = ws_fetch

    async def call(self, method: str, route: str, body: Any = None, **params: Any) -> Reply:
        kwargs: dict[str, Any] = {"method": method, "raise_error": False}
        if body is not None:
            kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
        elif method in ("POST", "PUT"):
            kwargs["body"] = b""
        if params:
            kwargs["params"] = {k: str(v) for k, v in params.items()}
        try:
            response = await self._fetch("hyperpod", "api", *route.strip("/").split("/"), **kwargs)
        except HTTPClientError as error:  # raised for some statuses despite raise_error=False
            response = error.response
        text = response.body.decode() if response.body else ""
        return Reply(response.code, json.loads(text) if text else None, response.headers)

    async def get(self, route: str, **params: Any) -> Reply:
        return await self.call("GET", route, **params)

    async def post(self, route: str, body: Any) -> Reply:
        return await self.call("POST", route, body)

    async def delete(self, route: str) -> Reply:
        return await self.call("DELETE", route)

    async def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        reply = await self.post("jobs", spec)
        assert reply.status == 201, reply.body
        return reply.body  # type: ignore[no-any-return]

    async def wait_for(self, job_id: str, states: set[str], timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            reply = await self.get(f"jobs/{job_id}")
            assert reply.status == 200, reply.body
            if reply.body["state"] in states:
                return reply.body  # type: ignore[no-any-return]
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id} still {reply.body['state']} after {timeout}s: {reply.body}"
                )
            await asyncio.sleep(0.1)

    async def follow(
        self, job_id: str, timeout: float = 60, **params: Any
    ) -> tuple[list[dict[str, Any]], Any]:
        """All frames of a log stream until the server closes it; returns (frames, websocket)."""
        ws = await self._ws_fetch(
            "hyperpod",
            "api",
            "jobs",
            job_id,
            "logs",
            "stream",
            params={k: str(v) for k, v in params.items()},
        )
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            message = await asyncio.wait_for(
                ws.read_message(), max(0.1, deadline - time.monotonic())
            )
            if message is None:
                return frames, ws
            frames.append(json.loads(message))


def log_text(frames: list[dict[str, Any]], rank: int | None = None) -> str:
    return "".join(
        f["data"] for f in frames if f["type"] == "data" and (rank is None or f["rank"] == rank)
    )


REPO = Path(__file__).resolve().parent.parent


def copy_checkout(target: Path) -> Path:
    """The checkout's own files, as a clone holds them (tracked and new, not ignored): no build
    output, no node_modules. Files deleted in the work tree but not yet committed are skipped."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            destination = target / os.fsdecode(name)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    return target
