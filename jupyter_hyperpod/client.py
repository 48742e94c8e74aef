"""A small typed client of the jupyter-hyperpod REST API, for scripts (and the CLI and magics).

    from jupyter_hyperpod.client import HyperPodClient

    client = HyperPodClient()              # $JUPYTER_HYPERPOD_URL + $JUPYTER_TOKEN, or a running server
    job = client.submit(name="hello", command=["train.py", "--epochs", "1"], workdir="project")
    for event in client.follow(job.id):    # the live log until the job ends
        print(event.data, end="")
    print(client.wait(job.id).state)

HTTP goes through the standard library; the log stream is a WebSocket (`websocket-client`).
Errors are the core's typed errors (`InvalidRequest`, `NotFound`, ...) with the server's message.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from .core import errors, logprotocol
from .core.api import Diagnosis, FileText, SubmitBody, request_body
from .core.byo import AppliedFile
from .core.chains import ChainSubmitted, JobChain
from .core.errors import BackendError, BackendUnavailable, Forbidden, HyperPodError, NotFound
from .core.gpu_models import GpuNodes, JobGpu
from .core.logprotocol import LogEvent, RankArg
from .core.models import (
    AwsClusterList,
    ClusterInfo,
    FileListing,
    ForgottenJob,
    Job,
    JobComparison,
    JobDiff,
    JobList,
    JobMetrics,
    JobState,
    LogSnapshot,
    Node,
    Rendered,
    StackDump,
    TemplateInfo,
)
from .core.queue import QueueLogs, QueuePage
from .core.sweeps import Sweep, SweepList
from .core.wsreader import OPCODE_BINARY, OPCODE_CLOSE, OPCODE_TEXT, FrameReader

URL_ENV = "JUPYTER_HYPERPOD_URL"
TOKEN_ENVS = ("JUPYTER_HYPERPOD_TOKEN", "JUPYTER_TOKEN")
API_PATH = "hyperpod/api/"

CLOSE_JOB_ENDED = logprotocol.CLOSE_JOB_ENDED


class ServerUnreachable(BackendUnavailable):
    """No Jupyter server answers at the URL (or none was found)."""

    code = "server_unreachable"


def _error_classes() -> dict[str, type[HyperPodError]]:
    found: dict[str, type[HyperPodError]] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, HyperPodError):
            found[value.code] = value
    return found


ERROR_CLASSES = _error_classes()

CLOSE_ERRORS: dict[int, type[HyperPodError]] = {
    close.code: ERROR_CLASSES[close.error] for close in logprotocol.CLOSE_CODES if close.error
}
"""The error each close code of the log protocol raises (when it is not retried)."""


def error_from_body(status: int, body: Any, fallback: str) -> HyperPodError:
    """The typed error for an `{"error": {code, message, field}}` answer."""
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        cls = ERROR_CLASSES.get(str(detail.get("code")), None)
        if cls is None:
            cls = BackendUnavailable if status == 503 else BackendError
        error = cls(detail["message"], field=detail.get("field"))
        error.status = status
        return error
    return BackendError(f"{fallback} (HTTP {status})")


# -- finding the server ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerInfo:
    url: str
    token: str
    source: str
    """How it was found: arguments, environment, parent process, running server."""


def ancestor_pids() -> set[int]:
    pids: set[int] = set()
    parent = os.environ.get("JPY_PARENT_PID", "")
    if parent.isdigit():
        pids.add(int(parent))
    try:
        import psutil

        pids.update(process.pid for process in psutil.Process().parents())
    except Exception:
        pids.add(os.getppid())
    return pids


def running_servers(runtime_dir: str | None = None) -> list[dict[str, Any]]:
    """The Jupyter servers of this user that are running now: their `jpserver-*.json` info files,
    as `jupyter_server.serverapp.list_running_servers` reads them (importing that module costs
    seconds, too slow for a CLI call)."""
    if runtime_dir is None:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime_dir = jupyter_runtime_dir()
    servers = []
    for path in sorted(glob.glob(os.path.join(runtime_dir, "jpserver-*.json"))):
        if path.endswith("-open.html"):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
        except (OSError, ValueError):
            continue  # being written, or gone
        pid = info.get("pid")
        if isinstance(info, dict) and isinstance(pid, int) and _alive(pid) and info.get("url"):
            servers.append({**info, "info_file": path})
    return servers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_server(*, any_server: bool = False) -> ServerInfo | None:
    """The server from the environment, else the Jupyter server this process runs under (a kernel
    or a terminal of it), else (with any_server) the only running server; None otherwise."""
    url = os.environ.get(URL_ENV, "")
    if url:
        return ServerInfo(url, _env_token(), f"${URL_ENV}")
    servers = running_servers()
    ancestors = ancestor_pids()
    for info in servers:
        if info.get("pid") in ancestors:
            return ServerInfo(
                info["url"],
                info.get("token", "") or _env_token(),
                f"parent Jupyter server (pid {info['pid']})",
            )
    if any_server and len(servers) == 1:
        info = servers[0]
        return ServerInfo(
            info["url"],
            info.get("token", "") or _env_token(),
            f"running Jupyter server (pid {info.get('pid')})",
        )
    return None


def _env_token() -> str:
    for name in TOKEN_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return ""


def api_root(url: str) -> str:
    """`http://host:8888/base/` (or a URL already ending in hyperpod/api/) -> the API root."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise errors.InvalidRequest(
            f"'{url}' is not an http(s) URL of a Jupyter server", field="url"
        )
    path = parsed.path
    for suffix in ("/lab", "/tree"):
        if path.rstrip("/").endswith(suffix):
            path = path.rstrip("/")[: -len(suffix)]
    if not path.endswith("/"):
        path += "/"
    if not path.endswith(API_PATH):
        path += API_PATH
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


# -- log stream events -----------------------------------------------------------------------------


class HyperPodClient:
    """The REST API of one Jupyter server with the jupyter-hyperpod extension."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        discover: bool = True,
        source: str = "",
    ) -> None:
        """`url`: the Jupyter server (with its base URL); default $JUPYTER_HYPERPOD_URL, else the
        server this process runs under, else the only running server. `token`: default
        $JUPYTER_HYPERPOD_TOKEN / $JUPYTER_TOKEN, else the found server's token."""
        if not url:
            found = find_server(any_server=True) if discover else None
            if found is None:
                raise ServerUnreachable(
                    f"no Jupyter server found: set {URL_ENV} (and JUPYTER_TOKEN), pass url=, "
                    "or start JupyterLab"
                )
            url, token = found.url, token or found.token
            source = source or found.source
        self.url = url
        self.source = source
        self.token = token if token is not None else _env_token()
        self.api = api_root(url)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"HyperPodClient({self.url!r})"

    @property
    def description(self) -> str:
        return f"Jupyter server {self.url}" + (f" ({self.source})" if self.source else "")

    def close(self) -> None:
        """Nothing to release: every call is its own request."""

    # -- HTTP ------------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "jupyter-hyperpod-client"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        return headers

    def request(self, method: str, route: str, body: Any = None, **params: Any) -> Any:
        """One API call; returns the decoded JSON or raises the typed error."""
        query = {k: str(v) for k, v in params.items() if v is not None}
        url = self.api + route.lstrip("/") + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None
        headers = self._headers()
        if body is not None or method in ("POST", "PUT"):
            data = json.dumps(body if body is not None else {}).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            raw = error.read().decode("utf-8", "replace")
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            raise self._http_error(error.code, parsed, method, route) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ServerUnreachable(
                f"cannot reach the Jupyter server at {self.url}: {reason}"
            ) from None
        return json.loads(text) if text else None

    def _http_error(self, status: int, body: Any, method: str, route: str) -> HyperPodError:
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = error_from_body(status, body, f"{method} {route} failed")
            if status == 403 and error.code == "forbidden" and "not authenticated" in error.message:
                return Forbidden(
                    f"the Jupyter server at {self.url} refused the token: pass token= or set JUPYTER_TOKEN"
                )
            return error
        if status == 404:
            return NotFound(
                f"no jupyter-hyperpod API at {self.api}: is the extension enabled on that server? "
                "(jupyter server extension enable jupyter_hyperpod)"
            )
        if status in (401, 403):
            return Forbidden(
                f"the Jupyter server at {self.url} refused the token: pass token= or set JUPYTER_TOKEN"
            )
        return error_from_body(status, body, f"{method} {route} failed")

    # -- cluster and files ------------------------------------------------------------------------
    def cluster(self) -> ClusterInfo:
        return ClusterInfo.model_validate(self.request("GET", "cluster"))

    def nodes(self) -> list[Node]:
        return [Node.model_validate(item) for item in self.request("GET", "nodes")["nodes"]]

    def files(
        self, path: str = "", *, offset: int = 0, limit: int = 500, sort: str = "name"
    ) -> FileListing:
        return FileListing.model_validate(
            self.request("GET", "files", path=path, offset=offset, limit=limit, sort=sort)
        )

    def read_file(self, path: str, *, limit: int = 65536) -> FileText:
        """A small UTF-8 text file of the partition (at most `limit` bytes)."""
        return FileText.model_validate(self.request("GET", "files/text", path=path, limit=limit))

    def templates(self) -> list[TemplateInfo]:
        return [
            TemplateInfo.model_validate(item)
            for item in self.request("GET", "templates")["templates"]
        ]

    # -- jobs -------------------------------------------------------------------------------------
    def render(self, spec: SubmitBody | None = None, /, **fields: Any) -> Rendered:
        """What `submit` would send to the cluster (the sbatch script, manifest or command)."""
        return Rendered.model_validate(
            self.request("POST", "jobs/render", request_body(spec, fields))
        )

    def submit(self, spec: SubmitBody | None = None, /, **fields: Any) -> Job:
        """Submit a job spec (`name`, `command`, `workdir`, `nodes`...) or a template
        (`name`, `template`, `params`); keyword fields are merged into `spec`."""
        return Job.model_validate(self.request("POST", "jobs", request_body(spec, fields)))

    def apply(
        self,
        text: str = "",
        /,
        *,
        filename: str = "",
        fix: bool = False,
        dry_run: bool = False,
        resubmit: str | None = None,
    ) -> AppliedFile:
        """Submit my own manifest or sbatch script as it is (checked, policed, marked; `dry_run`
        previews, `fix` accepts the offered fixes, `resubmit` sends a job's stored file again)."""
        body: dict[str, Any] = {"text": text, "filename": filename, "fix": fix, "dry_run": dry_run}
        if resubmit:
            body["resubmit"] = resubmit
        return AppliedFile.model_validate(self.request("POST", "jobs/apply", body))

    def jobs(
        self, *, states: Sequence[JobState] | None = None, limit: int = 100, offset: int = 0
    ) -> JobList:
        joined = ",".join(JobState(s).value for s in states or ()) or None
        return JobList.model_validate(
            self.request("GET", "jobs", state=joined, limit=limit, offset=offset)
        )

    def job(self, job_id: str) -> Job:
        return Job.model_validate(self.request("GET", f"jobs/{_quote(job_id)}"))

    def cancel(self, job_id: str) -> Job:
        """Cancel a job (a finished job is returned as it is)."""
        return Job.model_validate(self.request("DELETE", f"jobs/{_quote(job_id)}"))

    def forget(self, job_id: str, *, delete_files: bool = False) -> ForgottenJob:
        """Remove a job from the history, cancelled first if it still runs; its directory
        (`.hyperpod/jobs/<id>`) is deleted only when asked, its outputs never."""
        return ForgottenJob.model_validate(
            self.request(
                "DELETE",
                f"jobs/{_quote(job_id)}",
                forget="true",
                delete_files="true" if delete_files else None,
            )
        )

    def rerun(self, job_id: str, *, with_changes: bool = False) -> Job:
        """Start a job's spec again, as a new job: from its snapshot (what it ran, exactly), or
        `with_changes` from the workdir's files as they are now."""
        return Job.model_validate(
            self.request("POST", f"jobs/{_quote(job_id)}/rerun", {"with_changes": with_changes})
        )

    def submit_chain(self, request: Any) -> ChainSubmitted:
        """Submit a chain (`{"links": [...]}`): every link, each waiting for its `after`."""
        body = request.model_dump(mode="json") if isinstance(request, BaseModel) else request
        return ChainSubmitted.model_validate(self.request("POST", "chains", body))

    def chain(self, job_id: str) -> JobChain:
        """Every job linked to this one by `after`, oldest first."""
        return JobChain.model_validate(self.request("GET", f"jobs/{_quote(job_id)}/chain"))

    def resume(self, job_id: str, *, with_changes: bool = False) -> ChainSubmitted:
        """Run a chain again from its failed link: that link and what waited on it."""
        return ChainSubmitted.model_validate(
            self.request("POST", f"jobs/{_quote(job_id)}/resume", {"with_changes": with_changes})
        )

    def submit_sweep(self, request: Any) -> Sweep:
        """Submit a sweep (`POST sweeps`): one job per point, every one checked first."""
        body = request.model_dump(mode="json") if isinstance(request, BaseModel) else request
        return Sweep.model_validate(self.request("POST", "sweeps", body))

    def sweeps(self) -> SweepList:
        """The user's sweeps (group rows), newest first."""
        return SweepList.model_validate(self.request("GET", "sweeps"))

    def sweep(self, sweep_id: str) -> Sweep:
        """One sweep: its group row and its members."""
        return Sweep.model_validate(self.request("GET", f"sweeps/{_quote(sweep_id)}"))

    def cancel_sweep(self, sweep_id: str) -> Sweep:
        """Cancel every unfinished member of a sweep."""
        return Sweep.model_validate(self.request("POST", f"sweeps/{_quote(sweep_id)}/cancel", {}))

    def add_event(self, job_id: str, event: str) -> Job:
        """Add one line to the job's events (who acted on it: an agent via MCP)."""
        return Job.model_validate(
            self.request("POST", f"jobs/{_quote(job_id)}/events", {"event": event})
        )

    def wait(self, job_id: str, *, timeout: float | None = None, interval: float = 1.0) -> Job:
        """Poll until the job has finished; TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.25, interval)
        while True:
            job = self.job(job_id)
            if job.state.finished:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.state.value} after {timeout:g} s")
            pause = delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(interval * 5, delay * 1.5)

    def metrics(self, job_id: str) -> JobMetrics:
        return JobMetrics.model_validate(self.request("GET", f"jobs/{_quote(job_id)}/metrics"))

    def diff(self, job_id: str, other_id: str) -> JobDiff:
        """What differs between two jobs: spec, resolved configs, code files, packages."""
        return JobDiff.model_validate(
            self.request("GET", f"jobs/{_quote(job_id)}/diff/{_quote(other_id)}")
        )

    def compare(self, job_ids: Sequence[str]) -> JobComparison:
        """Two to ten jobs side by side: state, duration, what sets them apart, final metrics."""
        return JobComparison.model_validate(self.request("GET", "compare", ids=",".join(job_ids)))

    def dump_stacks(self, job_id: str) -> StackDump:
        return StackDump.model_validate(self.request("POST", f"jobs/{_quote(job_id)}/stacks", {}))

    def stacks(self, job_id: str) -> StackDump:
        return StackDump.model_validate(self.request("GET", f"jobs/{_quote(job_id)}/stacks"))

    def gpu_nodes(self) -> GpuNodes:
        """Each node's GPUs now (utilisation, memory, power, temperature, last XID)."""
        return GpuNodes.model_validate(self.request("GET", "gpu/nodes"))

    def job_gpu(self, job_id: str, *, step: float | None = None) -> JobGpu:
        """The job's GPU utilisation and memory over its run."""
        params = {"step": step} if step is not None else {}
        return JobGpu.model_validate(self.request("GET", f"jobs/{_quote(job_id)}/gpu", **params))

    # -- the cluster's queue ----------------------------------------------------------------------
    def queue(
        self,
        *,
        mine: bool = False,
        state: str | list[str] | None = "",
        partition: str | None = None,
        offset: int = 0,
        limit: int = 100,
        fresh: bool = False,
    ) -> QueuePage:
        """A page of the cluster's queue (every user's jobs): `state` '' = pending and running,
        'all' = every state; `partition` a Slurm partition, Kubernetes queue or namespace."""
        states = ",".join(state) if isinstance(state, list) else state
        return QueuePage.model_validate(
            self.request(
                "GET",
                "queue",
                mine="true" if mine else None,
                state=states or None,
                queue=partition,
                offset=offset,
                limit=limit,
                refresh="true" if fresh else None,
            )
        )

    def adopt(self, queue_id: str) -> Job:
        """Open one of my jobs submitted elsewhere (a queue row's id) like a job submitted here."""
        return Job.model_validate(self.request("POST", "queue/adopt", {"id": queue_id}))

    def queue_logs(self, queue_id: str, *, tail: int = 200) -> QueueLogs:
        """A queue row's log, only where the cluster lets this user read it (else Forbidden)."""
        return QueueLogs.model_validate(self.request("GET", "queue/logs", id=queue_id, tail=tail))

    # -- AWS --------------------------------------------------------------------------------------
    def aws_clusters(self, region: str | None = None) -> AwsClusterList:
        """The HyperPod clusters of the region, each connectable or with the reason why not."""
        return AwsClusterList.model_validate(self.request("GET", "aws/clusters", region=region))

    def connect(
        self,
        cluster: str,
        *,
        region: str | None = None,
        namespace: str | None = None,
        auth: Literal["exec", "token"] = "exec",
        slurm: bool = False,
        controller_group: str | None = None,
    ) -> ClusterInfo:
        """Switch the server to an EKS HyperPod cluster (it writes its kubeconfig context), or
        with `slurm` make its machine a login node of a Slurm one."""
        body: dict[str, Any] = {"cluster": cluster, "region": region, "namespace": namespace}
        body.update(auth=auth, slurm=slurm, controller_group=controller_group)
        return ClusterInfo.model_validate(
            self.request(
                "POST", "aws/connect", {key: value for key, value in body.items() if value}
            )
        )

    def diagnose(self) -> Diagnosis:
        """The login-node checks, run by the server where it runs."""
        return Diagnosis.model_validate(self.request("GET", "diagnose"))

    # -- logs -------------------------------------------------------------------------------------
    def logs(self, job_id: str, *, rank: int = 0, tail: int = 200) -> LogSnapshot:
        """The last `tail` lines of a rank's log, with the offset to follow from
        (`core.api.log_text` gives them as text, and with follow=True everything new)."""
        return LogSnapshot.model_validate(
            self.request("GET", f"jobs/{_quote(job_id)}/logs", rank=rank, tail=tail)
        )

    def follow(
        self,
        job_id: str,
        *,
        rank: RankArg = 0,
        offset: int = 0,
        offsets: Mapping[int, int] | None = None,
        idle_timeout: float = 120.0,
        reconnects: int = 5,
        poll: float = 0.5,
    ) -> Iterator[LogEvent]:
        """Events of the live log until the job ends (the last event is `end`).

        A dropped connection is resumed from the last offsets; a connection silent for
        `idle_timeout` seconds (no data nor heartbeat) is treated as dropped. Closing the
        iterator (or KeyboardInterrupt) only stops following: the job keeps running."""
        positions: dict[int, int] = dict(offsets or {})
        if rank != "all":
            positions.setdefault(int(rank), offset)
        failures = 0
        while True:
            ws = self._connect_stream(job_id, rank, positions)
            try:
                outcome = yield from self._read_stream(ws, positions, idle_timeout, poll)
            finally:
                with contextlib.suppress(Exception):  # already closed or broken
                    ws.close(timeout=1)
            if outcome.ended:
                return
            failures = 0 if outcome.progressed else failures + 1
            close = logprotocol.BY_CODE.get(outcome.code or 0)
            limit = reconnects
            if close is not None and close.retry == "limited" and close.max_retries is not None:
                limit = min(reconnects, close.max_retries)
            if close is not None and (close.retry == "never" or failures > limit):
                raise CLOSE_ERRORS.get(close.code, BackendError)(
                    outcome.message or close.message, field=outcome.field
                )
            if failures > limit:
                raise ServerUnreachable(
                    f"the log stream of {job_id} keeps dropping; giving up after {reconnects} retries"
                )
            time.sleep(min(5.0, 0.2 * 2**failures))

    def _stream_url(self, job_id: str, rank: RankArg, positions: Mapping[int, int]) -> str:
        base = self.api.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        if rank == "all":
            query = {
                "rank": "all",
                "offsets": ",".join(f"{r}:{o}" for r, o in sorted(positions.items())),
            }
        else:
            query = {"rank": str(rank), "offset": str(positions.get(int(rank), 0))}
        # Data frames as a header and the log's bytes: no JSON to parse (a server that does not
        # know the parameter sends text frames, which are read as well).
        query[logprotocol.FRAMES_QUERY] = "binary"
        return f"{base}jobs/{_quote(job_id)}/logs/stream?{urllib.parse.urlencode(query)}"

    def _connect_stream(self, job_id: str, rank: RankArg, positions: Mapping[int, int]) -> Any:
        import websocket

        header = [f"Authorization: token {self.token}"] if self.token else []
        try:
            return websocket.create_connection(
                self._stream_url(job_id, rank, positions),
                header=header,
                timeout=min(self.timeout, 30.0),
                # websocket-client validates UTF-8 in pure Python: 100x slower than the network
                # on large log frames; the server only ever sends JSON text it encoded itself.
                skip_utf8_validation=True,
            )
        except websocket.WebSocketBadStatusException as error:
            status = getattr(error, "status_code", 0)
            if status in (401, 403):
                return_error: HyperPodError = Forbidden(
                    f"the Jupyter server at {self.url} refused the token for the log stream"
                )
            elif status == 404:
                return_error = NotFound(
                    f"no job '{job_id}' (or no log stream at {self.api})", field="id"
                )
            else:
                return_error = BackendError(
                    f"the log stream of {job_id} was refused (HTTP {status})"
                )
            raise return_error from None
        except (OSError, websocket.WebSocketException) as error:
            raise ServerUnreachable(f"cannot open the log stream at {self.url}: {error}") from None

    def _read_stream(
        self, ws: Any, positions: dict[int, int], idle_timeout: float, poll: float
    ) -> Generator[LogEvent, None, _StreamEnd]:
        """Yields events (not `error`: its message goes with the close); says how it ended."""
        ws.settimeout(poll)
        reader = FrameReader(ws.sock, ws.pong)  # large reads: websocket-client's are 16 KiB
        last_frame = time.monotonic()
        end = _StreamEnd()
        while True:
            try:
                got = reader.read()
            except OSError:  # reset, or not a server's frame
                return end
            if got is None:
                if time.monotonic() - last_frame > idle_timeout:
                    return end
                continue
            last_frame = time.monotonic()
            opcode, payload = got
            if opcode == OPCODE_CLOSE:
                end.code, reason = _close_info(payload)
                end.ended = end.code == CLOSE_JOB_ENDED
                end.message = end.message or reason or None
                return end
            if opcode == OPCODE_BINARY:
                decoded = LogEvent.from_binary(payload)
                if decoded is None:  # a kind of binary frame this client does not know
                    continue
                event = decoded
            elif opcode == OPCODE_TEXT:
                event = LogEvent.from_frame(json.loads(payload.decode("utf-8")))
            else:
                continue
            if event.type == "error":
                end.message, end.field = event.reason, event.field
                continue
            if event.type == "data" and event.rank is not None and event.offset is not None:
                positions[event.rank] = event.offset
                end.progressed = True
            yield event


@dataclass
class _StreamEnd:
    """How one connection of a followed log ended."""

    ended: bool = False
    progressed: bool = False
    code: int | None = None
    message: str | None = None
    field: str | None = None


def _close_info(data: bytes) -> tuple[int, str]:
    if len(data) < 2:
        return 1005, ""
    return int.from_bytes(data[:2], "big"), data[2:].decode("utf-8", "replace")


def _quote(job_id: str) -> str:
    return urllib.parse.quote(job_id, safe="")


__all__ = [
    "HyperPodClient",
    "LogEvent",
    "ServerInfo",
    "ServerUnreachable",
    "api_root",
    "find_server",
]
