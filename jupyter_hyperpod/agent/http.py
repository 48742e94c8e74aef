"""`hyperpod/mcp`: the MCP server as a streamable-HTTP endpoint of the Jupyter server.

Authenticated and authorized like every route (`Authorization: token ...`, or the session
cookie with its XSRF token); behind that, the request is handed to the `mcp` SDK's
streamable-HTTP session manager (stateless, JSON answers) as the ASGI request it is. Its
tools call the server's own core, so partition and identity are those of REST.

Actions: `c.HyperPodSettings.mcp_actions`; with `opt-in` (the default) a client enables them
with `?actions=on` in the endpoint's URL."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..core.errors import HyperPodError
from ..handlers import HyperPodAPIHandler
from .tools import Policy, policy_for

if TYPE_CHECKING:
    from ..core.service import HyperPodService
    from .preview import PreviewSigner

MCP_ROUTE = "hyperpod/mcp"


class McpEndpoint:
    """The session managers of the endpoint (one read-only, one with actions), started on the
    server's event loop at the first request; one preview secret for both."""

    def __init__(self, service: HyperPodService) -> None:
        from .preview import PreviewSigner

        self.service = service
        self.signer: PreviewSigner = PreviewSigner()
        self._managers: dict[bool, Any] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def manager(self, policy: Policy) -> Any:
        if policy.actions not in self._managers:
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from .server import build_server
            from .tools import Agent

            agent = Agent(self.service, policy, self.signer)
            manager = StreamableHTTPSessionManager(
                app=build_server(agent), json_response=True, stateless=True
            )
            started = asyncio.Event()
            self._tasks.append(asyncio.ensure_future(_run(manager, started)))
            await started.wait()
            self._managers[policy.actions] = manager
        return self._managers[policy.actions]

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()


async def _run(manager: Any, started: asyncio.Event) -> None:
    async with manager.run():
        started.set()
        await asyncio.Event().wait()  # until cancelled at the server's stop


class McpHandler(HyperPodAPIHandler):
    """POST (JSON-RPC messages), GET and DELETE of the streamable-HTTP transport."""

    _closed: asyncio.Event | None = None

    def on_connection_close(self) -> None:
        if self._closed is not None:
            self._closed.set()

    async def _serve(self) -> None:
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise HyperPodError(
                "the MCP endpoint needs the mcp package: pip install 'jupyter-hyperpod[mcp]'"
            ) from None
        endpoint: McpEndpoint = self.settings["hyperpod_mcp"]
        asked = (self.get_argument("actions", "") or "").lower() in ("on", "true", "1", "yes")
        policy = policy_for(
            str(self.service.settings.mcp_actions), asked, "add ?actions=on to the endpoint's URL"
        )
        manager = await endpoint.manager(policy)
        self._closed = asyncio.Event()
        await manager.handle_request(self._scope(), self._receive(), self._send)
        if not self._finished:
            self.finish()

    def _scope(self) -> dict[str, Any]:
        request = self.request
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.get_all()
        ]
        host, _, port = (request.host or "localhost").partition(":")
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": (request.remote_ip, 0),
            "server": (host, int(port) if port.isdigit() else 80),
        }

    def _receive(self) -> Any:
        body = self.request.body or b""
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            assert self._closed is not None
            await self._closed.wait()
            return {"type": "http.disconnect"}

        return receive

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.set_status(message["status"])
            self.clear_header("Content-Type")
            for name, value in message.get("headers", []):
                self.add_header(name.decode("latin-1"), value.decode("latin-1"))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.write(message["body"])
            if message.get("more_body"):
                await self.flush()
            elif not self._finished:
                self.finish()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        await self._serve()


__all__ = ["MCP_ROUTE", "McpEndpoint", "McpHandler"]
