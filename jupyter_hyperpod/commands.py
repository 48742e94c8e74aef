"""The verbs of `%hyperpod` and `jupyter hyperpod`: one argument parser and one set of actions for
both, over a session that is either the REST client (a Jupyter server runs) or the in-process core
(`HyperPodService`, same configuration files). Same `JobSpec`, templates and error messages as the
panel, because all three end in the core's `spec_from_body`.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import posixpath
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol, TextIO

import yaml

from .client import HyperPodClient, LogEvent, RankArg, find_server
from .core.errors import (
    BackendUnavailable,
    Forbidden,
    HyperPodError,
    InvalidRequest,
    NotFound,
    PathNotAllowed,
)
from .core.models import (
    ClusterInfo,
    FileListing,
    Job,
    JobList,
    JobState,
    LogSnapshot,
    Node,
    Rendered,
    TemplateInfo,
)
from .render import (
    FileResults,
    JobResults,
    LogText,
    Message,
    NodeResults,
    RichCluster,
    RichJob,
    RichRendered,
    Table,
    TemplateDetail,
    TemplateResults,
    to_jsonable,
)

# Exit codes of `jupyter hyperpod` (the magics raise instead).
EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_FORBIDDEN = 5
EXIT_ERROR = 6
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0   ok
  1   the job failed or was cancelled (when waiting or following it); doctor: a check failed
  2   usage error: bad options or a request the core refused (the message names the field)
  3   not found (job, template, path)
  4   the Jupyter server, the cluster or AWS cannot be reached right now
  5   not allowed (token, permissions, a path outside the partition)
  6   other error reported by the cluster
  124 timed out waiting
  130 interrupted (the job keeps running)"""

CELLS_DIR = ".hyperpod/cells"


class CommandError(Exception):
    """A failed command: its message for a person and the CLI's exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class HelpShown(Exception):
    """argparse printed help (or the version): nothing else to do."""


def exit_code_for(error: HyperPodError) -> int:
    if isinstance(error, InvalidRequest):
        return EXIT_USAGE
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, BackendUnavailable):
        return EXIT_UNAVAILABLE
    if isinstance(error, (Forbidden, PathNotAllowed)):
        return EXIT_FORBIDDEN
    return EXIT_ERROR


def command_error(error: HyperPodError) -> CommandError:
    message = error.message
    if error.field and error.field.startswith("params.") and "--set" not in message:
        message += f" (--set {error.field.removeprefix('params.')}=VALUE)"
    return CommandError(message, exit_code_for(error))


# -- the parser --------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """Raises instead of exiting, so that a magic never ends the kernel."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(
            f"{self.format_usage().strip()}\n{self.prog}: error: {message}", EXIT_USAGE
        )

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        if status:
            raise CommandError(message or "error", EXIT_USAGE)
        raise HelpShown()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' cannot be negative")
    return value


def _rank(text: str) -> RankArg:
    if text == "all":
        return "all"
    return _positive(text)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=VALUE")
    return key.strip(), value


def _common() -> Parser:
    """Options every verb takes (also before the verb)."""
    default = argparse.SUPPRESS
    parser = Parser(add_help=False)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--url",
        default=default,
        help="Jupyter server URL (default: $JUPYTER_HYPERPOD_URL, "
        "else the server this runs under, else none: the core runs in this process)",
    )
    group.add_argument(
        "--token", default=default, help="its token (default: $JUPYTER_TOKEN or the server's)"
    )
    group.add_argument(
        "--direct",
        action="store_true",
        default=default,
        help="run the core in this process with the Jupyter configuration files, even if a server runs",
    )
    group.add_argument(
        "--json", action="store_true", default=default, help="print the result as JSON"
    )
    return parser


def build_parser(prog: str = "jupyter hyperpod") -> Parser:
    common = _common()
    parser = Parser(
        prog=prog,
        description="Drive the training cluster (HyperPod EKS/Slurm, Slurm, or this machine) from a terminal or a notebook.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common()],
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    verbs.required = True

    def verb(name: str, help_text: str, **kwargs: Any) -> Parser:
        return verbs.add_parser(
            name, help=help_text, description=help_text, parents=[common], **kwargs
        )  # type: ignore[no-any-return]

    verb("cluster", "the cluster, the user and the partition")
    verb("nodes", "nodes with their state, health and free GPUs")

    jobs = verb("jobs", "your jobs, newest first")
    jobs.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only these states (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED); repeat or comma-separate",
    )
    jobs.add_argument("--limit", type=_positive, default=20, help="how many (default 20)")
    jobs.add_argument("--offset", type=_positive, default=0)

    submit = verb(
        "submit",
        "submit a script from the partition, a template or a job spec file",
        epilog="examples:\n"
        "  submit --nodes 2 --gpus-per-node 1 project/train.py --config args.yaml\n"
        "  submit --template qlora-finetune --set lora_r=16 --name ft1\n"
        "  submit --spec job.yaml --dry-run\n"
        "the script path is relative to your partition (or absolute inside it); the job runs in its directory.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument("script", nargs="?", help="script or program in the partition")
    submit.add_argument(
        "args", nargs=argparse.REMAINDER, help="its arguments (everything after the script)"
    )
    submit.add_argument("-t", "--template", help="submit a template (see `templates`)")
    submit.add_argument(
        "--set",
        dest="set",
        action="append",
        default=[],
        type=_key_value,
        metavar="PARAM=VALUE",
        help="a template parameter (repeat)",
    )
    submit.add_argument(
        "--spec", metavar="FILE", help="a JobSpec (or {name, template, params}) as YAML or JSON"
    )
    submit.add_argument("-n", "--name", help="job name (default: from the script or template)")
    resources = submit.add_argument_group("resources")
    resources.add_argument("--nodes", type=_positive)
    resources.add_argument(
        "--procs-per-node",
        "--nproc-per-node",
        dest="procs_per_node",
        type=_positive,
        help="processes (ranks) per node",
    )
    resources.add_argument("--gpus-per-node", type=_positive)
    resources.add_argument("--efa-per-node", type=_positive)
    resources.add_argument(
        "--time-limit", dest="time_limit_minutes", type=_positive, metavar="MINUTES"
    )
    resources.add_argument("--queue", help="Slurm partition or Kubernetes queue")
    advanced = submit.add_argument_group("advanced")
    advanced.add_argument(
        "-e", "--env", action="append", default=[], type=_key_value, metavar="NAME=VALUE"
    )
    advanced.add_argument(
        "--workdir", help="working directory in the partition (default: the script's)"
    )
    advanced.add_argument("--image", help="container image (Kubernetes)")
    advanced.add_argument("--kind", help="PyTorchJob or HyperPodPyTorchJob (Kubernetes)")
    advanced.add_argument("--namespace", help="Kubernetes namespace")
    advanced.add_argument("--launcher", choices=["auto", "torchrun", "plain"])
    advanced.add_argument(
        "--auto-resume", action="store_true", default=None, help="restart on node failure"
    )
    advanced.add_argument("--max-retries", type=_positive)
    advanced.add_argument("--healthy-nodes-only", action="store_true", default=None)
    after = submit.add_argument_group("after submitting")
    after.add_argument(
        "--dry-run", action="store_true", help="print what would be submitted, submit nothing"
    )
    after.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait until the job ends (exit code 1 if it fails)",
    )
    after.add_argument(
        "-f", "--follow", action="store_true", help="follow rank 0's log until the job ends"
    )
    after.add_argument("--timeout", type=float, help="seconds to wait at most")

    status = verb("status", "a job's state and ranks (without JOB: the cluster)")
    status.add_argument("job", nargs="?")
    status.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait until the job ends (exit code 1 if it fails)",
    )
    status.add_argument("--timeout", type=float, help="seconds to wait at most")

    wait = verb("wait", "wait until a job ends (exit code 1 if it failed)")
    wait.add_argument("job")
    wait.add_argument("--timeout", type=float, help="seconds to wait at most")

    logs = verb("logs", "a job's log (the last lines, or follow it live with -f)")
    logs.add_argument("job")
    logs.add_argument(
        "-r", "--rank", type=_rank, default=0, help="rank number or 'all' (default 0)"
    )
    logs.add_argument(
        "--tail", type=_positive, default=200, help="lines to show first (default 200)"
    )
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow until the job ends; interrupting stops following, never the job",
    )

    cancel = verb("cancel", "cancel jobs")
    cancel.add_argument("jobs", nargs="+", metavar="JOB")

    files = verb("files", "list a directory of your partition")
    files.add_argument("path", nargs="?", default="")
    files.add_argument(
        "--sort", default="name", choices=["name", "-name", "size", "-size", "mtime", "-mtime"]
    )
    files.add_argument("--limit", type=_positive, default=200)
    files.add_argument("--offset", type=_positive, default=0)

    templates = verb("templates", "job templates (with NAME: its parameters)")
    templates.add_argument("name", nargs="?")

    connect = verb(
        "connect",
        "write a kubeconfig context for a HyperPod EKS cluster (without CLUSTER: list clusters)",
    )
    connect.add_argument("cluster", nargs="?", help="HyperPod cluster name or ARN")
    connect.add_argument("--region")
    connect.add_argument("--profile", help="AWS profile")
    connect.add_argument(
        "--kubeconfig", help="file to write (default: $KUBECONFIG or ~/.kube/config)"
    )
    connect.add_argument("--namespace", help="default namespace of the context")
    connect.add_argument(
        "--auth",
        choices=["exec", "token"],
        default="exec",
        help="exec: refresh tokens with `python -m jupyter_hyperpod.aws token` (default); "
        "token: write a 15-minute token",
    )

    verb("doctor", "check that this machine can act as the cluster's login node")
    return parser


# -- sessions ----------------------------------------------------------------------------------------


class Session(Protocol):
    """What the verbs need from a cluster: the REST client or the core in this process."""

    description: str

    def cluster(self) -> ClusterInfo: ...
    def nodes(self) -> list[Node]: ...
    def files(self, path: str, offset: int, limit: int, sort: str) -> FileListing: ...
    def templates(self) -> list[TemplateInfo]: ...
    def render(self, body: dict[str, Any]) -> Rendered: ...
    def submit(self, body: dict[str, Any]) -> Job: ...
    def jobs(self, states: list[JobState] | None, limit: int, offset: int) -> JobList: ...
    def job(self, job_id: str) -> Job: ...
    def cancel(self, job_id: str) -> Job: ...
    def log_snapshot(self, job_id: str, rank: int, tail: int) -> LogSnapshot: ...
    def follow(
        self, job_id: str, rank: RankArg, offsets: Mapping[int, int]
    ) -> Iterator[LogEvent]: ...
    def partition_path(self) -> str: ...
    def close(self) -> None: ...


class ClientSession:
    def __init__(self, client: HyperPodClient, source: str = "") -> None:
        self.client = client
        self.description = f"Jupyter server {client.url}" + (f" ({source})" if source else "")

    def cluster(self) -> ClusterInfo:
        return self.client.cluster()

    def nodes(self) -> list[Node]:
        return self.client.nodes()

    def files(self, path: str, offset: int, limit: int, sort: str) -> FileListing:
        return self.client.files(path, offset=offset, limit=limit, sort=sort)

    def templates(self) -> list[TemplateInfo]:
        return self.client.templates()

    def render(self, body: dict[str, Any]) -> Rendered:
        return self.client.render(body)

    def submit(self, body: dict[str, Any]) -> Job:
        return self.client.submit(body)

    def jobs(self, states: list[JobState] | None, limit: int, offset: int) -> JobList:
        return self.client.jobs(state=list(states or []), limit=limit, offset=offset)

    def job(self, job_id: str) -> Job:
        return self.client.job(job_id)

    def cancel(self, job_id: str) -> Job:
        return self.client.cancel(job_id)

    def log_snapshot(self, job_id: str, rank: int, tail: int) -> LogSnapshot:
        return self.client.log_snapshot(job_id, rank=rank, tail=tail)

    def follow(self, job_id: str, rank: RankArg, offsets: Mapping[int, int]) -> Iterator[LogEvent]:
        return self.client.follow(job_id, rank=rank, offsets=offsets)

    def partition_path(self) -> str:
        return self.cluster().filesystem.partition

    def close(self) -> None:
        """Nothing to release: every call is its own request."""


class ServiceSession:
    """The core in this process: no server needed, the same configuration files."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.description = f"the core in this process ({service.orchestrator.kind} backend)"

    def cluster(self) -> ClusterInfo:
        return self.service.cluster()  # type: ignore[no-any-return]

    def nodes(self) -> list[Node]:
        return self.service.nodes()  # type: ignore[no-any-return]

    def files(self, path: str, offset: int, limit: int, sort: str) -> FileListing:
        return self.service.list_files(path, offset=offset, limit=limit, sort=sort)  # type: ignore[no-any-return]

    def templates(self) -> list[TemplateInfo]:
        return self.service.templates()  # type: ignore[no-any-return]

    def render(self, body: dict[str, Any]) -> Rendered:
        return self.service.render(body)  # type: ignore[no-any-return]

    def submit(self, body: dict[str, Any]) -> Job:
        return self.service.submit(body)  # type: ignore[no-any-return]

    def jobs(self, states: list[JobState] | None, limit: int, offset: int) -> JobList:
        return self.service.jobs(states=states, limit=limit, offset=offset)  # type: ignore[no-any-return]

    def job(self, job_id: str) -> Job:
        return self.service.job(job_id)  # type: ignore[no-any-return]

    def cancel(self, job_id: str) -> Job:
        return self.service.cancel(job_id)  # type: ignore[no-any-return]

    def log_snapshot(self, job_id: str, rank: int, tail: int) -> LogSnapshot:
        return self.service.log_snapshot(job_id, rank=rank, tail=tail)  # type: ignore[no-any-return]

    def follow(self, job_id: str, rank: RankArg, offsets: Mapping[int, int]) -> Iterator[LogEvent]:
        return follow_service(self.service, job_id, rank, offsets)

    def partition_path(self) -> str:
        return str(self.service.partition.root)

    def close(self) -> None:
        self.service.close()


def follow_service(
    service: Any, job_id: str, rank: RankArg, offsets: Mapping[int, int]
) -> Iterator[LogEvent]:
    """The WebSocket stream's events, read from the core directly (the one follow loop of
    `core/logprotocol.py`: same frames, same order)."""
    from .core.logprotocol import Follow, follow_events

    job = service.job(job_id)
    ranks = list(range(job.spec.world_size)) if rank == "all" else [int(rank)]
    positions = {r: int(offsets.get(r, 0)) for r in ranks}
    heartbeat = float(getattr(service.settings, "heartbeat_interval", 15.0))
    return follow_events(Follow(service, job_id, positions, heartbeat_every=heartbeat))


# -- configuration without a server -----------------------------------------------------------------

CONFIG_BASES = ("jupyter_config", "jupyter_server_config", "jupyter_jupyter_hyperpod_config")


def load_jupyter_config(paths: Sequence[str] | None = None) -> Any:
    """The Jupyter server's configuration files (py and json, and jupyter_server_config.d/*.json),
    lowest priority first, as one traitlets Config."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import (
        ConfigFileNotFound,
        JSONFileConfigLoader,
        PyFileConfigLoader,
    )

    config = Config()
    search = list(paths) if paths is not None else jupyter_config_path()
    for path in reversed(search):
        for conf_d in sorted(glob.glob(os.path.join(path, "jupyter_server_config.d", "*.json"))):
            try:
                with open(conf_d, encoding="utf-8") as handle:
                    config.merge(Config(json.load(handle)))
            except (OSError, ValueError):
                continue
    for path in reversed(search):
        for base in CONFIG_BASES:
            for loader_class in (PyFileConfigLoader, JSONFileConfigLoader):
                suffix = ".py" if loader_class is PyFileConfigLoader else ".json"
                try:
                    config.merge(loader_class(base + suffix, path=path).load_config())
                except ConfigFileNotFound:
                    continue
    return config


def load_settings(config: Any = None) -> Any:
    """`HyperPodSettings` as the server would have them: c.HyperPodApp.* applies too."""
    from traitlets.config import Config

    from .core.settings import HyperPodSettings

    config = load_jupyter_config() if config is None else config
    merged = Config()
    merged.merge(config)
    if "HyperPodApp" in config:
        merged.merge(Config({"HyperPodSettings": config.HyperPodApp}))
    return HyperPodSettings(config=merged)


def server_session(args: argparse.Namespace) -> ClientSession | None:
    """The REST client when a server is named or this process runs under one (a kernel or a
    terminal of it); None with --direct or without a server."""
    if getattr(args, "direct", False):
        return None
    url = getattr(args, "url", None) or os.environ.get("JUPYTER_HYPERPOD_URL", "")
    token = getattr(args, "token", None)
    if url:
        return ClientSession(HyperPodClient(url, token), "given")
    found = find_server()
    if found is not None:
        return ClientSession(HyperPodClient(found.url, token or found.token), found.source)
    return None


def open_session(args: argparse.Namespace) -> Session:
    """The server's REST API when there is one for us, else the core in this process."""
    client = server_session(args)
    if client is not None:
        return client
    from .core.service import HyperPodService

    return ServiceSession(HyperPodService(load_settings()))


# -- output ------------------------------------------------------------------------------------------


@dataclass
class Console:
    """Where the verbs write while they work (logs, progress); results are returned."""

    out: Callable[[], TextIO] = field(default=lambda: sys.stdout)
    err: Callable[[], TextIO] = field(default=lambda: sys.stderr)
    notes_to_err: bool = True

    def write(self, text: str) -> None:
        stream = self.out()
        stream.write(text)
        stream.flush()

    def note(self, text: str) -> None:
        stream = self.err() if self.notes_to_err else self.out()
        stream.write(text + "\n")
        stream.flush()


@dataclass
class Outcome:
    """A verb's result: the value (returned by the magic, printed by the CLI) and the exit code."""

    value: Any = None
    exit_code: int = EXIT_OK
    print_value: bool = True
    """False when the verb already printed what a person needs (submit, follow)."""


class RankPrefixer:
    """Whole lines with a `[rank] ` prefix, for logs of several ranks at once."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.partial: dict[int, str] = {}

    def feed(self, rank: int, text: str) -> str:
        if not self.enabled:
            return text
        text = self.partial.pop(rank, "") + text
        lines = text.split("\n")
        if lines[-1]:
            self.partial[rank] = lines[-1]
        return "".join(f"[{rank}] {line}\n" for line in lines[:-1])

    def flush(self) -> str:
        rest = "".join(f"[{rank}] {line}\n" for rank, line in sorted(self.partial.items()))
        self.partial.clear()
        return rest


# -- the verbs ---------------------------------------------------------------------------------------


def job_exit_code(job: Job | None, state: JobState | None = None) -> int:
    final = state or (job.state if job else None)
    return EXIT_OK if final == JobState.SUCCEEDED else EXIT_JOB_FAILED


def wait_for(
    session: Session, job_id: str, timeout: float | None, console: Console | None = None
) -> Job:
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.2
    reported: JobState | None = None
    while True:
        job = session.job(job_id)
        if console is not None and job.state != reported:
            reported = job.state
            if not job.state.finished:
                console.note(
                    f"job {job_id} is {job.state.value}"
                    + (f": {job.state_reason}" if job.state_reason else "")
                )
        if job.state.finished:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise CommandError(
                f"job {job_id} is still {job.state.value} after {timeout:g} s", EXIT_TIMEOUT
            )
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(5.0, delay * 1.5)


def follow_logs(
    session: Session, job_id: str, console: Console, *, rank: RankArg = 0, tail: int = 200
) -> LogEvent | None:
    """Print the last `tail` lines, then the live log until the job ends; returns the end event.
    KeyboardInterrupt stops following (the caller reports it); the job is never touched."""
    job = session.job(job_id)
    ranks = list(range(job.spec.world_size)) if rank == "all" else [int(rank)]
    prefixer = RankPrefixer(len(ranks) > 1)
    offsets: dict[int, int] = {}
    for r in ranks:
        snapshot = session.log_snapshot(job_id, r, tail)
        offsets[r] = snapshot.offset
        if snapshot.text:
            console.write(prefixer.feed(r, snapshot.text))
    end: LogEvent | None = None
    stream = session.follow(job_id, rank, offsets)
    try:
        for event in stream:
            if event.type == "status" and event.state is not None and not event.state.finished:
                reason = f": {event.reason}" if event.reason else ""
                console.note(f"[job {job_id} {event.state.value}{reason}]")
            elif event.type == "data" and event.rank is not None:
                console.write(prefixer.feed(event.rank, event.data))
            elif event.type == "end":
                end = event
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        console.write(prefixer.flush())
    if end is not None:
        code = f" (exit code {end.exit_code})" if end.exit_code is not None else ""
        console.note(f"[job {job_id} {end.state.value if end.state else 'ended'}{code}]")
    return end


def _states(values: Sequence[str]) -> list[JobState] | None:
    states: list[JobState] = []
    for value in values:
        for item in filter(None, value.split(",")):
            try:
                states.append(JobState(item.strip().upper()))
            except ValueError:
                allowed = ", ".join(s.value for s in JobState)
                raise CommandError(
                    f"state must be one of {allowed}, not '{item}'", EXIT_USAGE
                ) from None
    return states or None


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


def build_submission(
    args: argparse.Namespace, session: Session, *, cell: str | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    """The request body for `submit`: a template submission or a JobSpec, as the panel sends them."""
    generic = _generic(args)
    sets = dict(args.set)
    positional = [args.script, *args.args] if args.script else list(args.args)
    context = SubmitContext(session.partition_path(), cwd or Path.cwd())

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
            return _template_body(body, generic, session)
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
    return _template_body(body, generic, session)


def _template_body(
    body: dict[str, Any], generic: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Generic options go into the template's parameters when it has them; the others override the
    spec the template builds (rendered by the core, so that its checks apply)."""
    infos = {info.name: info for info in session.templates()}
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


def do_submit(
    args: argparse.Namespace, session: Session, console: Console, cell: str | None
) -> Outcome:
    body = build_submission(args, session, cell=cell)
    if args.dry_run:
        return Outcome(RichRendered.of(session.render(body)))
    job = session.submit(body)
    console.note(f"Submitted job {job.id} ({job.state.value})")
    if args.follow:
        try:
            end = follow_logs(session, job.id, console, rank=0, tail=0)
        except KeyboardInterrupt:
            return _interrupted(job.id, console, session.job(job.id))
        final = session.job(job.id)
        return Outcome(
            RichJob.of(final), job_exit_code(final, end.state if end else None), print_value=False
        )
    if args.wait:
        final = wait_for(session, job.id, args.timeout, console)
        console.note(
            f"job {final.id} {final.state.value}"
            + (f" (exit code {final.exit_code})" if final.exit_code is not None else "")
        )
        return Outcome(RichJob.of(final), job_exit_code(final), print_value=False)
    return Outcome(RichJob.of(job), print_value=False)


def _interrupted(job_id: str, console: Console, job: Job | None = None) -> Outcome:
    state = f" (still {job.state.value})" if job is not None else ""
    console.note(
        f"[stopped following {job_id}{state}; the job keeps running — cancel it with `cancel {job_id}`]"
    )
    return Outcome(
        RichJob.of(job) if job is not None else None, EXIT_INTERRUPTED, print_value=False
    )


def do_logs(args: argparse.Namespace, session: Session, console: Console) -> Outcome:
    if args.follow:
        try:
            end = follow_logs(session, args.job, console, rank=args.rank, tail=args.tail)
        except KeyboardInterrupt:
            try:
                job = session.job(args.job)
            except (HyperPodError, KeyboardInterrupt):
                job = None
            return _interrupted(args.job, console, job)
        return Outcome(None, job_exit_code(None, end.state if end else None), print_value=False)
    if args.rank == "all":
        job = session.job(args.job)
        parts = []
        for r in range(job.spec.world_size):
            snapshot = session.log_snapshot(args.job, r, args.tail)
            parts.append(f"==> rank {r} <==\n{snapshot.text}")
        return Outcome(Message("\n".join(parts)))
    return Outcome(LogText(session.log_snapshot(args.job, args.rank, args.tail)))


def do_cancel(args: argparse.Namespace, session: Session, console: Console) -> Outcome:
    results = []
    for job_id in args.jobs:
        before = session.job(job_id)
        job = session.cancel(job_id)
        if before.state.finished:
            console.note(f"job {job.id} had already ended ({job.state.value})")
        else:
            console.note(f"Cancelled job {job.id} ({job.state.value})")
        results.append(job)
    if len(results) == 1:
        return Outcome(RichJob.of(results[0]), print_value=False)
    return Outcome(JobResults(results), print_value=False)


def do_connect(args: argparse.Namespace, console: Console) -> Outcome:
    try:
        from .aws import discovery, hyperpod
        from .aws.calls import session as aws_session
    except ImportError as error:  # pragma: no cover - the aws package ships with us
        raise CommandError(
            f"connect needs the AWS support of jupyter-hyperpod: {error}", EXIT_ERROR
        ) from None
    if not args.cluster:
        aws = aws_session(args.region, args.profile)
        clusters = hyperpod.list_clusters(aws.client("sagemaker"))
        rows = [
            [c.get("name"), c.get("orchestrator") or "?", c.get("status"), c.get("arn")]
            for c in clusters
        ]
        table = Table(
            ["cluster", "orchestrator", "status", "arn"],
            rows,
            notes=["connect to an EKS cluster with: connect CLUSTER"],
        )
        return Outcome(TableResult(table, clusters))
    result = discovery.connect(
        args.cluster,
        region=args.region,
        kubeconfig=args.kubeconfig,
        namespace=args.namespace,
        auth=args.auth,
        profile=args.profile,
    )
    table = Table(
        ["", ""],
        [[key, value] for key, value in result.items()],
        title=f"kubeconfig context {result.get('context')} written",
        notes=[
            "the kubernetes backend uses it now (c.HyperPodSettings.orchestrator = 'kubernetes' or 'auto'; "
            "restart Jupyter if it started with another backend)"
        ],
    )
    return Outcome(TableResult(table, result))


class TableResult:
    """A table for people; `.result` (and --json) is the data for scripts."""

    def __init__(self, table: Table, result: Any) -> None:
        self._table = table
        self.result = result

    def __str__(self) -> str:
        return str(self._table)

    def _repr_html_(self) -> str:
        return self._table.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self._table))

    def to_json(self) -> Any:
        return self.result


def run(
    argv: Sequence[str],
    *,
    console: Console,
    session: Session | None = None,
    session_factory: Callable[[argparse.Namespace], Session] = open_session,
    cell: str | None = None,
    parser: Parser | None = None,
    keep_session: bool = False,
) -> tuple[Outcome, argparse.Namespace]:
    """Parse argv and run the verb. Raises CommandError (with its exit code) or HelpShown.
    A session made by session_factory is closed afterwards unless keep_session (the magics keep
    theirs for the next call)."""
    parser = parser or build_parser()
    args = parser.parse_args(list(argv))
    if getattr(args, "json", False):
        console.notes_to_err = True  # stdout is the JSON document
    if cell is not None and args.verb != "submit":
        raise CommandError(
            "%%hyperpod (a cell) only works with submit: %%hyperpod submit [options]", EXIT_USAGE
        )
    if args.verb == "connect":
        try:
            return do_connect(args, console), args
        except HyperPodError as error:
            raise command_error(error) from None
        except Exception as error:
            if type(error).__name__ == "NoRegionError":  # botocore's, raised creating a client
                raise CommandError(
                    "no AWS region: pass --region or set AWS_REGION", EXIT_USAGE
                ) from None
            raise
    owned = session is None and not keep_session
    try:
        if args.verb == "doctor":
            from .doctor import run_doctor

            return run_doctor(args, session), args
        if session is None:
            session = session_factory(args)
        return _dispatch(args, session, console, cell), args
    except HyperPodError as error:
        raise command_error(error) from None
    finally:
        if owned and session is not None:
            session.close()


def _dispatch(
    args: argparse.Namespace, session: Session, console: Console, cell: str | None
) -> Outcome:
    verb = args.verb
    if verb == "cluster":
        return Outcome(RichCluster.of(session.cluster()))
    if verb == "nodes":
        return Outcome(NodeResults(session.nodes()))
    if verb == "jobs":
        page = session.jobs(_states(args.state), args.limit or 20, args.offset)
        return Outcome(JobResults(page.jobs, page.total))
    if verb == "submit":
        return do_submit(args, session, console, cell)
    if verb == "status":
        if not args.job:
            return Outcome(RichCluster.of(session.cluster()))
        if args.wait:
            job = wait_for(session, args.job, args.timeout, console)
            return Outcome(RichJob.of(job), job_exit_code(job))
        return Outcome(RichJob.of(session.job(args.job)))
    if verb == "wait":
        job = wait_for(session, args.job, args.timeout, console)
        return Outcome(RichJob.of(job), job_exit_code(job))
    if verb == "logs":
        return do_logs(args, session, console)
    if verb == "cancel":
        return do_cancel(args, session, console)
    if verb == "files":
        return Outcome(
            FileResults(session.files(args.path, args.offset, args.limit or 200, args.sort))
        )
    if verb == "templates":
        templates = session.templates()
        if args.name:
            for info in templates:
                if info.name == args.name:
                    return Outcome(TemplateDetail(info))
            known = ", ".join(t.name for t in templates)
            raise CommandError(
                f"unknown template '{args.name}' (available: {known})", EXIT_NOT_FOUND
            )
        return Outcome(TemplateResults(templates))
    raise CommandError(f"unknown verb {verb}", EXIT_USAGE)  # pragma: no cover - argparse refuses it


def as_json(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, default=str)


__all__ = [
    "EXIT_CODES_HELP",
    "ClientSession",
    "CommandError",
    "Console",
    "HelpShown",
    "Outcome",
    "ServiceSession",
    "Session",
    "as_json",
    "build_parser",
    "load_settings",
    "open_session",
    "run",
]
