"""REST handlers of the cluster's queue (`GET queue`, `POST queue/adopt`, `GET queue/logs`)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .core.errors import InvalidRequest
from .core.queue_view import adopt_request
from .handlers import HyperPodAPIHandler


class QueueHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        mine = self.get_argument("mine", "false").lower()
        if mine not in ("true", "false", "1", "0", ""):
            raise InvalidRequest("mine must be true or false", field="mine")
        fresh = self.get_argument("refresh", "false").lower() in ("true", "1")
        page = await self.run(
            self.service.queue,
            mine=mine in ("true", "1"),
            state=self.get_argument("state", ""),
            partition=self.get_argument("queue", "") or None,
            offset=self.int_argument("offset", 0),
            limit=self.int_argument("limit", 100),
            fresh=fresh,
        )
        self.send(page)


class QueueAdoptHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        job = await self.run(self.service.adopt, adopt_request(self.json_body()))
        self.set_header("Location", f"{self.base_url}hyperpod/api/jobs/{job.id}")
        self.send(job)


class QueueLogsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        queue_id = self.get_argument("id", "")
        if not queue_id:
            raise InvalidRequest("id names the queue row whose log to read", field="id")
        tail = self.int_argument("tail", 200)
        self.send(await self.run(self.service.queue_logs, queue_id, tail=tail))
