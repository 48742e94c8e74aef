"""REST handler of `POST jobs/apply`: the user's own manifest or sbatch script (core/byo.py)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .core.byo import apply_request
from .handlers import HyperPodAPIHandler


class ApplyHandler(HyperPodAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        request = apply_request(self.json_body())
        applied = await self.run_in(
            "backend",
            self.service.apply,
            request.text,
            filename=request.filename,
            fix=request.fix,
            dry_run=request.dry_run,
            resubmit=request.resubmit,
        )
        if applied.job is not None:
            self.set_header("Location", f"{self.base_url}hyperpod/api/jobs/{applied.job.id}")
            self.send(applied, status=201)
        else:
            self.send(applied)
