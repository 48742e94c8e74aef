"""Job templates: named forms whose parameters become a `JobSpec` (the panel builds its form from them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..core.catalog import TemplateContext
from ..core.errors import InvalidRequest, validation_error
from ..core.models import JobSpec, TemplateInfo, TemplateParam
from ..core.partition import confine_params


@dataclass(frozen=True)
class Template:
    info: TemplateInfo
    build: Callable[[str, dict[str, Any], TemplateContext], JobSpec]
    """(job name, checked params with defaults filled in, context) -> JobSpec"""
    defaults: Callable[[dict[str, Any], TemplateContext], dict[str, Any]] | None = None
    """(checked params, context) -> what the program will use for the parameters left unset
    (e.g. the config file's values); None: the template's declared defaults."""

    def values(self, checked: dict[str, Any], context: TemplateContext) -> dict[str, Any]:
        """The value each parameter takes: the one given, else `defaults`', else the declared."""
        found = self.defaults(checked, context) if self.defaults else {}
        return {
            param.name: checked[param.name]
            if checked.get(param.name) is not None
            else found.get(param.name, param.default)
            for param in self.info.params
        }

    def make_spec(self, name: str, params: dict[str, Any], context: TemplateContext) -> JobSpec:
        # Every path-like parameter through the partition resolver before build opens a file.
        checked = confine_params(
            context.partition, self.info.params, check_params(self.info.params, params)
        )
        try:
            spec = self.build(name, checked, context)
        except ValidationError as error:
            # The spec refused a value a parameter gave it: name that parameter, not the spec field.
            field = str(error.errors()[0]["loc"][0]) if error.errors()[0]["loc"] else ""
            declared = {param.name for param in self.info.params}
            raise validation_error(
                error, prefix="params." if field in declared else "spec."
            ) from None
        return spec.model_copy(update={"template": self.info.name, "params": checked})


def check_params(declared: list[TemplateParam], given: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults, coerce form strings, and reject unknown or bad values naming the field."""
    known = {param.name: param for param in declared}
    for key in given:
        if key not in known:
            raise InvalidRequest(
                f"unknown parameter '{key}' (known: {', '.join(known)})", field=f"params.{key}"
            )
    result: dict[str, Any] = {}
    for param in declared:
        value = given.get(param.name, param.default)
        if value is None or value == "":
            if param.required:
                raise InvalidRequest(f"{param.title} is required", field=f"params.{param.name}")
            result[param.name] = param.default
            continue
        result[param.name] = _coerce(param, value)
    return result


def _coerce(param: TemplateParam, value: Any) -> Any:
    field = f"params.{param.name}"
    try:
        if param.type == "integer":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number: float = int(value)
        elif param.type == "number":
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        elif param.type == "boolean":
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                return value.lower() in ("true", "1", "yes")
            return bool(value)
        else:
            text = str(value)
            if "\x00" in text:
                raise InvalidRequest(f"{param.title} contains a NUL byte", field=field)
            if param.type == "choice" and param.choices and text not in param.choices:
                raise InvalidRequest(
                    f"{param.title} must be one of: {', '.join(param.choices)}", field=field
                )
            return text
    except (TypeError, ValueError):
        kind = (
            "a whole number"
            if param.type == "integer"
            else "a number"
            if param.type == "number"
            else "true or false"
        )
        raise InvalidRequest(f"{param.title} must be {kind}, not {value!r}", field=field) from None
    if param.minimum is not None and number < param.minimum:
        raise InvalidRequest(f"{param.title} must be at least {param.minimum:g}", field=field)
    if param.maximum is not None and number > param.maximum:
        raise InvalidRequest(f"{param.title} must be at most {param.maximum:g}", field=field)
    return number
