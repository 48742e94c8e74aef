"""The import layering of docs/architecture.md, read from the source with `ast` (no import runs):

- no import circle among jupyter_hyperpod modules, counting imports inside functions too
  (imports under `if TYPE_CHECKING:` are for the type checker only and do not count);
- `core` is the ground: its modules import nothing of jupyter_hyperpod outside `core`, not even
  lazily inside a function, not even data (what the ground shares lives in it, as
  `core/gpu_models.py`), the service included: it is given its adapters by the composition root
  (`wiring.py`, through the protocols of `core/adapters.py`);
- the adapters (backends, templates, aws, gpu, metrics, progress) never import the service or
  an entry point; the REST client imports only `core`; nothing imports the CLI but the CLI and
  the magics (so `doctor` does not);
- no module reads a private name (`x._name`) that another module's objects or classes define:
  helpers are given their collaborators and call what those publish.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_hyperpod"
ROOT = "jupyter_hyperpod"
GENERATED_VERSION = f"{ROOT}._version"  # written by the build (hatchling's version hook)

ENTRY_POINTS = (
    "jupyter_hyperpod.app",
    "jupyter_hyperpod.handlers",
    "jupyter_hyperpod.queue_handlers",
    "jupyter_hyperpod.openapi",
    "jupyter_hyperpod.cli",
    "jupyter_hyperpod.magics",
    "jupyter_hyperpod.doctor",
    "jupyter_hyperpod.render",
    "jupyter_hyperpod.demo",
    "jupyter_hyperpod.admin.cli",
    "jupyter_hyperpod.admin.__main__",
    "jupyter_hyperpod.aws.__main__",
    "jupyter_hyperpod.wiring",  # the composition root: builds the adapters the service is given
)
ADAPTERS = (
    "jupyter_hyperpod.backends",
    "jupyter_hyperpod.templates",
    "jupyter_hyperpod.aws",
    "jupyter_hyperpod.gpu",
    "jupyter_hyperpod.metrics",
    "jupyter_hyperpod.progress",
    "jupyter_hyperpod.admin",
)
CLI_USERS = {"jupyter_hyperpod.magics", "jupyter_hyperpod.aws.__main__"}
"""Besides the CLI itself: the magics (the same verbs) and `python -m jupyter_hyperpod.aws
connect`, which is `jupyter hyperpod connect`."""
SERVICE = "jupyter_hyperpod.core.service"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "labextension" in path.parts or "__pycache__" in path.parts:
            continue
        found[module_name(path)] = path
    return found


def _imports(tree: ast.Module, *, lazy: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run on import (lazy: also those inside functions)."""

    def visit(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from visit(node.orelse)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
                continue
            if not lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from visit([c for c in children if isinstance(c, ast.stmt)])
                    for handler in children:
                        if isinstance(handler, ast.ExceptHandler):
                            yield from visit(handler.body)

    yield from visit(tree.body)


def _known(name: str) -> str | None:
    """The jupyter_hyperpod module a dotted name refers to (a module, or its package)."""
    while name:
        if name in modules():
            return name
        name = name.rpartition(".")[0]
    return None


@cache
def graph(lazy: bool = True) -> dict[str, frozenset[str]]:
    """module -> the jupyter_hyperpod modules it imports (lazy: counting function-level ones)."""
    edges: dict[str, frozenset[str]] = {}
    for name, path in modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), lazy=lazy):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                # `from pkg import mod` imports the submodule; `from mod import name` the module.
                candidates = [
                    f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules() else origin
                    for alias in node.names
                ]
            for candidate in candidates:
                if candidate == GENERATED_VERSION:
                    continue  # a leaf importing nothing, absent from a clone never built
                target = _known(candidate) if candidate.startswith(ROOT) else None
                if target and target != name:
                    targets.add(target)
        edges[name] = frozenset(targets)
    return edges


def inside(module: str, prefixes: tuple[str, ...] | set[str] | str) -> bool:
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(edges: dict[str, frozenset[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            edge = f"{module} -> {target}"
            if inside(module, "jupyter_hyperpod.core") and not inside(
                target, "jupyter_hyperpod.core"
            ):
                if inside(target, ENTRY_POINTS) or inside(target, "jupyter_hyperpod.client"):
                    problems.append(f"core imports an entry point: {edge}")
                else:
                    problems.append(f"core imports upward: {edge}")
            if (
                inside(module, ADAPTERS)
                and not inside(module, ENTRY_POINTS)
                and (
                    target == SERVICE
                    or inside(target, ENTRY_POINTS)
                    or inside(target, "jupyter_hyperpod.client")
                )
            ):
                problems.append(f"an adapter imports the service or an entry point: {edge}")
            if module == "jupyter_hyperpod.client" and not inside(target, "jupyter_hyperpod.core"):
                problems.append(f"the REST client imports more than core: {edge}")
            if (
                inside(target, "jupyter_hyperpod.cli")
                and not inside(module, "jupyter_hyperpod.cli")
                and module not in CLI_USERS
            ):
                problems.append(f"only the CLI and the magics use the CLI: {edge}")
    return problems


def test_no_import_circle() -> None:
    """Counting function-level imports too: a lazy import back is the same dependency as a
    module-level one, only hidden from the import system (and from a reader of the header)."""
    assert cycles(graph(lazy=False)) == []
    assert cycles(graph(lazy=True)) == []


def test_core_is_the_ground_and_layers_point_down() -> None:
    assert violations(graph()) == []


def test_the_service_imports_only_core() -> None:
    """Not even an adapter's data at run time: the service is given its adapters."""
    assert {t for t in graph()[SERVICE] if not inside(t, "jupyter_hyperpod.core")} == set()


def test_the_checks_catch_what_they_should() -> None:
    """The rules fail on the mistakes they exist for (a check that cannot fail checks nothing)."""
    edges = dict(graph())
    edges["jupyter_hyperpod.core.models"] = edges["jupyter_hyperpod.core.models"] | {
        "jupyter_hyperpod.templates"
    }
    edges[SERVICE] = edges[SERVICE] | {"jupyter_hyperpod.handlers", "jupyter_hyperpod.gpu"}
    edges["jupyter_hyperpod.doctor"] = edges["jupyter_hyperpod.doctor"] | {"jupyter_hyperpod.cli"}
    # No data-only exception: a models module beside an adapter, importing only core, is still
    # outside the ground (the GPU models were such a module: they moved to core/gpu_models.py).
    edges["jupyter_hyperpod.gpu.models"] = frozenset({"jupyter_hyperpod.core.errors"})
    edges["jupyter_hyperpod.core.api"] = edges["jupyter_hyperpod.core.api"] | {
        "jupyter_hyperpod.gpu.models"
    }
    edges["jupyter_hyperpod.client"] = edges["jupyter_hyperpod.client"] | {
        "jupyter_hyperpod.gpu.models"
    }
    found = violations(edges)
    assert "core imports upward: jupyter_hyperpod.core.api -> jupyter_hyperpod.gpu.models" in found
    assert (
        "the REST client imports more than core: jupyter_hyperpod.client -> "
        "jupyter_hyperpod.gpu.models" in found
    )
    assert (
        "core imports upward: jupyter_hyperpod.core.models -> jupyter_hyperpod.templates" in found
    )
    assert any("core imports an entry point" in p and "handlers" in p for p in found)
    assert f"core imports upward: {SERVICE} -> jupyter_hyperpod.gpu" in found
    assert any("only the CLI and the magics" in p and "doctor" in p for p in found)
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}) == [
        ["a", "b", "c"]
    ]
    # The real graph is read: the CLI's verbs import the API protocol, the service its store.
    assert "jupyter_hyperpod.core.api" in graph()["jupyter_hyperpod.cli.verbs"]
    assert "jupyter_hyperpod.core.store" in graph()[SERVICE]
    assert "jupyter_hyperpod.core.gpu_models" in graph()["jupyter_hyperpod.core.backend"]


def test_the_default_composition_root_is_named_right() -> None:
    """The service without adapters finds them by an import string: one that names a module of
    the package (outside core) and a class that meets the protocol."""
    from jupyter_hyperpod.core.adapters import DEFAULT_ADAPTERS, default_adapters

    module, _, name = DEFAULT_ADAPTERS.partition(":")
    assert module in modules() and not inside(module, "jupyter_hyperpod.core")
    adapters = default_adapters()
    assert type(adapters).__name__ == name and adapters.progress.tail_lines > 0


BACKEND_KINDS = ("local", "slurm", "kubernetes")


def kind_branches(source: str) -> list[int]:
    """Lines that compare something with a backend's kind (`x.kind == "slurm"`, `kind != "local"`,
    `kind in ("slurm", ...)`): what only the backend should know, asked by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        names = [node.left, *node.comparators]
        literals = {
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        named_kind = any(
            (isinstance(n, ast.Name) and n.id == "kind")
            or (isinstance(n, ast.Attribute) and n.attr == "kind")
            for n in names
        )
        if named_kind and literals & set(BACKEND_KINDS):
            found.append(node.lineno)
    return found


def test_only_the_backends_branch_on_a_backends_kind() -> None:
    """#26: what a backend knows (its GPU placement, where its jobs run, its Python, AWS) is asked
    of it, never decided elsewhere from its name (third-party backends have other names)."""
    allowed = ("jupyter_hyperpod.backends", "jupyter_hyperpod.core.registry")
    found = [
        f"{name}:{line}"
        for name, path in modules().items()
        if not inside(name, allowed)
        for line in kind_branches(path.read_text())
    ]
    assert found == []
    assert kind_branches('if orchestrator.kind == "slurm": pass') == [1]
    assert kind_branches('ok = kind in ("local", "kubernetes")') == [1]
    assert kind_branches('if action.kind == "mkdir": pass') == []


@cache
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _member_privates(tree: ast.Module) -> set[str]:
    """The private names a module gives its objects: `self._x = ...`/`cls._x = ...` anywhere,
    and the `_x` attributes and methods of its classes' bodies."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
            and _private(node.attr)
        ):
            names.add(node.attr)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    targets = [item.name]
                elif isinstance(item, ast.Assign):
                    targets = [t.id for t in item.targets if isinstance(t, ast.Name)]
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    targets = [item.target.id]
                else:
                    targets = []
                names.update(t for t in targets if _private(t))
    return names


def _module_privates(tree: ast.Module) -> set[str]:
    """The private names at a module's top level (`_helper`, `_CACHE`)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if _private(name)}


def _module_aliases(name: str, path: Path, tree: ast.Module) -> dict[str, str]:
    """Local names bound to jupyter_hyperpod modules (`from . import jobs as slurm_jobs`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            origin = (
                ".".join([*base, *([node.module] if node.module else [])])
                if node.level
                else node.module or ""
            )
            for alias in node.names:
                if f"{origin}.{alias.name}" in modules():
                    aliases[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules():
                    aliases[alias.asname] = alias.name
    return aliases


def private_reach_ins(sources: dict[str, str]) -> list[str]:
    """`x._name` read in one module where `_name` is a private of another jupyter_hyperpod module
    (an attribute its objects set or its classes define, or a top-level name read through the
    module), never on `self`, `cls` or `super()`. A `backend._x`/`orchestrator._x` is flagged
    outside the module of an Orchestrator class that defines `_x`, whatever defines it elsewhere.
    Third-party privates (argparse's, tornado's, torch's) are not the package's and pass."""
    trees = {name: _parse(source) for name, source in sources.items()}
    members = {name: _member_privates(tree) for name, tree in trees.items()}
    tops = {name: _module_privates(tree) for name, tree in trees.items()}
    orchestrator_modules = {
        name
        for name, tree in trees.items()
        if any(
            isinstance(node, ast.ClassDef)
            and any("Orchestrator" in ast.unparse(base) for base in node.bases)
            for node in ast.walk(tree)
        )
    }
    found = []
    for name, tree in trees.items():
        path = modules().get(name, PACKAGE / "x.py")
        aliases = _module_aliases(name, path, tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            where = f"{name}:{node.lineno}: {ast.unparse(node)}"
            held = ast.unparse(owner).rpartition(".")[2]
            if held in ("backend", "orchestrator") or held.endswith(("_backend", "_orchestrator")):
                if name not in orchestrator_modules or node.attr not in members[name]:
                    found.append(where)
                continue
            if isinstance(owner, ast.Name) and owner.id in aliases:
                if node.attr in tops.get(aliases[owner.id], set()):
                    found.append(where)
                continue
            if node.attr in members[name]:
                continue  # the module's own objects (another instance of its class)
            if any(node.attr in names for other, names in members.items() if other != name):
                found.append(where)
    return sorted(found)


def package_sources() -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in modules().items()}


def test_no_module_reads_another_modules_private_names() -> None:
    """#26 item 1: a helper is given its collaborators and calls what they publish; it never
    reaches into the orchestrator (or any object of another module) for a `_name`."""
    assert private_reach_ins(package_sources()) == []


def test_the_private_name_check_catches_reach_ins() -> None:
    """The reach-ins #26 found (kubernetes/queue.py paging through the backend's `_list_all`,
    diagnose starting `orchestrator._cache`, slurm/queue.py calling `_know_controller`) fail."""
    sources = package_sources()
    queue = "jupyter_hyperpod.backends.kubernetes.queue"
    sources[queue] += (
        "\n\ndef planted(backend, kube):\n"
        "    backend._list_all('x', kube.core.list_namespace)\n"
        "    return kube._api_client\n"
    )
    sources["jupyter_hyperpod.backends.slurm.queue"] += (
        "\n\ndef planted(backend):\n    backend._know_controller()\n"
    )
    sources["jupyter_hyperpod.backends.kubernetes.diagnose"] += (
        "\n\ndef planted(orchestrator):\n    orchestrator._cache.start()\n"
    )
    found = private_reach_ins(sources)
    assert any(f.startswith(f"{queue}:") and "backend._list_all" in f for f in found)
    assert any(f.startswith(f"{queue}:") and "kube._api_client" in f for f in found)
    assert any("slurm.queue" in f and "backend._know_controller" in f for f in found)
    assert any("diagnose" in f and "orchestrator._cache" in f for f in found)
    assert len(found) == 4
    # Inside the class's own module, another instance's private is its own business.
    assert private_reach_ins({"m": "class A:\n    def f(self, o):\n        self._x = o._x\n"}) == []
