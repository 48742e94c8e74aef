"""Property: no generated path leaves the partition, and none gets a 5xx.

Over 10,000 hostile paths (hypothesis, derandomized so that CI runs the same ones), each one
through the resolver of a shared and of a per-user partition, the listing, every template's
path-like parameters, and a job id for the logs; one in ten also through the service's render
(workdir and each template parameter, as REST calls it); 400 more through a real server in
per-user mode. The partitions hold symlinks in and out (to another user, to the file system
root, absolute, dangling, loops), a FIFO and secrets whose lines a YAML error would quote.
An escape is a resolved path or a rendered job path outside the partition, or a secret's
marker in any answer.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_hyperpod.core.errors import HyperPodError, PathNotAllowed
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.partition import Partition, confine_params
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.templates import BUILTIN_TEMPLATES

from .conftest import add, record
from .live import LiveServer

EXAMPLES = int(os.environ.get("HOSTILE_PATHS", "10000"))
SERVICE_EVERY = 20
BATCH = 8
"""Paths per hypothesis example: the engine's cost per example is larger than a check's."""
SERVER_EXAMPLES = 250
MARKER = "SECRET-MARKER"
SECRET_YAML = f"owner: bob\n{MARKER}: [one, two\n  broken: {{\n"
CONFIG = "output_dir: out\nmodel_id: model\nmax_steps: 1\n"
ROTATION = [("qlora-finetune", "config"), ("evaluate", "config"), ("script", "script")]
VALID = {"script": "data/run.py", "config": "cfg.yaml"}

COMPONENTS = [
    "..",
    ".",
    "",
    "...",
    " ..",
    ".. ",
    "data",
    "sub",
    "run.py",
    "cfg.yaml",
    "in-link",
    "abs-in",
    "out-rel",
    "out-abs",
    "out-root",
    "up",
    "loop",
    "ping",
    "dangle-out",
    "out-secret",
    "fifo",
    "bob",
    "alice",
    "shared",
    "secret.yaml",
    ".hyperpod",
    "%2e%2e",
    "..%2f..",
    "\\..",
    "..\\..",
    "~",
    "$HOME",
    "*",
    "\x00",
    "\ud800",
    "\udcff",
    "\u202e",
    "a" * 256,
    "é" * 130,
]


def _join(lead: str, parts: list[str], sep: str, trail: str) -> str:
    return lead + sep.join(parts) + trail


COMPONENT = st.one_of(st.sampled_from(COMPONENTS), st.text(max_size=10))
PATHS = st.one_of(
    st.builds(
        _join,
        st.sampled_from(["", "", "", "/", "//", "\\", "./", "~/"]),
        st.lists(COMPONENT, max_size=7),
        st.sampled_from(["/", "/", "/", "\\"]),
        st.sampled_from(["", "", "/"]),
    ),
    st.text(max_size=30),
    st.just("d/" * 2100),
)


def _plant(partition: Path, fs_root: Path, outside: Path, other: str) -> None:
    """Files, and symlinks in and out, in one partition."""
    (partition / "data" / "sub").mkdir(parents=True, exist_ok=True)
    (partition / "data" / "run.py").write_text("print('ok')\n")
    (partition / "cfg.yaml").write_text(CONFIG)
    links = {
        "in-link": "data",
        "abs-in": str(partition / "data"),
        "out-rel": f"../{other}",
        "out-abs": str(outside),
        "out-root": "/",
        "up": "..",
        "loop": "loop",
        "ping": "pong",
        "pong": "ping",
        "dangle-out": f"../{other}/not-yet",
        "out-secret": str(fs_root / "bob" / "secret.yaml"),
    }
    for name, target in links.items():
        (partition / name).symlink_to(target)
    os.mkfifo(partition / "fifo")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("world")
    fs_root = base / "fsx"
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text(SECRET_YAML)
    for name in ("shared", "alice", "bob"):
        (fs_root / name).mkdir(parents=True)
    (fs_root / "bob" / "secret.yaml").write_text(SECRET_YAML)
    (fs_root / "bob" / "notes.txt").write_text("notes of bob")
    _plant(fs_root / "shared", fs_root, outside, "alice")
    _plant(fs_root / "alice", fs_root, outside, "bob")
    services = {}
    for mode in ("shared", "user"):
        services[mode] = HyperPodService(
            HyperPodSettings(
                orchestrator="local",
                shared_fs_root=str(fs_root),
                partition=mode,
                user="alice",
                job_store=str(base / f"jobs-{mode}.sqlite"),
            )
        )
    yield {"fs_root": fs_root, "outside": outside, "services": services, "base": base}
    for service in services.values():
        service.close()


def _log_tail(service: HyperPodService, job_id: str) -> Any:
    """The service's log snapshot (named `logs` since the one-API change, `log_snapshot` before)."""
    read = getattr(service, "logs", None) or getattr(service, "log_snapshot")  # noqa: B009
    return read(job_id)


def _inside(path: str | Path, root: Path) -> bool:
    real = os.path.realpath(path)
    return os.path.commonpath([real, str(root)]) == str(root)


class Tally:
    def __init__(self, section: str) -> None:
        self.section = section
        self.escapes: list[str] = []
        self.five_xx: list[str] = []

    def outcome(self, what: str, call: Any) -> Any:
        """Run one call: a 4xx is an answer, anything else is counted (and reported)."""
        try:
            return call()
        except HyperPodError as error:
            if error.status >= 500:
                self.five_xx.append(f"{what}: {error.status} {error.message}")
            if MARKER in error.message:
                self.escapes.append(f"{what}: the message quotes a secret: {error.message}")
            add(self.section, "refused (4xx)")
            return None
        except Exception as error:
            self.five_xx.append(f"{what}: {type(error).__name__}: {error}")
            return None

    def escape(self, what: str) -> None:
        self.escapes.append(what)

    def finish(self) -> None:
        record(self.section, "escapes", len(self.escapes))
        record(self.section, "5xx", len(self.five_xx))
        assert not self.escapes, self.escapes[:5]
        assert not self.five_xx, self.five_xx[:5]


def _check_rendered(tally: Tally, what: str, root: Path, rendered: Any) -> None:
    if MARKER in rendered.text:
        tally.escape(f"{what}: the rendered job quotes a secret")
    spec = rendered.spec
    workdir = root / spec.workdir.lstrip("/")
    if not _inside(workdir, root):
        tally.escape(f"{what}: workdir {spec.workdir!r} resolves outside")
    for index, part in enumerate(spec.command):
        if part == "--set" and index + 1 < len(spec.command):
            _, _, value = spec.command[index + 1].partition("=")
            if value and not _inside(workdir / value, root):
                tally.escape(f"{what}: {spec.command[index + 1]!r} writes outside")


def _service_round(tally: Tally, service: HyperPodService, path: str) -> None:
    root = service.partition.root.resolve()
    body: dict[str, Any] = {"name": "p", "command": ["run.py"], "workdir": path}
    rendered = tally.outcome(f"render workdir={path!r}", lambda: service.render(body))
    if rendered is not None:
        _check_rendered(tally, f"workdir={path!r}", root, rendered)
    for template in BUILTIN_TEMPLATES:
        for param in template.info.params:
            if param.type != "path":
                continue
            params = {
                p.name: VALID[p.name]
                for p in template.info.params
                if p.required and p.name in VALID
            }
            params[param.name] = path
            body = {"name": "p", "template": template.info.name, "params": params}
            what = f"{template.info.name}.{param.name}={path!r}"
            rendered = tally.outcome(what, lambda body=body: service.render(body))
            if rendered is not None:
                _check_rendered(tally, what, root, rendered)


@pytest.mark.slow
def test_ten_thousand_hostile_paths_never_escape(world: dict[str, Any]) -> None:
    tally = Tally("paths (resolver + service)")
    partitions = {
        mode: (service, Partition(service.partition.root))
        for mode, service in world["services"].items()
    }
    count = {"examples": 0}
    started = time.monotonic()

    @settings(
        max_examples=EXAMPLES // BATCH,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(paths=st.lists(PATHS, min_size=BATCH, max_size=BATCH))
    def check(paths: list[str]) -> None:
        for path in paths:
            one(path)

    def one(path: str) -> None:
        number = count["examples"]
        count["examples"] += 1
        for mode, (_, partition) in partitions.items():
            root = partition.root.resolve()
            add(tally.section, "resolved (both partitions)")
            resolved = tally.outcome(
                f"resolve {path!r}", lambda partition=partition: partition.resolve(path)
            )
            if resolved is not None and not _inside(resolved, root):
                tally.escape(f"{mode}: {path!r} -> {resolved}")
            if resolved is not None and resolved.is_dir():
                add(tally.section, "listed")
                listing = tally.outcome(
                    f"list {path!r}", lambda partition=partition: partition.listing(path)
                )
                if listing is not None and not _inside(root / listing.path, root):
                    tally.escape(f"{mode}: listing of {path!r} is {listing.path}")
        # The same path as every template's path parameters and as a job id, in one partition
        # (alternately): the resolver's work is the same, the code paths are the templates'.
        mode = "shared" if number % 2 == 0 else "user"
        service, partition = partitions[mode]
        root = partition.root.resolve()
        for template in BUILTIN_TEMPLATES:
            declared = template.info.params
            values = {p.name: path for p in declared if p.type == "path"}
            add(tally.section, "template path parameters", len(values))
            tally.outcome(
                f"{template.info.name} params {path!r}",
                lambda declared=declared, values=values: confine_params(root, declared, values),
            )
        if number % 4 == 0:
            add(tally.section, "log requests")
            tally.outcome(f"logs of {path!r}", lambda: _log_tail(service, path))
        if number % SERVICE_EVERY == 0:
            add(tally.section, "service rounds (render: workdir + each path parameter)")
            _service_round(tally, service, path)

    check()
    record(tally.section, "paths", count["examples"])
    record(tally.section, "seconds", round(time.monotonic() - started, 1))
    assert count["examples"] >= EXAMPLES
    tally.finish()


def test_a_log_redirected_by_a_planted_symlink_is_refused(world: dict[str, Any]) -> None:
    """A finished job's log file, then its whole job directory, replaced by symlinks out."""
    fs_root: Path = world["fs_root"]
    for mode, service in world["services"].items():
        job = service.submit({"name": "log", "command": ["run.py"], "workdir": "data"})
        deadline = time.monotonic() + 30
        while service.job(job.id).state != JobState.SUCCEEDED:
            assert time.monotonic() < deadline, service.job(job.id)
            time.sleep(0.05)
        assert "ok" in _log_tail(service, job.id).text
        job_dir = service.partition.root / ".hyperpod" / "jobs" / job.id
        log = job_dir / "rank-0.log"
        log.unlink()
        log.symlink_to(fs_root / "bob" / "secret.yaml")
        with pytest.raises(PathNotAllowed) as caught:
            _log_tail(service, job.id)
        assert MARKER not in caught.value.message
        moved = job_dir.with_name(job.id + ".moved")
        job_dir.rename(moved)
        decoy = fs_root / "bob" / f"decoy-{mode}"
        decoy.mkdir()
        (decoy / "rank-0.log").write_text(SECRET_YAML)
        job_dir.symlink_to(decoy)
        with pytest.raises(PathNotAllowed):
            _log_tail(service, job.id)
        add("logs", "planted symlinks refused", 2)


@pytest.fixture(scope="module")
def user_server(world: dict[str, Any]) -> Iterator[LiveServer]:
    base: Path = world["base"]
    server = LiveServer(
        base / "live",
        {
            "orchestrator": "local",
            "shared_fs_root": str(world["fs_root"]),
            "partition": "user",
            "user": "alice",
            "job_store": str(base / "live-jobs.sqlite"),
        },
    ).start()
    yield server
    server.stop()


@pytest.mark.slow
def test_hostile_paths_through_the_real_server(user_server: LiveServer) -> None:
    tally = Tally("paths (real server, per-user partition)")
    count = {"requests": 0, "examples": 0}

    def call(method: str, route: str, body: Any = None) -> tuple[int, Any]:
        count["requests"] += 1
        status, answer, _ = user_server.request(method, route, body)
        text = str(answer)
        if status >= 500:
            tally.five_xx.append(f"{method} {route} {body!r}: {status} {text[:200]}")
        elif status >= 400 and not (
            isinstance(answer, dict) and set(answer.get("error", {})) >= {"code", "message"}
        ):
            tally.five_xx.append(f"{method} {route}: {status} without the JSON error: {text}")
        if MARKER in text or "notes of bob" in text:
            tally.escape(f"{method} {route} {body!r}: another user's data in {text[:200]}")
        return status, answer

    @settings(
        max_examples=SERVER_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(path=PATHS)
    def check(path: str) -> None:
        quoted = re.sub(
            r"[^A-Za-z0-9_.~-]",
            lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")),
            path,
        )
        status, answer = call("GET", f"files?path={quoted}")
        if status == 200 and str(answer.get("path", "")).startswith(("..", "/")):
            tally.escape(f"listing of {path!r} answered path {answer['path']!r}")
        if status == 200 and {e["name"] for e in answer["entries"]} & {"secret.yaml", "notes.txt"}:
            tally.escape(f"listing of {path!r} shows bob's files")
        status, answer = call("GET", f"files/text?path={quoted}")  # the agents' read_file
        if status == 200 and "bob" in str(answer.get("text", "")):
            tally.escape(f"files/text of {path!r} read bob's file")
        call("POST", "jobs/render", {"name": "p", "command": ["run.py"], "workdir": path})
        count["examples"] += 1
        template, param = ROTATION[count["examples"] % len(ROTATION)]
        call("POST", "jobs/render", {"name": "p", "template": template, "params": {param: path}})
        call("GET", f"jobs/{quoted}/logs")
        call(
            "POST",
            "jobs/render",
            {
                "name": "p",
                "template": "qlora-finetune",
                "params": {"config": "cfg.yaml", "output_dir": path, "dataset": path},
            },
        )

    check()
    record(tally.section, "requests", count["requests"])
    tally.finish()
