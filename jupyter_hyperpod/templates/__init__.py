"""The job templates every entry point offers (panel form, magics, CLI, REST)."""

from __future__ import annotations

from ..core.errors import InvalidRequest
from .base import Template, TemplateContext, check_params
from .evaluate import TEMPLATE as EVALUATE
from .qlora import TEMPLATE as QLORA
from .script import TEMPLATE as SCRIPT

BUILTIN_TEMPLATES: tuple[Template, ...] = (SCRIPT, QLORA, EVALUATE)


def get_template(name: str) -> Template:
    for template in BUILTIN_TEMPLATES:
        if template.info.name == name:
            return template
    known = ", ".join(t.info.name for t in BUILTIN_TEMPLATES)
    raise InvalidRequest(f"unknown template '{name}' (available: {known})", field="template")


__all__ = ["BUILTIN_TEMPLATES", "Template", "TemplateContext", "check_params", "get_template"]
