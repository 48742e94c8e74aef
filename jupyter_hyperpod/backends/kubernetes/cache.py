"""Nodes, pods and the warning events of a namespace kept in memory by the informer pattern
(client-go's Reflector + Store): list once, then watch from the list's `resourceVersion`, apply
ADDED/MODIFIED/DELETED/BOOKMARK, and list again when the version has expired (410 Gone) -- so
that a request is answered from memory, not by listing thousands of objects
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).

An informer may keep an index of its records (client-go's `cache.Indexer`): the pods of one
job, the warning events about one object, found without scanning the rest of the cluster.

Each resource has one daemon thread. A cut connection is watched again from the last version
seen, with backoff (client-go: 800 ms doubling to 30 s); only a 410 costs a full list. Readers use
the memory only while it is `fresh` (listed, and the watch connected or being renewed after the
server ended it): otherwise they list directly, so an unreachable API is still an error and not an
old answer. Only what the views need
is stored: compact node records, for pods the fields for GPU accounting (whole objects only for
the pods of our jobs, without `managedFields`), for events what a job's events show.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ...core.errors import BackendError, HyperPodError
from .client import CONNECT_TIMEOUT, KubeClient
from .manifest import JOB_ID_LABEL
from .nodes import EFA_RESOURCE, GPU_RESOURCES, pod_requests

log = logging.getLogger(__name__)

PAGE = 500
# client-go reflector.go: a watch asks the server to end it after minWatchTimeout (5 min) times
# a random factor in [1, 2), so that watchers do not all reconnect at once.
MIN_WATCH_TIMEOUT_S = 300.0
BACKOFF_INITIAL_S = 0.8
BACKOFF_MAX_S = 30.0
STREAM_CHUNK = 64 * 1024
ACCOUNTED = (*GPU_RESOURCES, EFA_RESOURCE)


class Expired(Exception):
    """The version we would watch from is too old: list again (410 Gone / Expired)."""


def node_record(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of a Node that nodes.node_from_k8s reads (a real Node also carries images,
    volumes and managedFields, many KiB each)."""
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return {
        "metadata": {
            "name": metadata.get("name"),
            "labels": metadata.get("labels") or {},
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "spec": {"unschedulable": (obj.get("spec") or {}).get("unschedulable")},
        "status": {
            "allocatable": status.get("allocatable"),
            "capacity": status.get("capacity"),
            "conditions": [c for c in status.get("conditions") or [] if c.get("type") == "Ready"],
        },
    }


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the cache keeps it: where it runs, its phase and what it holds of the accounted
    resources; `obj` (whole, without managedFields) only for the pods of jobs we submitted."""

    namespace: str
    name: str
    node: str | None
    phase: str | None
    holds: tuple[tuple[str, float], ...]
    job: str | None
    obj: dict[str, Any] | None


def pod_record(obj: dict[str, Any]) -> PodRecord:
    metadata = obj.get("metadata") or {}
    job = (metadata.get("labels") or {}).get(JOB_ID_LABEL)
    kept = None
    if job:
        kept = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    holds = tuple((r, v) for r in ACCOUNTED if (v := pod_requests(obj, r)))
    return PodRecord(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        node=(obj.get("spec") or {}).get("nodeName"),
        phase=(obj.get("status") or {}).get("phase"),
        holds=holds,
        job=job,
        obj=kept,
    )


def pod_job(record: PodRecord) -> str | None:
    """A pod of one of our jobs is found by "<namespace>/<job id>"."""
    return f"{record.namespace}/{record.job}" if record.job and record.obj is not None else None


def event_record(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of a core/v1 Event that jobs.format_events reads (an events.k8s.io/v1 one's
    `regarding` and `note` under their core/v1 names)."""
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return {
        "involvedObject": {"kind": involved.get("kind"), "name": involved.get("name")},
        "reason": obj.get("reason"),
        "message": obj.get("message") or obj.get("note"),
        "count": obj.get("count"),
        "type": obj.get("type"),
        "lastTimestamp": obj.get("lastTimestamp"),
        "eventTime": obj.get("eventTime"),
        "metadata": {"creationTimestamp": (obj.get("metadata") or {}).get("creationTimestamp")},
    }


def event_about(record: dict[str, Any]) -> str | None:
    """An event is found by the name of the object it is about."""
    return record["involvedObject"].get("name")


def _key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


class Informer:
    """One resource in memory, kept current by list + watch on a background thread; `index`:
    the value a record is found by with `indexed` (None: not indexed)."""

    def __init__(
        self,
        kube: KubeClient,
        what: str,
        list_fn: Callable[[KubeClient], Callable[..., Any]],
        transform: Callable[[dict[str, Any]], Any],
        *,
        watch_timeout: float = MIN_WATCH_TIMEOUT_S,
        index: Callable[[Any], str | None] | None = None,
    ) -> None:
        self.kube = kube
        self.what = what
        self.list_fn = list_fn
        self.transform = transform
        self.watch_timeout = watch_timeout
        self.index = index
        self.resource_version = ""
        self.version = 0
        """Bumped by every applied change: readers memoize what they derive on it."""
        self.relists = 0
        """Lists made, the first included."""
        self.expired = 0
        """Watches the server ended with 410 Gone (each one costs a list)."""
        self.error: str | None = None
        self._listed_at: float | None = None  # monotonic time of the last complete list
        self._event_at: float | None = None  # ... and of the last watch event (bookmarks too)
        self._items: dict[str, Any] = {}
        self._indexed: dict[str, dict[str, Any]] = {}  # index value -> key -> record
        self._lock = threading.Lock()
        self._synced = False
        self._connected = False
        self._since = time.monotonic()  # when `_connected` last changed
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"k8s-informer-{self.what}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- what readers see ---------------------------------------------------------------------
    @property
    def fresh(self) -> bool:
        """Listed, and the watch is connected: memory is as current as the API's last event."""
        return self._synced and self._connected

    def items(self) -> tuple[list[Any], int]:
        """The stored records and the version they are at."""
        with self._lock:
            return list(self._items.values()), self.version

    def indexed(self, value: str) -> list[Any]:
        """The stored records whose index is `value`: as many as there are, not a scan."""
        with self._lock:
            return list(self._indexed.get(value, {}).values())

    def _add_to_index(self, indexed: dict[str, dict[str, Any]], key: str, record: Any) -> None:
        value = self.index(record) if self.index is not None else None
        if value is not None:
            indexed.setdefault(value, {})[key] = record

    def _store(self, key: str, record: Any) -> None:
        """Store (or replace) one record and keep the index in step; under the lock."""
        self._unstore(key)
        self._items[key] = record
        self._add_to_index(self._indexed, key, record)

    def _unstore(self, key: str) -> None:
        old = self._items.pop(key, None)
        value = self.index(old) if old is not None and self.index is not None else None
        if value is not None and value in self._indexed:
            bucket = self._indexed[value]
            bucket.pop(key, None)
            if not bucket:
                del self._indexed[value]

    def status(self) -> dict[str, Any]:
        """synced, connected, for how long the memory may be stale (0 while connected), the
        ages of the last list and event, lists and 410s, and the last failure."""
        now = time.monotonic()
        stale = 0.0 if self._connected else now - self._since

        def age(at: float | None) -> float | None:
            return None if at is None else round(now - at, 3)

        return {
            "synced": self._synced,
            "connected": self._connected,
            "stale_s": round(stale, 3) if self._synced else None,
            "resource_version": self.resource_version,
            "items": len(self._items),
            "relists": self.relists,
            "expired": self.expired,
            "last_list_age_s": age(self._listed_at),
            "last_event_age_s": age(self._event_at),
            "error": self.error,
        }

    # -- the loop -----------------------------------------------------------------------------
    def _set_connected(self, value: bool) -> None:
        if value != self._connected:
            self._connected = value
            self._since = time.monotonic()

    def _run(self) -> None:
        delay = BACKOFF_INITIAL_S
        while not self._stop.is_set():
            try:
                if not self.resource_version:
                    self._relist()
                self._watch()
                delay = BACKOFF_INITIAL_S
                self.error = None
            except Expired:
                # client-go reflector: on an expired version, relist (no backoff: it is normal).
                log.info(
                    "watch of %s expired at %s: listing again", self.what, self.resource_version
                )
                self.resource_version = ""
                self.expired += 1
                self._set_connected(False)
            except HyperPodError as exc:
                self.error = exc.message
                self._set_connected(False)
                if self._stop.wait(delay * random.uniform(0.8, 1.2)):
                    break
                delay = min(delay * 2, BACKOFF_MAX_S)
            except Exception as exc:  # a bug must not end the thread
                log.exception("informer for %s failed", self.what)
                self.error = str(exc)
                self._set_connected(False)
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, BACKOFF_MAX_S)
        self._set_connected(False)

    def _relist(self) -> None:
        """Every item, page by page; watching starts at the version of the first page (a
        paginated list is one consistent snapshot at that version)."""
        items: dict[str, Any] = {}
        token: str | None = None
        version = ""
        fn = self.list_fn(self.kube)
        while True:
            extra = {"limit": PAGE, **({"_continue": token} if token else {})}
            body = self.kube.call_json(f"list {self.what}", fn, **extra)
            metadata = body.get("metadata") or {}
            version = version or str(metadata.get("resourceVersion") or "")
            for obj in body.get("items") or []:
                items[_key(obj)] = self.transform(obj)
            token = metadata.get("continue") or None
            if not token or self._stop.is_set():
                break
        indexed: dict[str, dict[str, Any]] = {}
        for key, record in items.items() if self.index is not None else ():
            self._add_to_index(indexed, key, record)
        with self._lock:
            self._items, self._indexed = items, indexed
            self.version += 1
            self.resource_version = version
        self.relists += 1
        self._listed_at = time.monotonic()
        self._synced = True

    def _watch(self) -> None:
        """One watch from `resource_version` until the server ends it or the connection drops."""
        timeout = int(self.watch_timeout * random.uniform(1.0, 2.0))
        response = self.kube.call(
            f"watch {self.what}",
            self.list_fn(self.kube),
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            # A server that says nothing for longer than its own timeout is gone.
            _request_timeout=(CONNECT_TIMEOUT, timeout + 30),
        )
        with self._lock:
            self._response = response
        self._set_connected(True)
        self.error = None  # listed and watching again: an earlier failure is over
        opened, count = time.monotonic(), 0
        try:
            for event in _events(response):
                if self._stop.is_set():
                    return
                self._apply(event)
                count += 1
            if not count and time.monotonic() - opened < 1.0 and not self._stop.is_set():
                # client-go reflector.go: "very short watch ... watch lasted less than a second
                # and no items received" is an error (back off), not a renewal.
                raise BackendError(f"watch {self.what}: the API server closed it at once")
        except (Expired, HyperPodError):
            raise
        except Exception as exc:
            if not self._stop.is_set():
                raise self.kube.translate(exc, f"watch {self.what}") from exc
        finally:
            # A watch the server ended (its timeout) is renewed at once from the same version:
            # memory stays current meanwhile. A failure marks it stale (in `_run`).
            with self._lock:
                self._response = None
            with contextlib.suppress(Exception):
                response.release_conn()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        self._event_at = time.monotonic()
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Expired(obj.get("message"))
            raise BackendError(f"watch {self.what}: {obj.get('message') or obj}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            # Only metadata.resourceVersion is meaningful (api-concepts#watch-bookmarks).
            if version:
                self.resource_version = str(version)
            return
        key = _key(obj)
        with self._lock:
            if kind == "DELETED":
                self._unstore(key)
            elif kind in ("ADDED", "MODIFIED"):
                self._store(key, self.transform(obj))
            else:
                return
            self.version += 1
            if version:
                self.resource_version = str(version)


def _events(response: Any) -> Iterator[dict[str, Any]]:
    """The newline-delimited JSON events of a watch response, read in large chunks."""
    pending = b""
    for chunk in response.stream(STREAM_CHUNK, decode_content=True):
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)
    if pending.strip():
        yield json.loads(pending)


WARNINGS_IDLE_S = 600.0
"""A namespace's warning events stop being watched this long after a refresh last needed them."""


class ClusterCache:
    """The nodes and all pods of the cluster, each an `Informer`, started on first use; and the
    warning events of each namespace where a job of ours waits or failed, watched from the first
    refresh that listed them until none has needed them for `WARNINGS_IDLE_S`."""

    def __init__(self, kube: KubeClient, *, watch_timeout: float = MIN_WATCH_TIMEOUT_S) -> None:
        self.kube = kube
        self.watch_timeout = watch_timeout
        self.nodes = Informer(
            kube, "nodes", lambda k: k.core.list_node, node_record, watch_timeout=watch_timeout
        )
        self.pods = Informer(
            kube,
            "pods on all namespaces",
            lambda k: k.core.list_pod_for_all_namespaces,
            pod_record,
            watch_timeout=watch_timeout,
            index=pod_job,
        )
        self._warnings: dict[str, Informer] = {}
        self._warnings_needed: dict[str, float] = {}  # namespace -> monotonic time
        self._started = False
        self._stopped = False  # (a refresh still running at close starts no new watch)
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self.nodes.start()
                self.pods.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            warnings, self._warnings = list(self._warnings.values()), {}
        for informer in [self.nodes, self.pods, *warnings]:
            informer.stop()

    @property
    def started(self) -> bool:
        return self._started

    def status(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes.status(),
            "pods": self.pods.status(),
            "warning_events": {
                namespace: informer.status()
                for namespace, informer in sorted(self.watched_warnings().items())
            },
        }

    def job_pods(self, namespace: str, names: set[str]) -> dict[str, list[dict[str, Any]]] | None:
        """The pods of our jobs by job id, from memory; None when memory is not fresh."""
        if not self.pods.fresh:
            return None
        result: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            records = self.pods.indexed(f"{namespace}/{name}")
            if records:
                result[name] = [record.obj for record in records]
        return result

    # -- warning events, per namespace -----------------------------------------------------
    def warning_events(self, namespace: str, names: set[str]) -> list[dict[str, Any]] | None:
        """The warning events of `namespace` about the objects `names`, from memory; None when
        they are not watched, or not fresh (the caller lists them, then `watch_warnings`)."""
        with self._lock:
            self._warnings_needed[namespace] = time.monotonic()
            informer = self._warnings.get(namespace)
        if informer is None or not informer.fresh:
            return None
        return [event for name in sorted(names) for event in informer.indexed(name)]

    def watch_warnings(self, namespace: str) -> None:
        """Watch `namespace`'s warning events from now on (a list the caller could make: the
        informer is never started where listing was refused)."""
        with self._lock:
            if namespace in self._warnings or self._stopped:
                return
            self._warnings_needed[namespace] = time.monotonic()
            informer = self._warnings[namespace] = Informer(
                self.kube,
                f"warning events in namespace {namespace}",
                # The API server selects events on `type` for a watch as for a list
                # (pkg/registry/core/event/strategy.go, ToSelectableFields).
                lambda k: functools.partial(
                    k.core.list_namespaced_event, namespace, field_selector="type=Warning"
                ),
                event_record,
                watch_timeout=self.watch_timeout,
                index=event_about,
            )
        informer.start()

    def forget_idle_warnings(self, idle_s: float = WARNINGS_IDLE_S) -> list[str]:
        """Stop watching the namespaces no refresh has needed the warnings of for `idle_s`;
        their names."""
        now = time.monotonic()
        with self._lock:
            idle = [
                namespace
                for namespace in self._warnings
                if now - self._warnings_needed.get(namespace, now) > idle_s
            ]
            stopped = [self._warnings.pop(namespace) for namespace in idle]
            for namespace in idle:
                del self._warnings_needed[namespace]
        for informer in stopped:
            informer.stop(timeout=0)  # its thread ends by itself: the refresh does not wait
        return idle

    def watched_warnings(self) -> dict[str, Informer]:
        with self._lock:
            return dict(self._warnings)
