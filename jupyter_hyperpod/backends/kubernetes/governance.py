"""What the cluster offers, read once and kept a while: which job kinds it serves (API discovery)
and its Kueue task governance (LocalQueues per namespace, WorkloadPriorityClasses)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ...core.errors import HyperPodError, NotFound
from .client import KubeClient

KUEUE = ("kueue.x-k8s.io", "v1beta1")
KNOWN_TTL_S = 300.0
UNKNOWN_TTL_S = 15.0


class _Cached:
    """One value per key, recomputed after its time to live (shorter when it was unknown)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            cached = self._values.get(key)
            if cached and now < cached[0]:
                return cached[1]
        value = compute()
        ttl = UNKNOWN_TTL_S if value is None else KNOWN_TTL_S
        with self._lock:
            self._values[key] = (now + ttl, value)
        return value


class KindDiscovery:
    """Whether the cluster serves a custom resource: True, False (its API group answers 404 or
    lists other resources), or None when the API cannot be asked now."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._cache = _Cached()

    def serves(self, kind: tuple[str, str, str, str]) -> bool | None:
        group, version, plural, _name = kind
        return self._cache.get(kind, lambda: self._ask(group, version, plural))  # type: ignore[no-any-return]

    def _ask(self, group: str, version: str, plural: str) -> bool | None:
        try:
            body = self.kube.call_json(
                f"discover {group}/{version}",
                self.kube.custom.get_api_resources,
                group,
                version,
            )
        except NotFound:
            return False
        except HyperPodError:
            return None
        return any(item.get("name") == plural for item in body.get("resources") or [])


class TaskGovernance:
    """Kueue's queues and priority classes, as choices for a job (None: no Kueue, or unreadable)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._discovery = KindDiscovery(kube)
        self._cache = _Cached()

    def installed(self) -> bool:
        return bool(self._discovery.serves((*KUEUE, "localqueues", "LocalQueue")))

    def local_queues(self, namespaces: list[str]) -> dict[str, list[str]] | None:
        if not self.installed():
            return None
        return self._cache.get(("queues", tuple(namespaces)), lambda: self._queues(namespaces))  # type: ignore[no-any-return]

    def priority_classes(self) -> list[str] | None:
        if not self._discovery.serves((*KUEUE, "workloadpriorityclasses", "WorkloadPriorityClass")):
            return None
        return self._cache.get("priorities", self._priorities)  # type: ignore[no-any-return]

    def _queues(self, namespaces: list[str]) -> dict[str, list[str]] | None:
        queues: dict[str, list[str]] = {}
        for namespace in namespaces:
            try:
                body = self.kube.call_json(
                    f"list the Kueue LocalQueues of namespace {namespace}",
                    self.kube.custom.list_namespaced_custom_object,
                    *KUEUE,
                    namespace,
                    "localqueues",
                )
            except HyperPodError:
                return None
            queues[namespace] = sorted(
                (item.get("metadata") or {}).get("name", "") for item in body.get("items") or []
            )
        return queues

    def _priorities(self) -> list[str] | None:
        try:
            body = self.kube.call_json(
                "list the Kueue WorkloadPriorityClasses",
                self.kube.custom.list_cluster_custom_object,
                *KUEUE,
                "workloadpriorityclasses",
            )
        except HyperPodError:
            return None
        items = sorted(
            body.get("items") or [], key=lambda item: -int(item.get("value") or 0)
        )  # highest priority first, as a person picks
        return [(item.get("metadata") or {}).get("name", "") for item in items]
