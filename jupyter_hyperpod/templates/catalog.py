"""The built-in template catalog the core is given (`HyperPodSettings.template_catalog`)."""

from __future__ import annotations

from typing import Any

from ..core.catalog import TemplateContext
from ..core.models import JobSpec, TemplateInfo, TemplateParam, TemplateSubmission
from . import BUILTIN_TEMPLATES, get_template
from .spec import build_spec, parameter_values


class BuiltinCatalog:
    """Script, QLoRA fine-tune and evaluation (`core.catalog.TemplateCatalog`)."""

    def infos(self) -> list[TemplateInfo]:
        return [template.info for template in BUILTIN_TEMPLATES]

    def params(self, name: str) -> list[TemplateParam]:
        return get_template(name).info.params

    def build(self, submission: TemplateSubmission, context: TemplateContext) -> JobSpec:
        return build_spec(submission, context)

    def values(self, submission: TemplateSubmission, context: TemplateContext) -> dict[str, Any]:
        return parameter_values(submission, context)


CATALOG = BuiltinCatalog()
