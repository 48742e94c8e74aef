"""REST handlers of chains (#24 item 4): `POST chains`, `GET jobs/{id}/chain`,
`POST jobs/{id}/resume`. A single job waits through `JobSpec.after` on `POST jobs`."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import ValidationError
from tornado import web

from .core.chains import ResumeRequest
from .core.errors import validation_error
from .handlers import HyperPodAPIHandler


class ChainsHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        submitted = await self.run_in("backend", self.service.submit_chain, self.json_body())
        self.send(submitted, status=201)


class JobChainHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        self.send(await self.run(self.service.chain, job_id))


class JobResumeHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        try:
            request = ResumeRequest.model_validate(self.json_body() or {})
        except ValidationError as error:
            raise validation_error(error) from None
        submitted = await self.run_in(
            "backend", self.service.resume, job_id, with_changes=request.with_changes
        )
        self.send(submitted, status=201)
