"""A job's config files as the training module reads them: `${VAR}` expanded, `--set` applied
(recorded in its snapshot, compared between jobs)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .partition import Partition

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def resolved_configs(
    command: Sequence[str], workdir: Path, partition: Partition, env: Mapping[str, str]
) -> dict[str, str]:
    """The `--config FILE` of a command as the training module will read it: `${VAR}` and
    `${VAR:-default}` expanded from the job's environment over the server's, `--set key=value`
    applied. YAML text by config path (relative to the workdir)."""
    configs: dict[str, str] = {}
    overrides: dict[str, Any] = {}
    names: list[str] = []
    items = list(command)
    for index, item in enumerate(items[:-1]):
        if item == "--config":
            names.append(items[index + 1])
        elif item == "--set" and "=" in items[index + 1]:
            key, _, value = items[index + 1].partition("=")
            overrides[key.strip()] = yaml.safe_load(value)
    variables = {**os.environ, **env}

    def expand(value: Any) -> Any:
        if isinstance(value, str):
            return _ENV.sub(lambda m: variables.get(m.group(1), m.group(2) or ""), value)
        if isinstance(value, dict):
            return {key: expand(item) for key, item in value.items()}
        if isinstance(value, list):
            return [expand(item) for item in value]
        return value

    for name in names:
        path = partition.resolve(partition.relative(workdir / name), field="command")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue  # the job reports its own config error; the snapshot keeps the file
        if isinstance(data, dict):
            data = {**expand(data), **overrides}
            configs[name] = yaml.safe_dump(data, sort_keys=False)
    return configs
