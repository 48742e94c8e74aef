"""`submit`'s request body from its options: a script of the partition, a template with --set
parameters, a spec file, or a notebook cell; the same body the panel sends, checked by the core."""

from __future__ import annotations

import argparse
import hashlib
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..client import HyperPodClient
from ..core.api import HyperPodAPI
from ..core.errors import InvalidRequest
from .exits import EXIT_USAGE, CommandError
from .output import Console

CELLS_DIR = ".hyperpod/cells"


def slug(text: str, fallback: str = "job") -> str:
    """A valid job name from a file name: lowercase letters, digits and '-'."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)[:40].strip("-")
    return name or fallback


GENERIC_FIELDS = (
    "nodes",
    "procs_per_node",
    "gpus_per_node",
    "efa_per_node",
    "time_limit_minutes",
    "queue",
    "workdir",
    "image",
    "kind",
    "namespace",
    "launcher",
    "auto_resume",
    "max_retries",
    "healthy_nodes_only",
)


@dataclass
class SubmitContext:
    """Where the submitting process is: the partition (when visible here) and its directory."""

    partition: str
    """The partition as the server sees it (absolute)."""
    cwd: Path = field(default_factory=Path.cwd)

    @property
    def local_partition(self) -> Path | None:
        path = Path(self.partition)
        return path.resolve() if path.is_dir() else None

    def cwd_in_partition(self) -> str | None:
        root = self.local_partition
        if root is None:
            return None
        try:
            relative = self.cwd.resolve().relative_to(root)
        except ValueError:
            return None
        return relative.as_posix() if relative.parts else ""


def resolve_script(script: str, context: SubmitContext) -> str:
    """A script path as the partition-relative path the script template takes. Absolute paths
    must be inside the partition; a relative path not found from the partition root is looked up
    from the current directory when that is inside the partition (a notebook next to its script)."""
    root = context.local_partition
    path = Path(script)
    if path.is_absolute():
        base = root or Path(context.partition)
        try:
            return path.resolve().relative_to(base).as_posix()
        except ValueError:
            raise InvalidRequest(
                f"'{script}' is not inside your partition {context.partition}", field="script"
            ) from None
    if root is None:
        return posixpath.normpath(script)
    if (root / script).exists():
        return posixpath.normpath(script)
    here = context.cwd_in_partition()
    if here is not None and (context.cwd / script).exists():
        return posixpath.normpath(posixpath.join(here, script))
    raise InvalidRequest(f"'{script}' does not exist in your partition {root}", field="script")


def write_cell(body: str, name: str, context: SubmitContext) -> Path:
    """The cell's code as a file in the partition, named by its content (resubmitting reuses it)."""
    root = context.local_partition
    if root is None:
        raise InvalidRequest(
            f"the partition {context.partition} is not visible from this machine: save the code as a "
            "file in the partition and submit that file",
            field="script",
        )
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    path = root / CELLS_DIR / f"{name}-{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(body if body.endswith("\n") else body + "\n", encoding="utf-8")
    return path


def _generic(args: argparse.Namespace) -> dict[str, Any]:
    values = {
        name: getattr(args, name)
        for name in GENERIC_FIELDS
        if getattr(args, name, None) is not None
    }
    if args.env:
        values["env"] = dict(args.env)
    after = [job_id.strip() for item in getattr(args, "after", []) for job_id in item.split(",")]
    if any(after):
        values["after"] = [job_id for job_id in after if job_id]
    if getattr(args, "after_any", None):
        values["after_any"] = True
    return values


def _read_spec_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except OSError as error:
        raise InvalidRequest(
            f"cannot read the spec file {path}: {error.strerror or error}", field="spec"
        ) from None
    except yaml.YAMLError as error:
        raise InvalidRequest(
            f"the spec file {path} is not valid YAML/JSON: {error}", field="spec"
        ) from None
    if not isinstance(loaded, dict):
        raise InvalidRequest(f"the spec file {path} must hold a mapping (a job spec)", field="spec")
    return loaded


def misplaced_options(
    argv: Sequence[str], script_args: Sequence[str], own: frozenset[str]
) -> list[str]:
    """Our own options typed after the script: argparse hands them to the script (its
    arguments), which is rarely what was meant; none when `--` marked the rest as the script's."""
    if "--" in argv:
        return []
    found = [arg.split("=", 1)[0] for arg in script_args if arg.startswith("-")]
    return [option for option in dict.fromkeys(found) if option in own]


def check_option_order(misplaced: Sequence[str], console: Console) -> None:
    """Refuse a `--dry-run` that would go to the script (the job would really be submitted);
    say where the others went."""
    if "--dry-run" in misplaced:
        raise CommandError(
            "--dry-run came after the script, so it would go to the script and the job would "
            "really be submitted: put it before the script (submit --dry-run SCRIPT ...), or "
            "write `--` before the script's own arguments if they take --dry-run",
            EXIT_USAGE,
        )
    for option in misplaced:
        console.note(
            f"note: {option} came after the script, so the script gets it as an argument; put it "
            "before the script to set it for the job (write `--` before the script's arguments "
            "to silence this note)"
        )


def build_submission(
    args: argparse.Namespace, api: HyperPodAPI, *, cell: str | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    """The request body for `submit`: a template submission or a JobSpec, as the panel sends them."""
    generic = _generic(args)
    sets = dict(args.set)
    positional = [args.script, *args.args] if args.script else list(args.args)
    context = SubmitContext(api.cluster().filesystem.partition, cwd or Path.cwd())

    if cell is not None:
        if args.template or args.spec:
            raise CommandError(
                "a cell is submitted as a script: drop --template/--spec", EXIT_USAGE
            )
        if not cell.strip():
            raise CommandError(
                "the cell is empty: write the script to submit below %%hyperpod submit", EXIT_USAGE
            )
        name = args.name or "cell"
        if context.local_partition is None and not isinstance(api, HyperPodClient):
            # The core in this process makes its partition on the first submit; this is one.
            Path(context.partition).mkdir(parents=True, exist_ok=True)
        path = write_cell(cell, slug(name, "cell"), context)
        workdir = generic.pop("workdir", None)
        if workdir is None:
            workdir = context.cwd_in_partition() or ""
        spec = {"name": name, "command": [str(path), *positional], "workdir": workdir, **generic}
        return spec

    if args.spec:
        body = _read_spec_file(args.spec)
        if args.name:
            body["name"] = args.name
        if "template" in body and "command" not in body:
            body.setdefault("params", {}).update(sets)
            return _template_body(body, generic, api)
        if sets:
            raise CommandError(
                "--set is for templates; the spec file is a full job spec", EXIT_USAGE
            )
        return {**body, **generic, "env": {**body.get("env", {}), **generic.get("env", {})}}

    template = args.template or ("script" if args.script else None)
    if template is None:
        raise CommandError(
            "nothing to submit: give a script, --template NAME or --spec FILE", EXIT_USAGE
        )
    params: dict[str, Any] = {}
    script_rel = None
    if args.script:
        if template != "script":
            raise CommandError(
                f"the template {template} takes no script: use --set PARAM=VALUE", EXIT_USAGE
            )
        script_rel = resolve_script(args.script, context)
        params["script"] = script_rel
        params["args"] = shlex.join(args.args)
    params.update(sets)
    name = args.name or (slug(Path(script_rel).stem) if script_rel else slug(template))
    body = {"name": name, "template": template, "params": params}
    if script_rel and "workdir" in generic:
        # The script stays where it is; only the working directory moves.
        generic["command"] = [posixpath.join(context.partition, script_rel), *args.args]
    return _template_body(body, generic, api)


def _template_body(
    body: dict[str, Any], generic: dict[str, Any], api: HyperPodAPI
) -> dict[str, Any]:
    """Generic options go into the template's parameters when it has them; the others override the
    spec the template builds (rendered by the core, so that its checks apply)."""
    infos = {info.name: info for info in api.templates()}
    info = infos.get(str(body.get("template")))
    declared = {param.name: param for param in info.params} if info else {}
    params = dict(body.get("params") or {})
    overrides: dict[str, Any] = {}
    for key, value in generic.items():
        param = declared.get(key)
        if param is not None and key == "env" and param.type in ("text", "string"):
            lines = [line for line in str(params.get("env") or "").splitlines() if line.strip()]
            params[key] = "\n".join([*lines, *(f"{k}={v}" for k, v in value.items())])
        elif param is not None:
            params[key] = value
        else:
            overrides[key] = value
    body = {**body, "params": params}
    if overrides:
        # Built on the server like every entry point's (templates/spec.py), recorded for resubmit.
        body["overrides"] = {**(body.get("overrides") or {}), **overrides}
    return body
