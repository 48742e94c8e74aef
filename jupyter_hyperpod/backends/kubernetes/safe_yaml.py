"""A user's manifest read safely: one document, no duplicate keys, no anchors or merge keys.

PyYAML's SafeLoader (no Python objects) with what `kubectl apply` would take silently refused:
a second document (`---`) would be a second object, a duplicate key keeps only its last value
(sigs.k8s.io/yaml errors on it since Kubernetes 1.19's strict decoding), and anchors, aliases and
merge keys (`<<`, YAML 1.1 only: not in the YAML 1.2 kubectl reads) make the text say something
else than what a reader sees; also the way to a "billion laughs" expansion. Every error names the
line. `lines` maps each field path (`spec.x[1].y`) to its line, for the checks' messages.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ...core.errors import InvalidRequest

MAX_DEPTH = 64


MAX_NODES = 20_000
"""A job manifest has a few hundred fields: more YAML events than this is not one (and the
pure-Python composer takes seconds per 100,000 nodes)."""
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it (ten times faster), the same safe constructors."""


def _screen(text: str) -> None:
    """One pass over the parser's events, before anything is built: one document, no anchor or
    alias, at most MAX_NODES events."""
    documents = 0
    for count, event in enumerate(yaml.parse(text, Loader=_LOADER)):
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise InvalidRequest(
                    f"line {line}: the file has more than one YAML document ('---'): apply "
                    "one job per file",
                    field="text",
                )
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise InvalidRequest(
                f"line {line}: YAML anchors and aliases (&name, *name) are not accepted in a "
                "job manifest: write the values out",
                field="text",
            )
        if count > MAX_NODES:
            raise InvalidRequest(
                f"line {line}: over {MAX_NODES:,} YAML nodes: this is not a job manifest",
                field="text",
            )


def load_one(text: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The one object of a manifest, and the line of each field path."""
    try:
        _screen(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise InvalidRequest(
            f"{where}not valid YAML: {error.problem or error.context}", field="text"
        ) from None
    except yaml.YAMLError as error:
        raise InvalidRequest(f"not valid YAML: {error}", field="text") from None
    loader = _LOADER(text)
    try:
        document = loader.get_single_node()
        if document is None:
            raise InvalidRequest("the manifest is empty", field="text")
        lines: dict[str, int] = {}
        obj = _build(loader, document, "", lines, 0)
    except yaml.composer.ComposerError as error:
        mark = error.problem_mark
        line = f"line {mark.line + 1}: " if mark else ""
        if "single document" in str(error):
            raise InvalidRequest(
                f"{line}the file has more than one YAML document ('---'): apply one job per file",
                field="text",
            ) from None
        raise InvalidRequest(f"{line}{error.problem}", field="text") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise InvalidRequest(
            f"{where}not valid YAML: {error.problem or error.context}", field="text"
        ) from None
    except yaml.YAMLError as error:
        raise InvalidRequest(f"not valid YAML: {error}", field="text") from None
    finally:
        loader.dispose()
    if not isinstance(obj, dict):
        raise InvalidRequest(
            "the manifest is not a YAML mapping (apiVersion, kind, metadata, spec)",
            field="text",
        )
    return obj, lines


def _build(loader: Any, node: Node, path: str, lines: dict[str, int], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise InvalidRequest(
            f"line {node.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels", field=path
        )
    lines[path] = node.start_mark.line + 1
    if isinstance(node, MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise InvalidRequest(
                    f"line {line}: YAML merge keys ('<<') are not accepted in a job manifest: "
                    "write the keys out",
                    field=path or "text",
                )
            if not isinstance(key_node, ScalarNode):
                raise InvalidRequest(f"line {line}: a key must be a plain string", field=path)
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            if key in result:
                raise InvalidRequest(
                    f"line {line}: duplicate key '{key}' (first on line {lines[child]}): "
                    "Kubernetes would keep only one of them",
                    field=child,
                )
            result[key] = _build(loader, value_node, child, lines, depth + 1)
            lines[child] = line  # a field's line is its key's
        return result
    if isinstance(node, SequenceNode):
        return [
            _build(loader, item, f"{path}[{index}]", lines, depth + 1)
            for index, item in enumerate(node.value)
        ]
    value = loader.construct_object(node)
    if not isinstance(value, (str, int, float, bool, type(None))):
        # Timestamps and binary: the API reads strings there (kubectl sends the text).
        return str(node.value)
    return value


def line_of(lines: dict[str, int], path: str) -> str:
    """`line N: ` for a field path (or its nearest parent that has a line), '' if none."""
    probe = path
    while probe:
        if probe in lines:
            return f"line {lines[probe]}: "
        cut = max(probe.rfind("."), probe.rfind("["))
        probe = probe[:cut] if cut > 0 else ""
    return ""
