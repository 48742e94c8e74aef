"""REST handlers of sweeps (#24 item 3): `POST sweeps` (a group of jobs), `GET sweeps` (the
group rows), `GET sweeps/{id}` (one group with its members), `POST sweeps/{id}/cancel`."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .handlers import JOB_ID, HyperPodAPIHandler

SWEEP_ID = JOB_ID.replace("job_id", "sweep_id")
"""A sweep id in a route: a job id's letters (its name and 6 hex digits)."""


class SweepsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send(await self.run_in("backend", self.service.sweeps))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        submitted = await self.run_in("backend", self.service.submit_sweep, self.json_body())
        self.send(submitted, status=201)


class SweepHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, sweep_id: str) -> None:
        self.send(await self.run_in("backend", self.service.sweep, sweep_id))


class SweepCancelHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, sweep_id: str) -> None:
        self.send(await self.run_in("backend", self.service.cancel_sweep, sweep_id))
