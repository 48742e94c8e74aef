"""Thin Tornado handlers: HTTP <-> `HyperPodService`. No logic here but the error mapping."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from pydantic import BaseModel, TypeAdapter, ValidationError
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from .core.api import RerunRequest, connect_request
from .core.errors import HyperPodError, InvalidRequest, NotFound, validation_error
from .core.inputs import parse_json_body, query_int
from .core.logprotocol import (
    CLOSE_JOB_ENDED,
    FRAMES_QUERY,
    Follow,
    LogEvent,
    close_for,
    follow_async,
    parse_frames,
)
from .core.models import JobState, Node
from .core.partition import ANSWERED_ERRNOS, os_error
from .core.service import HyperPodService
from .metrics import with_ui_url
from .openapi import openapi_document
from .server_compat import ws_authenticated
from .wswrite import write_binary

T = TypeVar("T")
AUTH_RESOURCE = "hyperpod"
JOB_ID = r"(?P<job_id>[a-z0-9][-a-z0-9]{0,62})"
OTHER_ID = JOB_ID.replace("job_id", "other_id")
"""The second job of a route about two (`jobs/{job_id}/diff/{other_id}`)."""


class ServiceMixin:
    """Access to the service and a thread pool: backends block (subprocess, HTTP)."""

    settings: dict[str, Any]

    @property
    def service(self) -> HyperPodService:
        return self.settings["hyperpod_service"]  # type: ignore[no-any-return]

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking work on the API pool (store reads, file listings)."""
        return await self.run_in("api", function, *args, **kwargs)

    async def read(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A status read: at once on the loop when it cannot wait (`HyperPodService.reads_wait`),
        else on the API pool."""
        if not self.service.reads_wait:
            return function(*args, **kwargs)
        return await self.run(function, *args, **kwargs)

    async def run_in(self, kind: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking work on the pool of its kind (`app.POOLS`): a slow kind (cancels, backend
        calls, log reads) fills its own pool and never the one the API answers from."""
        loop = asyncio.get_running_loop()
        pools = self.settings.get("hyperpod_pools") or {}
        executor = pools.get(kind) or self.settings["hyperpod_executor"]
        return await loop.run_in_executor(executor, lambda: function(*args, **kwargs))


class HyperPodAPIHandler(ServiceMixin, ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error is `{"error": {"code", "message", "field"}}`."""
        write_json_error(self, status_code, kwargs.get("exc_info", (None, None, None))[1])

    def send(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        if isinstance(value, BaseModel):
            self.finish(value.model_dump_json())
        else:
            self.finish(json.dumps(value, default=_encode))

    def int_argument(self, name: str, default: int) -> int:
        return query_int(name, self.get_argument(name, None), default)

    def json_body(self) -> Any:
        """The body as JSON: too deep, unpaired surrogates or not JSON -> 400 naming the field."""
        return parse_json_body(self.request.body)

    def _handle_request_exception(self, error: BaseException) -> None:
        """Our typed errors are answers, not crashes: their status, no traceback in the log."""
        error = as_answer(error) or error
        if isinstance(error, HyperPodError) and not self._finished:
            self.log.info(
                "%s %s -> %s %s",
                self.request.method,
                self.request.path,
                error.status,
                error.message,
            )
            self.send_error(error.status, exc_info=(type(error), error, error.__traceback__))
            return
        super()._handle_request_exception(error)  # type: ignore[arg-type]


def write_json_error(
    handler: web.RequestHandler, status_code: int, error: BaseException | None
) -> None:
    """The one error body of every route, REST and WebSocket (before the upgrade)."""
    error = as_answer(error) or error
    if isinstance(error, HyperPodError):
        body = error.to_dict()
    elif isinstance(error, web.HTTPError):
        code = {
            400: "invalid_request",
            403: "forbidden",
            404: "not_found",
            405: "method_not_allowed",
        }.get(status_code, "http_error")
        message = error.log_message or error.reason or handler._reason
        if error.log_message and error.args:
            message = error.log_message % error.args
        if status_code == 403 and not error.log_message:
            message = "not authenticated: log in to Jupyter or pass its token"
        body = {"code": code, "message": message, "field": None}
    else:
        body = {
            "code": "internal_error",
            "message": "unexpected server error (see the server log)",
            "field": None,
        }
    handler.set_header("Content-Type", "application/json")
    handler.finish(json.dumps({"error": body}))


def as_answer(error: BaseException | None) -> HyperPodError | None:
    """A file system refusal that escaped the core (read-only, full, name too long, symlink loop)
    as the 4xx/503 it is, never a 500; None for everything else."""
    if isinstance(error, OSError) and error.errno in ANSWERED_ERRNOS:
        return os_error(error, None)
    return None


class NotFoundHandler(HyperPodAPIHandler):
    """Anything under `hyperpod/` that no route serves (an id off the route pattern, a typo):
    the documented JSON error, not Jupyter's HTML page. Authenticated like every route."""

    @web.authenticated
    def get(self, *args: Any) -> None:
        raise NotFound(
            f"no such API route: {self.request.method} {self.request.path} "
            f"(the routes are in {self.base_url}hyperpod/api/openapi.json)"
        )

    post = put = patch = delete = get


def _encode(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot encode {type(value).__name__}")


class OpenAPIHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send(openapi_document(self.base_url))


class ClusterHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send(await self.run(self.service.cluster))


class DiagnoseHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send(await self.run_in("backend", self.service.diagnose))


# Thousands of nodes: pydantic's serializer in one call (json.dumps + model_dump per node is 8x).
_NODES_JSON = TypeAdapter(list[Node])


class _NodesBody:
    """The last `GET nodes` body, kept while the backend hands back the very same list (the
    Kubernetes watch cache does until a node or pod changes): 2,000 nodes are then not
    serialized again for every poll. Holding the list keeps its identity from being reused."""

    def __init__(self) -> None:
        self._nodes: list[Node] | None = None
        self._body = b""

    def of(self, nodes: list[Node]) -> bytes:
        if nodes is not self._nodes:
            self._body = b'{"nodes":' + _NODES_JSON.dump_json(nodes) + b"}"
            self._nodes = nodes
        return self._body


class NodesHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        nodes = await self.run_in("backend", self.service.nodes)
        body = self.settings.setdefault("hyperpod_nodes_body", _NodesBody())
        self.set_header("Content-Type", "application/json")
        self.finish(body.of(nodes))


class AwsClustersHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        region = self.get_argument("region", "") or None
        self.send(await self.run_in("backend", self.service.aws_clusters, region))


class AwsConnectHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        request = connect_request(self.json_body())
        connected = await self.run_in(
            "backend",
            self.service.connect,
            request.cluster,
            region=request.region,
            namespace=request.namespace,
            auth=request.auth,
            slurm=request.slurm,
            controller_group=request.controller_group,
        )
        self.send(connected)


class FilesHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        listing = await self.run(
            self.service.files,
            self.get_argument("path", ""),
            offset=self.int_argument("offset", 0),
            limit=self.int_argument("limit", 500),
            sort=self.get_argument("sort", "name"),
        )
        self.send(listing)


class FileTextHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        text = await self.run(
            self.service.read_file,
            self.get_argument("path", ""),
            limit=self.int_argument("limit", 65536),
        )
        self.send(text)


class TemplatesHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send({"templates": await self.run(self.service.templates)})


class RenderHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        self.send(await self.run_in("backend", self.service.render, self.json_body()))


class JobsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        states = []
        for value in filter(None, self.get_argument("state", "").split(",")):
            try:
                states.append(JobState(value.upper()))
            except ValueError:
                allowed = ", ".join(s.value for s in JobState)
                raise InvalidRequest(f"state must be one of {allowed}", field="state") from None
        jobs = await self.read(
            self.service.jobs,
            states=states or None,
            limit=self.int_argument("limit", 100),
            offset=self.int_argument("offset", 0),
        )
        self.send(jobs)

    @web.authenticated
    @authorized
    async def post(self) -> None:
        job = await self.run_in("backend", self.service.submit, self.json_body())
        self.set_header("Location", f"{self.base_url}hyperpod/api/jobs/{job.id}")
        self.send(job, status=201)


class JobHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        self.send(await self.read(self.service.job, job_id))

    @web.authenticated
    @authorized
    async def delete(self, job_id: str) -> None:
        forget = _flag(self, "forget")
        delete_files = _flag(self, "delete_files")
        if delete_files and not forget:
            raise InvalidRequest("delete_files needs forget=true", field="delete_files")
        if forget:
            self.send(
                await self.run_in("cancel", self.service.forget, job_id, delete_files=delete_files)
            )
            return
        self.send(await self.run_in("cancel", self.service.cancel, job_id))


class JobEventsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        body = self.json_body()
        if not isinstance(body, dict) or not isinstance(body.get("event"), str):
            raise InvalidRequest('the body must be {"event": "<one line>"}', field="event")
        self.send(await self.run(self.service.add_event, job_id, body["event"]))


class JobRerunHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        try:
            request = RerunRequest.model_validate(self.json_body() or {})
        except ValidationError as error:
            raise validation_error(error) from None
        job = await self.run_in(
            "backend", self.service.rerun, job_id, with_changes=request.with_changes
        )
        self.set_header("Location", f"{self.base_url}hyperpod/api/jobs/{job.id}")
        self.send(job, status=201)


def _flag(handler: HyperPodAPIHandler, name: str) -> bool:
    """A true/false query argument (absent: false); anything else is a 400 naming it."""
    raw = (handler.get_argument(name, "") or "").strip().lower()
    if raw in ("", "false", "0", "no"):
        return False
    if raw in ("true", "1", "yes"):
        return True
    raise InvalidRequest(f"{name} must be true or false, not '{raw[:20]}'", field=name)


class LogsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        snapshot = await self.run_in(
            "logs",
            self.service.logs,
            job_id,
            rank=self.int_argument("rank", 0),
            tail=self.int_argument("tail", 200),
        )
        self.send(snapshot)


class MetricsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        found = await self.run_in("backend", self.service.metrics, job_id)
        settings = self.service.settings
        self.send(with_ui_url(found, settings.mlflow_tracking_uri, settings.mlflow_ui_url))


class JobDiffHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str, other_id: str) -> None:
        self.send(await self.run(self.service.diff, job_id, other_id))


class CompareHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        ids = [part for value in self.get_arguments("ids") for part in value.split(",")]
        self.send(await self.run_in("backend", self.service.compare, ids))


class StacksHandler(HyperPodAPIHandler):
    """A Python stack of every rank (py-spy dump): POST takes one, GET answers the last."""

    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        self.send(await self.run_in("backend", self.service.stacks, job_id))

    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        self.send(await self.run_in("backend", self.service.dump_stacks, job_id))


class GpuNodesHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        # Prometheus/AMP/Grafana or nvidia-smi: remote or slow, on the backend pool.
        self.send(await self.run_in("backend", self.service.gpu_nodes))


class JobGpuHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        raw = self.get_argument("step", "")
        try:
            step = float(raw) if raw else None
        except ValueError:
            raise InvalidRequest(
                f"step must be a number of seconds, not '{raw}'", field="step"
            ) from None
        self.send(await self.run_in("backend", self.service.job_gpu, job_id, step=step))


class LogStreamHandler(
    ServiceMixin, WebSocketMixin, WebSocketHandler, ExtensionHandlerMixin, JupyterHandler
):
    """Follows a job's log with the protocol of `core/logprotocol.py`: JSON frames `status`,
    `data`, `heartbeat`, then `end` (close 1000) or `error` (then its close code).

    Query: `rank` (a number, or `all`), `offset` (bytes already received for that rank) or
    `offsets=0:123,1:456` with rank=all; `frames=binary` sends each data frame as a binary
    message (`LogEvent.to_binary`). The server waits while the job is pending.
    """

    auth_resource = AUTH_RESOURCE
    _task: asyncio.Task[None] | None = None

    def set_default_headers(self) -> None:
        """WebSockets take no HTML security headers."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """A refusal before the upgrade (no token, not a WebSocket request) is the JSON error."""
        write_json_error(self, status_code, kwargs.get("exc_info", (None, None, None))[1])

    async def pre_get(self) -> None:
        authorized_user = await ensure_async(
            self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE)
        )
        if not authorized_user:
            raise web.HTTPError(403)

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            # Tornado would answer a plain-text 400: say it in the documented JSON instead.
            raise web.HTTPError(400, 'this route is a WebSocket: send "Upgrade: websocket"')
        await super().get(*args, **kwargs)

    async def open(self, job_id: str) -> None:  # type: ignore[override]
        super().open()
        self._task = asyncio.ensure_future(self._follow(job_id))

    def on_message(self, message: str | bytes) -> None:
        """Clients only listen."""

    def on_close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _send(self, event: LogEvent) -> None:
        await self.write_message(event.to_json())  # UTF-8 JSON text: a text frame

    async def _follow(self, job_id: str) -> None:
        try:
            await self._stream(job_id)
        except WebSocketClosedError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception as error:
            close = close_for(error)
            if isinstance(error, HyperPodError):
                message = error.message
            else:
                self.log.exception("log stream of %s failed", job_id)
                message = "server error while following the log (see the server log)"
            try:
                await self._send(LogEvent.for_error(error, close, message))
            except WebSocketClosedError:
                return
            # A close reason is at most 123 bytes: the error frame above carries the whole message.
            self.close(close.code, message.encode()[:120].decode("utf-8", "ignore"))

    async def _stream(self, job_id: str) -> None:
        binary = parse_frames(self.get_argument(FRAMES_QUERY, "text")) == "binary"
        follow = await self.run_in(
            "logs",
            Follow.for_request,
            self.service,
            job_id,
            self.get_argument("rank", "0"),
            offset=self.get_argument("offset", "0"),
            offsets=self.get_argument("offsets", ""),
            heartbeat_every=float(self.service.settings.heartbeat_interval),
            looks=self.settings.get("hyperpod_job_looks"),
        )
        state: JobState | None = None
        events = follow_async(follow, lambda function: self.run_in("logs", function))
        # One frame in flight: the next step reads and encodes while the last frame drains to
        # the client (awaiting each write first leaves the two sides taking turns).
        sending: Awaitable[None] | None = None
        async with aclosing(events):
            async for event in events:
                if binary and event.type == "data":
                    written = write_binary(self, event.binary_parts())
                else:
                    written = self.write_message(event.to_json())  # UTF-8 JSON: a text frame
                if sending is not None:
                    await sending
                sending = written
                if event.type == "end":
                    state = event.state
            if sending is not None:
                await sending
        if state is not None:
            self.close(CLOSE_JOB_ENDED, f"job {state.value}")
