"""kmock's KubernetesEmulator with the gaps DESIGN.md lists filled in, served over real HTTP from a
thread so that the real `kubernetes` client talks to it unchanged.

Filled in here (test code only): create answers 201 with uid/resourceVersion/creationTimestamp,
updates bump resourceVersion, `labelSelector`/`fieldSelector`/`limit`+`continue` on lists, lists
carry kind/apiVersion, watches from a `resourceVersion` with bookmarks and 410 Gone once it is too
old (watch_history.py), watches end after `timeoutSeconds`, `/version/`, pod logs (`/log`, with `follow`), bearer-token checks (401),
per-resource refusals (403), validating admission per resource (422: the CRD schemas and the
training operator's webhook, registered by conftest.py), and the resources the operator doubles
and task governance use (Services, Kueue LocalQueues and WorkloadPriorityClasses).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import aiobus, enums, rendering

from .watch_history import WatchHistory, expired

RESOURCES = [
    "v1/pods",
    "v1/nodes",
    "v1/events",
    "v1/namespaces",
    "v1/services",
    "kubeflow.org/v1/pytorchjobs",
    "sagemaker.amazonaws.com/v1/hyperpodpytorchjobs",
    # Kueue's CRDs (kueue config/components/crd/bases): what a cluster with Kueue installed serves.
    "kueue.x-k8s.io/v1beta1/localqueues",
    "kueue.x-k8s.io/v1beta1/clusterqueues",
    "kueue.x-k8s.io/v1beta1/resourceflavors",
    "kueue.x-k8s.io/v1beta1/workloads",
    "kueue.x-k8s.io/v1beta1/workloadpriorityclasses",
]
# Kubeflow Trainer v2 (github.com/kubeflow/trainer, manifests/base/crds/trainer.kubeflow.org_trainjobs
# .yaml): a cluster with Trainer installed serves it; EmulatorThread(served=[*RESOURCES, TRAINJOBS]).
TRAINJOBS = "trainer.kubeflow.org/v1alpha1/trainjobs"
CLUSTER_SCOPED = {
    "nodes",
    "namespaces",
    "workloadpriorityclasses",
    "clusterqueues",
    "resourceflavors",
}
# The verbs a CRD's resource lists in discovery (apiextensions-apiserver: customresource_handler
# serves get, list, watch, create, update, patch, delete, deletecollection).
CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "events": "Event",
    "namespaces": "Namespace",
    "services": "Service",
    "localqueues": "LocalQueue",
    "clusterqueues": "ClusterQueue",
    "resourceflavors": "ResourceFlavor",
    "workloads": "Workload",
    "workloadpriorityclasses": "WorkloadPriorityClass",
    "pytorchjobs": "PyTorchJob",
    "hyperpodpytorchjobs": "HyperPodPyTorchJob",
    "trainjobs": "TrainJob",
}
_GROUP_VERSION = re.compile(r"^/apis/([^/]+)/([^/]+)/?$")


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def split_selector(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b=c`."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


_SET_RE = re.compile(r"^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$")


def label_match(labels: dict[str, str], selector: str) -> bool:
    for requirement in split_selector(selector):
        match = _SET_RE.match(requirement)
        if match:
            key, op, values = (
                match.group(1),
                match.group(2),
                {v.strip() for v in match.group(3).split(",")},
            )
            inside = key in labels and labels[key] in values
            if (op == "in") != inside:
                return False
        elif "!=" in requirement:
            key, value = requirement.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in requirement:
            key, value = requirement.split("==" if "==" in requirement else "=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif requirement.startswith("!"):
            if requirement[1:] in labels:
                return False
        elif requirement not in labels:
            return False
    return True


def field_match(obj: dict[str, Any], selector: str) -> bool:
    for requirement in split_selector(selector):
        if "!=" in requirement:
            path, value = requirement.split("!=", 1)
            if str(dig(obj, path.strip()) or "") == value.strip():
                return False
        else:
            path, value = requirement.split("==" if "==" in requirement else "=", 1)
            if str(dig(obj, path.strip()) or "") != value.strip():
                return False
    return True


def normalize_quantities(obj: Any) -> None:
    """The API server stores resource quantities as strings (`1` comes back as "1")."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("requests", "limits", "allocatable", "capacity") and isinstance(value, dict):
                obj[key] = {
                    k: str(v) if isinstance(v, (int, float)) else v for k, v in value.items()
                }
            else:
                normalize_quantities(value)
    elif isinstance(obj, list):
        for item in obj:
            normalize_quantities(item)


LOG_COPY_BYTES = 32 * 1024
"""The most a log stream's HTTP chunk holds (Go's io.Copy buffer: `_copy_log`)."""


class LogStore:
    """Container logs written by the test controller (any thread), read by the emulator."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.instances: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def start(self, namespace: str, pod: str) -> None:
        with self.lock:
            self.instances.setdefault((namespace, pod), []).append(
                {"data": bytearray(), "done": False}
            )

    def write(self, namespace: str, pod: str, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
        with self.lock:
            self.instances[(namespace, pod)][-1]["data"] += data

    def finish(self, namespace: str, pod: str) -> None:
        with self.lock:
            for instance in self.instances.get((namespace, pod), []):
                instance["done"] = True

    def read(
        self,
        namespace: str,
        pod: str,
        offset: int,
        previous: bool = False,
        limit: int | None = None,
    ) -> tuple[bytes, bool] | None:
        """The log from `offset` (at most `limit` bytes) and whether the container has ended;
        None before it started. Only what is returned is copied: a stream reads its log a piece
        at a time, as the kubelet reads the container's log file through a buffered reader
        (`ReadLogs`, pkg/kubelet/kuberuntime/logs/logs.go)."""
        with self.lock:
            instances = self.instances.get((namespace, pod))
            if not instances or (previous and len(instances) < 2):
                return None
            instance = instances[-2] if previous else instances[-1]
            end = len(instance["data"]) if limit is None else offset + limit
            with memoryview(instance["data"]) as view:
                return bytes(view[offset:end]), instance["done"]


@attrs.define(kw_only=True)
class HyperPodEmulator(kmock.KubernetesEmulator):
    logs: LogStore = attrs.field(factory=LogStore)
    token_check: Callable[[str], bool] | None = None
    denied_resources: set[str] = attrs.field(factory=set)
    admission: dict[str, Callable[[dict[str, Any]], str | None]] = attrs.field(factory=dict)
    """Validating admission by plural (an operator's webhook): a message refuses the create."""
    served: list[str] = attrs.field(factory=lambda: list(RESOURCES))
    serving: bool = True
    """False while the server is being stopped: open log streams end (the connection drops)."""
    history: WatchHistory = attrs.field(factory=WatchHistory)
    exec_runner: Callable[[str, str, str, list[str]], tuple[int, str, str] | None] | None = None
    """`pods/exec`: runs (namespace, pod, container, command) in the container (the kubelet
    double's exec_in); None: no kubelet to ask."""
    """Revisions and recent changes per resource: what watches are served from."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for resource in self.served:
            self.resources[resource] = {}
        # kmock announces every write on a bus per resource: record each at its revision.
        self._buses = _RecordingBuses(self.history)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if len(self._requests) > 5000:
            # kmock keeps every request (with its aiohttp request) for assertions: keep the recent.
            del self._requests[:-1000]
        if request.url.path.rstrip("/") == "/version":
            return aiohttp.web.json_response(
                {
                    "major": "1",
                    "minor": "31",
                    "gitVersion": "v1.31.0-eks-emulated",
                    "gitCommit": "0" * 40,
                    "gitTreeState": "clean",
                    "buildDate": "2025-01-01T00:00:00Z",
                    "goVersion": "go1.23",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                }
            )
        refusal = self._refuse(request)
        if refusal is not None:
            return refusal
        discovery = _GROUP_VERSION.match(request.url.path)
        if discovery and request.method == enums.method.GET:
            return self._discover(*discovery.groups())
        if request.subresource == "log" and request.method == enums.method.GET:
            return await self._serve_log(request)
        if request.subresource == "exec":
            return await self._serve_exec(request)
        if request.action == enums.action.CREATE and isinstance(request.data, dict):
            check = self.admission.get(request.resource.plural if request.resource else "")
            refused = check(request.data) if check else None
            if refused:
                return self._status(422, "Invalid", refused)
            meta = request.data.setdefault("metadata", {})
            meta.setdefault("namespace", request.namespace) if request.namespace else None
            meta["uid"] = str(uuid.uuid4())
            # (its resourceVersion is the revision the write is recorded at: watch_history.py)
            meta["creationTimestamp"] = now_iso()
            meta.setdefault("generation", 1)
            normalize_quantities(request.data)
        response = await super()._handle(request)
        if request.action == enums.action.CREATE and response.status == 200:
            response.set_status(201)
        return response

    def _discover(self, group: str, version: str) -> aiohttp.web.Response:
        """`GET /apis/{group}/{version}`: the APIResourceList of what this group version serves,
        as the API server answers it (Kubernetes docs, "The Kubernetes API" > Discovery API;
        apimachinery pkg/apis/meta/v1 types.go APIResource: name, singularName, namespaced,
        kind, verbs); 404 for a group version the cluster does not serve (no CRD installed).
        kmock's own answer gives kind and namespaced wrong (`Trainjobs`, null), which the real
        client's V1APIResource refuses."""
        prefix = f"{group}/{version}/"
        plurals = [r[len(prefix) :] for r in self.served if r.startswith(prefix)]
        if not plurals:
            return self._status(404, "NotFound", "the server could not find the requested resource")
        resources = [
            {
                "name": plural,
                "singularName": KINDS.get(plural, plural).lower(),
                "namespaced": plural not in CLUSTER_SCOPED,
                "kind": KINDS.get(plural, plural.capitalize()),
                "verbs": CRD_VERBS,
            }
            for plural in plurals
        ]
        return aiohttp.web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}",
                "resources": resources,
            }
        )

    def _status(self, code: int, reason: str, message: str) -> aiohttp.web.Response:
        body = {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "reason": reason,
            "message": message,
            "code": code,
        }
        return aiohttp.web.json_response(body, status=code)

    def store(self, resource: str, objects: list[dict[str, Any]]) -> None:
        """Write objects straight into the store (fast seeding), each write recorded as a change
        at its own revision like any other (watchers see ADDED, or MODIFIED when it existed)."""
        key = kmock.resource(resource)
        for obj in objects:
            meta = obj["metadata"]
            where = (key, meta.get("namespace"), meta["name"])
            existed = where in self.objects and not self.objects[where].deleted
            self.objects[where] = obj
            self.history.record(
                resource_key(key), "MODIFIED" if existed else "ADDED", self.objects[where].raw
            )

    def _refuse(self, request: rendering.Request) -> aiohttp.web.Response | None:
        if self.token_check is not None:
            header = request.headers.get("Authorization", "")
            token = header[7:] if header.startswith("Bearer ") else ""
            if not self.token_check(token):
                return self._status(401, "Unauthorized", "Unauthorized")
        if request.resource is not None and request.resource.plural in self.denied_resources:
            return self._status(
                403,
                "Forbidden",
                f'{request.resource.plural} is forbidden: User "tester" cannot {(request.action.value if request.action else "get").lower()} '
                f'resource "{request.resource.plural}" in API group "{request.resource.group}"',
            )
        return None

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_list(request)
        items = list(payload["items"])  # type: ignore[index]
        labels = request.params.get("labelSelector")
        fields = request.params.get("fieldSelector")
        if labels:
            items = [
                i
                for i in items
                if label_match((i.get("metadata") or {}).get("labels") or {}, labels)
            ]
        if fields:
            items = [i for i in items if field_match(i, fields)]
        items.sort(
            key=lambda i: (
                (i.get("metadata") or {}).get("namespace") or "",
                (i.get("metadata") or {}).get("name") or "",
            )
        )
        # A list is a consistent read at the current revision: a watch from it misses nothing
        # (api-concepts#efficient-detection-of-changes).
        metadata: dict[str, Any] = {"resourceVersion": str(self.history.revision)}
        limit = int(request.params.get("limit") or 0)
        if limit:
            start = (
                int(base64.b64decode(request.params["continue"]).decode())
                if request.params.get("continue")
                else 0
            )
            if start + limit < len(items):
                metadata["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                metadata["remainingItemCount"] = len(items) - start - limit
            items = items[start : start + limit]
        resource = request.resource
        group_version = (
            "v1" if not resource or not resource.group else f"{resource.group}/{resource.version}"
        )
        kind = KINDS.get(resource.plural if resource else "", "Object")
        return {
            "apiVersion": group_version,
            "kind": f"{kind}List",
            "metadata": metadata,
            "items": items,
        }

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        """`?watch=true`, as api-concepts#semantics-for-watch defines `resourceVersion`: unset or
        "0", the current state as synthetic ADDED events then the changes after it; a version,
        the changes after exactly that one, or one ERROR event with a 410 Status when it is older
        than the history kept (api-concepts#efficient-detection-of-changes). Label and field
        selectors filter the events; `allowWatchBookmarks`, `timeoutSeconds` as the API server."""
        yield b""  # the headers go out at once, as the API server's chunked watch response does
        assert request.resource is not None
        resource = resource_key(request.resource)
        labels = request.params.get("labelSelector")
        fields = request.params.get("fieldSelector")

        def keep(obj: dict[str, Any]) -> bool:
            # (The API server also turns a change that leaves the selection into DELETED; the
            # watches here either have no selector or select on what never changes.)
            if labels and not label_match((obj.get("metadata") or {}).get("labels") or {}, labels):
                return False
            return not (fields and not field_match(obj, fields))

        version = request.params.get("resourceVersion") or ""
        if version in ("", "0"):
            since = self.history.revision
            async with self._lock:
                objects = [
                    obj.raw
                    for (res, namespace, name), obj in self.objects.items()
                    if res == request.resource
                    and not obj.deleted
                    and (request.namespace is None or namespace == request.namespace)
                    and (request.name is None or name == request.name)
                ]
            for obj in objects:
                if keep(obj):
                    yield {"type": "ADDED", "object": obj}
        else:
            try:
                since = int(version)
            except ValueError:
                yield expired(0, self.history.oldest.get(resource, 0))
                return
            if self.history.too_old(resource, since):
                yield expired(since, self.history.oldest.get(resource, 0))
                return
        group_version = (
            f"{request.resource.group}/{request.resource.version}"
            if request.resource.group
            else "v1"
        )
        kind = KINDS.get(request.resource.plural or "", "Object")

        def bookmark(revision: int) -> dict[str, Any]:
            return {
                "apiVersion": group_version,
                "kind": kind,
                "metadata": {"resourceVersion": str(revision)},
            }

        name = request.name

        def wanted(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            if request.namespace is not None and meta.get("namespace") != request.namespace:
                return False
            return (name is None or meta.get("name") == name) and keep(obj)

        async for event in self.history.follow(
            resource,
            since,
            timeout=float(request.params.get("timeoutSeconds") or 0) or None,
            bookmarks=request.params.get("allowWatchBookmarks") == "true",
            bookmark_object=bookmark,
            keep=wanted,
            serving=lambda: self.serving,
        ):
            yield event

    async def _serve_exec(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """`pods/{name}/exec` (API reference, "Pod v1 core": "connect GET/POST
        /api/v1/namespaces/{namespace}/pods/{name}/exec", query `command` (repeated),
        `container`, `stdin`, `stdout`, `stderr`, `tty`), upgraded to a WebSocket with the
        `v4.channel.k8s.io` subprotocol (k8s.io/apimachinery pkg/util/remotecommand): each
        binary message starts with its channel byte, 1 stdout, 2 stderr, 3 the error channel,
        which carries a metav1.Status at the end: `Success`, or `Failure` with reason
        `NonZeroExitCode` and a cause `ExitCode` whose message is the exit code."""
        namespace, pod = request.namespace or "default", request.name or ""
        key = (kmock.resource("v1/pods"), namespace, pod)
        if key not in self.objects or self.objects[key].deleted:
            return self._status(404, "NotFound", f'pods "{pod}" not found')
        raw = request._raw_request
        assert raw is not None
        command = raw.query.getall("command", [])
        container = raw.query.get("container", "")
        if not command:
            return self._status(400, "BadRequest", "you must specify at least 1 command")
        runner = self.exec_runner
        answer = None
        if runner is not None:
            answer = await asyncio.get_running_loop().run_in_executor(
                None, runner, namespace, pod, container, command
            )
        if answer is None:
            return self._status(
                400, "BadRequest", f'container "{container}" in pod "{pod}" is not running'
            )
        code, out, err = answer
        ws = aiohttp.web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(raw)
        if out:
            await ws.send_bytes(b"\x01" + out.encode())
        if err:
            await ws.send_bytes(b"\x02" + err.encode())
        status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        if code:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
        return ws

    async def _serve_log(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        namespace, pod = request.namespace or "default", request.name or ""
        key = (kmock.resource("v1/pods"), namespace, pod)
        if key not in self.objects or self.objects[key].deleted:
            return self._status(404, "NotFound", f'pods "{pod}" not found')
        previous = request.params.get("previous") == "true"
        if self.logs.read(namespace, pod, 0, previous, limit=0) is None:
            return self._status(
                400,
                "BadRequest",
                f'container "pytorch" in pod "{pod}" is waiting to start: ContainerCreating',
            )
        raw = request._raw_request
        assert raw is not None
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(raw)
        await self._copy_log(
            response, namespace, pod, previous, follow=request.params.get("follow") == "true"
        )
        await response.write_eof()
        return response

    async def _copy_log(
        self,
        response: aiohttp.web.StreamResponse,
        namespace: str,
        pod: str,
        previous: bool,
        *,
        follow: bool,
    ) -> None:
        """As the API server streams a log: `responsewriters.StreamObject` (k8s.io/apiserver,
        pkg/endpoints/handlers/responsewriters/writers.go) runs `io.Copy(flushwriter.Wrap(w),
        out)`, and io.Copy reads at most 32 KiB at a time (Go's io.copyBuffer), each write
        flushed: one HTTP chunk of at most 32 KiB per read, never one chunk for the whole log,
        and never more of the log in memory than the read. Each request has a goroutine of its
        own (net/http's `Server.Serve` runs `go c.serve`), so concurrent streams progress
        together: every chunk lets the other streams' coroutines run (aiohttp's write returns
        without yielding while the socket takes the bytes). Following, at the end of the log
        the kubelet waits for the file's next write (`waitLogs`, an fsnotify watch, in the same
        logs.go) and stops once the container is not running; the double looks again every
        10 ms until the container has ended."""
        offset = 0
        while self.serving:
            piece = self.logs.read(namespace, pod, offset, previous, limit=LOG_COPY_BYTES)
            if piece is None:
                return
            data, done = piece
            if data:
                await response.write(data)
                offset += len(data)
                await asyncio.sleep(0)
            elif done or not follow:
                return
            else:
                await asyncio.sleep(0.01)


def resource_key(resource: Any) -> str:
    return f"{resource.group or ''}/{resource.plural}"


class _RecordingBus(aiobus.Bus[Any]):
    """kmock's per-resource bus of write events, also recorded in the history at a revision."""

    def __init__(self, history: WatchHistory, resource: str) -> None:
        super().__init__()
        self._history, self._resource = history, resource

    async def put(self, *items: Any) -> None:
        for item in items:
            self._history.record(self._resource, item["type"], item["object"])
        # No one reads kmock's own bus (the watch is served from the history): keep it empty.


class _RecordingBuses(dict[Any, _RecordingBus]):
    def __init__(self, history: WatchHistory) -> None:
        super().__init__()
        self.history = history

    def __missing__(self, resource: Any) -> _RecordingBus:
        bus = self[resource] = _RecordingBus(self.history, resource_key(resource))
        return bus


STOP_GRACE_S = 5.0
"""Seconds a stopping server waits for a connection that sends no request before it drops it:
Go's `http.Server.Shutdown`, which kube-apiserver stops with, closes idle connections at once
and a new one whose first request header has not come in over 5 seconds (net/http server.go
`closeIdleConns`, Go issue 22682)."""


class EmulatorThread:
    """The emulator on 127.0.0.1 in its own event loop thread; the server can be stopped and
    restarted on the same port (an API server outage)."""

    def __init__(self, served: list[str] | None = None) -> None:
        self.served = served
        self.loop = asyncio.new_event_loop()
        self.emulator: HyperPodEmulator | None = None
        self.server: kmock.Server | None = None
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, name="kmock", daemon=True)

    def run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self._thread.start()

        async def enter() -> None:
            self.emulator = (
                HyperPodEmulator(served=self.served) if self.served else HyperPodEmulator()
            )
            await self.emulator.__aenter__()

        self.run(enter())
        self.start_server()

    def start_server(self) -> None:
        restart = bool(self.port)

        async def enter() -> None:
            assert self.emulator is not None
            if restart:
                # A restarted kube-apiserver's watch cache starts at the current revision (cacher:
                # it lists etcd once): a watch from an older version gets 410 and relists.
                self.emulator.history.compact()
            self.emulator.serving = True
            kwargs = {"port": self.port} if self.port else {}
            self.server = kmock.Server(self.emulator, **kwargs)
            await self.server.__aenter__()
            self.port = self.server.port

        self.run(enter())

    def stop_server(self) -> None:
        async def leave() -> None:
            if self.server is not None:
                assert self.emulator is not None
                self.emulator.serving = False
                server, self.server = self.server, None
                closing = asyncio.ensure_future(server.__aexit__(None, None, None))
                await asyncio.wait({closing}, timeout=STOP_GRACE_S)
                if not closing.done():
                    # A client connecting as aiohttp stops (a watch started again the moment
                    # the last one ended) gets a connection that aiohttp's graceful shutdown
                    # never closes: it would wait out its 60-s shutdown_timeout. Go's closes
                    # such a connection (STOP_GRACE_S); every stream of the double has ended
                    # by then (`serving` is False), so what is left is closed here.
                    web_server = server.server.runner.server if server.server.runner else None
                    for connection in web_server.connections if web_server else []:
                        connection.force_close()
                await closing

        self.run(leave())

    def stop(self) -> None:
        self.stop_server()

        async def leave() -> None:
            if self.emulator is not None:
                await self.emulator.__aexit__(None, None, None)

        try:
            self.run(leave(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        """Store an object directly (fast seeding of thousands of nodes)."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("resourceVersion", "1")
        meta.setdefault("creationTimestamp", now_iso())

        async def store() -> None:
            assert self.emulator is not None
            self.emulator.store(resource, [obj])

        self.run(store())

    def put_many(self, resource: str, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("resourceVersion", "1")
            meta.setdefault("creationTimestamp", now_iso())
            normalize_quantities(obj)

        async def store() -> None:
            assert self.emulator is not None
            self.emulator.store(resource, objects)

        self.run(store(), timeout=120)

    def write_kubeconfig(
        self, path: Path, *, token: str = "test-token", context: str = "emulated"
    ) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
