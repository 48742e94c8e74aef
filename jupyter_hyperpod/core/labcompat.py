"""Whether the panel works in the JupyterLab installed where the core runs (`doctor`'s
"JupyterLab" check).

The panel asks JupyterLab for the versions in its built `package.json` (`dependencies`, at the
support floor: `^4.0.0` for `@jupyterlab/application`, whose version is JupyterLab's); JupyterLab
itself checks the same ranges (`jupyter labextension list` says `enabled OK` or `X`). Everything
is read from files and package metadata, not imported, and every path can be given (tests).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .api import DiagnosticCheck

EXTENSION = "jupyter-hyperpod"
APPLICATION = "@jupyterlab/application"
SOURCE_BUILD = Path(__file__).resolve().parent.parent / "labextension"
FIX_VERSION = (
    "pip install 'jupyterlab>=4.0,<5' (in Studio: a SageMaker Distribution image 1.0 or newer)"
)
CARET = re.compile(r"^\^(\d+)\.(\d+)\.(\d+)$")


def built_packages() -> list[Path]:
    """The panel's built `package.json` files, first wins: in the data paths' `labextensions`
    (as `jupyter labextension list` reads them), then this checkout's own build."""
    from jupyter_core.paths import jupyter_path

    found = [Path(p) / EXTENSION / "package.json" for p in jupyter_path("labextensions")]
    return [*found, SOURCE_BUILD / "package.json"]


def _built_package(paths: Sequence[Path]) -> tuple[Path, dict[str, object]] | None:
    for candidate in paths:
        if candidate.is_file():
            return candidate, json.loads(candidate.read_text())
    return None


def caret_allows(spec: str, version: Version) -> bool:
    """npm's `^X.Y.Z` (X > 0): at least X.Y.Z, below X+1 (prereleases of X.Y.Z excluded)."""
    match = CARET.match(spec.strip())
    if match is None:
        raise ValueError(f"not a caret range: {spec!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return Version(f"{major}.{minor}.{patch}") <= version < Version(f"{major + 1}")


def _installed_jupyterlab() -> str | None:
    try:
        return importlib.metadata.version("jupyterlab")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_jupyterlab(
    jupyterlab: Callable[[], str | None] = _installed_jupyterlab,
    packages: Callable[[], Sequence[Path]] = built_packages,
) -> DiagnosticCheck:
    """pass: this JupyterLab is in the panel's range; fail: it is not, with the upgrade;
    warn: no JupyterLab, or no built panel, here."""
    name = "JupyterLab"
    where = sys.prefix
    found = jupyterlab()
    if found is None:
        return DiagnosticCheck(
            name=name,
            status="warn",
            detail=f"no JupyterLab installed in {where}: the API works, the panel needs JupyterLab 4",
            fix=FIX_VERSION,
        )
    built = _built_package(packages())
    if built is None:
        return DiagnosticCheck(
            name=name,
            status="warn",
            detail=f"JupyterLab {found}, but the panel ({EXTENSION}) is not installed in {where}",
            fix="pip install jupyter-hyperpod (the wheel carries the panel), or `jlpm build` in a checkout",
        )
    path, package = built
    dependencies = package.get("dependencies")
    spec = dependencies.get(APPLICATION) if isinstance(dependencies, dict) else None
    if not isinstance(spec, str):
        return DiagnosticCheck(
            name=name, status="warn", detail=f"{path} names no {APPLICATION} range", fix=""
        )
    try:
        allowed = caret_allows(spec, Version(found))
    except (InvalidVersion, ValueError) as error:
        return DiagnosticCheck(
            name=name,
            status="warn",
            detail=f"JupyterLab {found}, panel range {spec}: cannot compare ({error})",
            fix="",
        )
    panel = f"the panel ({EXTENSION} {package.get('version', '?')}) supports JupyterLab {spec}"
    if allowed:
        return DiagnosticCheck(
            name=name, status="pass", detail=f"JupyterLab {found}: {panel}", fix=""
        )
    return DiagnosticCheck(
        name=name,
        status="fail",
        detail=f"JupyterLab {found} is outside the panel's range: {panel}; the panel will not load",
        fix=FIX_VERSION,
    )
