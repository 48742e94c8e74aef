"""From a request to one validated `JobSpec`: a full spec, or a template with parameters (built
by the catalog, its paths checked in the partition); and the preview of what a spec submits."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from .api import SubmitBody, request_body
from .backend import Launch
from .catalog import TemplateCatalog, TemplateContext
from .connection import Connection
from .errors import InvalidRequest, validation_error
from .launch import check_program
from .models import JobSpec, Rendered, TemplateInfo, TemplateParam, TemplateSubmission
from .partition import Partition
from .paths import ClusterPaths
from .settings import HyperPodSettings


class SpecBuilder:
    """`launch(spec, job_id)`: what the backend would be given (`Submission.launch`)."""

    def __init__(
        self,
        settings: HyperPodSettings,
        catalog: TemplateCatalog,
        connection: Connection,
        partition: Partition,
        paths: ClusterPaths,
        *,
        launch: Callable[[JobSpec, str], Launch],
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.connection = connection
        self.partition = partition
        self.paths = paths
        self.launch = launch

    def templates(self) -> list[TemplateInfo]:
        return self.catalog.infos()

    def template_context(self) -> TemplateContext:
        orchestrator = self.connection.orchestrator
        return TemplateContext(
            orchestrator=orchestrator.kind,
            partition=str(self.partition.root),
            mlflow_tracking_uri=self.paths.mlflow_uri_for_jobs,
            # Local jobs run on this machine: with the server's own interpreter (where this
            # package and its extras are installed), not whatever `python3` is first on PATH.
            python=sys.executable
            if orchestrator.job_python == "server"
            else self.settings.cluster_python,
        )

    def spec_from_body(self, body: Any) -> JobSpec:
        """A REST/CLI body, either a full spec or {name, template, params}, as a validated JobSpec."""
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        if "template" in body and "command" not in body:
            try:
                submission = TemplateSubmission.model_validate(body)
            except ValidationError as error:
                raise validation_error(error) from None
            spec = self.catalog.build(submission, self.template_context())
            self._check_paths_exist(self.catalog.params(submission.template), spec.params)
            return spec
        try:
            return JobSpec.model_validate(body)
        except ValidationError as error:
            raise validation_error(error) from None

    def _check_paths_exist(self, params: list[TemplateParam], values: dict[str, Any]) -> None:
        for param in params:
            value = values.get(param.name)
            if param.type == "path" and param.must_exist and value:
                field = f"params.{param.name}"
                path = self.partition.resolve(str(value), field=field)
                if not path.exists():
                    raise InvalidRequest(f"'{value}' does not exist in your partition", field=field)
                if param.program:
                    check_program(path, str(value), field)

    def render(self, spec: SubmitBody | None = None, /, **fields: Any) -> Rendered:
        """What a submit of this body would hand the backend (nothing is created)."""
        body = request_body(spec, fields)
        built = self.spec_from_body(body)
        rendered = self.connection.orchestrator.render(self.launch(built, f"{built.name}-xxxxxx"))
        values = (
            self.catalog.values(TemplateSubmission.model_validate(body), self.template_context())
            if built.template and "command" not in body
            else {}
        )
        return Rendered(
            format=rendered.format,
            language=rendered.language,
            text=rendered.text,
            spec=built,
            warnings=rendered.warnings,
            values=values,
        )
