"""The job templates as the core sees them: a catalog it is given, and the context a template
builds a spec in. The core never imports the templates themselves: `HyperPodSettings.
template_catalog` names the catalog (an import string), the built-in one being
`jupyter_hyperpod.templates.catalog:CATALOG` (script, QLoRA fine-tune, evaluation)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidRequest
from .models import JobSpec, TemplateInfo, TemplateParam, TemplateSubmission


@dataclass(frozen=True)
class TemplateContext:
    """What a template may need to know about where the job will run."""

    orchestrator: str
    """local | slurm | kubernetes"""
    partition: str
    """The user's partition, absolute on this machine (IDE paths)."""
    mlflow_tracking_uri: str | None
    python: str


@runtime_checkable
class TemplateCatalog(Protocol):
    """The templates every entry point offers, and how a submission becomes a `JobSpec`."""

    def infos(self) -> list[TemplateInfo]:
        """Every template with its parameters (the panel's form)."""
        ...

    def params(self, name: str) -> list[TemplateParam]:
        """The parameters of one template (InvalidRequest naming `template` when unknown)."""
        ...

    def build(self, submission: TemplateSubmission, context: TemplateContext) -> JobSpec:
        """The spec a submission describes, its params and overrides recorded on it."""
        ...

    def values(self, submission: TemplateSubmission, context: TemplateContext) -> dict[str, Any]:
        """The value each parameter takes (given, else the config file's, else the default)."""
        ...


def load_catalog(target: str) -> TemplateCatalog:
    """The catalog an import string `module:name` names."""
    module_name, _, attribute = target.partition(":")
    try:
        catalog = getattr(importlib.import_module(module_name), attribute or "CATALOG")
    except (ImportError, AttributeError) as error:
        raise InvalidRequest(
            f"template_catalog '{target}' names no catalog: {error}", field="template_catalog"
        ) from None
    if not isinstance(catalog, TemplateCatalog):
        raise InvalidRequest(
            f"template_catalog '{target}' is not a TemplateCatalog (infos, params, build, values)",
            field="template_catalog",
        )
    return catalog
