"""Each tool's input is what its REST route takes: the same parameters (names, types, bounds,
defaults) as the OpenAPI document says, and the same body models. A route that gains, loses or
changes a parameter fails here until its tool follows (or names the difference)."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_hyperpod.agent.tools import TOOLS, input_schema
from jupyter_hyperpod.openapi import openapi_document

DOC = openapi_document()
COMPARED = ("type", "minimum", "maximum", "default", "enum")


def _route_parameters(method: str, path: str) -> dict[str, dict[str, Any]]:
    item = DOC["paths"][path]
    parameters = [*item.get("parameters", []), *item[method].get("parameters", [])]
    return {p["name"]: p for p in parameters}


def _tool_property(schema: dict[str, Any], name: str) -> dict[str, Any]:
    prop = dict(schema["properties"][name])
    if "anyOf" in prop:  # Optional: the non-null branch
        prop.update(next(p for p in prop.pop("anyOf") if p.get("type") != "null"))
    return prop


@pytest.mark.parametrize("tool", [t for t in TOOLS if t.route], ids=lambda t: t.name)
def test_a_tool_takes_what_its_route_takes(tool: Any) -> None:
    method, path = tool.route
    assert method in DOC["paths"][path], f"{tool.name}: no {method.upper()} {path}"
    schema = input_schema(tool)
    fields = set(schema.get("properties", {}))
    parameters = _route_parameters(method, path)
    expected = (set(parameters) - tool.route_only) | tool.agent_only
    body = DOC["paths"][path][method].get("requestBody")
    if body is not None:
        expected.add("spec")
    assert fields == expected, f"{tool.name} vs {method.upper()} {path}"
    for name, parameter in parameters.items():
        if name in tool.route_only:
            continue
        prop = _tool_property(schema, name)
        route_schema = parameter["schema"]
        for key in COMPARED:
            if key in route_schema or key in prop:
                if key == "type" and "enum" in route_schema:
                    continue  # an enum of strings: pydantic writes its type, OpenAPI leaves it out
                if key == "default" and key not in route_schema and prop.get(key) in ("", None):
                    continue  # no default on the route: absent, as the tool's empty default
                assert prop.get(key) == route_schema.get(key), f"{tool.name}.{name}: {key}"
        required = parameter.get("required", False) and parameter["in"] == "query"
        assert (name in schema.get("required", [])) == (required or parameter["in"] == "path")


@pytest.mark.parametrize("tool", [t for t in TOOLS if "spec" in t.input.model_fields])
def test_a_spec_is_the_body_rest_validates(tool: Any) -> None:
    method, path = tool.route
    body = DOC["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    # The document names a model both received and sent `<name>-Input` (openapi.py).
    documented = [ref["$ref"].rsplit("/", 1)[1] for ref in body["oneOf"]]
    names = [name.removesuffix("-Input") for name in documented]
    schema = input_schema(tool)
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in schema["properties"]["spec"]["oneOf"]] == names
    components = DOC["components"]["schemas"]
    for name, component in zip(names, documented, strict=True):
        # the same fields and the same required ones as the document's
        assert set(schema["$defs"][name]["properties"]) == set(components[component]["properties"])
        assert set(schema["$defs"][name].get("required", [])) == set(
            components[component].get("required", [])
        )


def test_every_tool_has_a_route_or_says_what_it_is_made_of() -> None:
    without = {t.name for t in TOOLS if t.route is None}
    assert without == {"why"}  # job + logs (+ queue for a pending job)
    assert {t.name for t in TOOLS if t.action} == {"submit", "cancel"}
