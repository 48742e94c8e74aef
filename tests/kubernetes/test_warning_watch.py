"""The warning events that explain a waiting job come from a watch of its namespace's warnings
(cache.py) once the first refresh has listed them: a refresh then reads the events about its own
objects from an index, however many others the namespace holds. Against the API server double
over HTTP, with the real client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.cache import Informer, event_about, event_record
from jupyter_hyperpod.backends.kubernetes.diagnose import watch_cache_check
from jupyter_hyperpod.backends.kubernetes.manifest import JOB_ID_LABEL, MANAGED_BY, MANAGER
from jupyter_hyperpod.core.backend import StoredJob
from jupyter_hyperpod.core.models import JobSpec, JobState

from .conftest import make_settings, node_object, wait_for, warning_event
from .emulator import EmulatorThread

NAMESPACE = "team-a"


@pytest.fixture
def fresh() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    emulator.put_many("v1/nodes", [node_object(i) for i in range(2)])
    yield emulator
    emulator.stop()


@pytest.fixture
def core(fresh: EmulatorThread, tmp_path: Path) -> Iterator[k8s_client.CoreV1Api]:
    api = k8s_config.new_client_from_config(str(fresh.write_kubeconfig(tmp_path / "admin")))
    yield k8s_client.CoreV1Api(api)
    api.close()


@pytest.fixture
def backend(fresh: EmulatorThread, tmp_path: Path) -> Iterator[KubernetesOrchestrator]:
    fs_root = tmp_path / "fsx"
    fs_root.mkdir()
    kubeconfig = fresh.write_kubeconfig(tmp_path / "kubeconfig")
    orchestrator = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    yield orchestrator
    orchestrator.close()


def waiting_job(fresh: EmulatorThread, name: str) -> StoredJob:
    """A PyTorchJob of ours that the cluster has not started (no status yet)."""
    fresh.put(
        "kubeflow.org/v1/pytorchjobs",
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {MANAGED_BY: MANAGER, JOB_ID_LABEL: name},
            },
            "spec": {},
        },
    )
    return StoredJob(
        id=name,
        spec=JobSpec(name=name, command=["x"], nodes=2),
        state=JobState.PENDING,
        backend_id=name,
        created=time.time(),
        started=None,
        data={"namespace": NAMESPACE, "kind": "PyTorchJob", "workers": 2},
    )


def warn(core: k8s_client.CoreV1Api, name: str, about: str, reason: str, kind: str = "Pod") -> None:
    core.create_namespaced_event(NAMESPACE, warning_event(NAMESPACE, name, about, reason, kind))


def counting_event_lists(
    backend: KubernetesOrchestrator, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The direct lists of events the backend makes from now on (their descriptions)."""
    made: list[str] = []
    list_all = backend.kube.list_all

    def counted(what: str, *args: Any, **kwargs: Any) -> Any:
        if "events" in what:
            made.append(what)
        return list_all(what, *args, **kwargs)

    monkeypatch.setattr(backend.kube, "list_all", counted)
    return made


def events_of(backend: KubernetesOrchestrator, job: StoredJob) -> list[str]:
    return backend.refresh([job])[job.id].events or []


def test_a_waiting_jobs_warnings_come_from_the_watch_after_the_first_list(
    fresh: EmulatorThread,
    core: k8s_client.CoreV1Api,
    backend: KubernetesOrchestrator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = waiting_job(fresh, "waits")
    warn(core, "waits.1", "waits", "FailedCreate", kind="PyTorchJob")
    for index in range(50):  # the namespace's other warnings: never a waiting job's
        warn(core, f"other-{index}.1", f"other-{index}", "BackOff")
    lists = counting_event_lists(backend, monkeypatch)

    # The first refresh lists the namespace's warnings, and starts watching them.
    update = backend.refresh([job])[job.id]
    assert update.state is JobState.PENDING
    assert update.events == ["PyTorchJob waits: FailedCreate: FailedCreate (waits.1)"]
    assert update.state_reason == update.events[-1]
    assert lists == [f"list warning events in namespace {NAMESPACE}"]
    informer = backend._cache.watched_warnings()[NAMESPACE]
    wait_for(lambda: informer.fresh)
    watched = backend.watch_cache_status().warning_events  # GET cluster's, and doctor's
    assert list(watched) == [NAMESPACE]
    assert watched[NAMESPACE].items == 51 and watched[NAMESPACE].connected
    doctor = watch_cache_check(backend)
    assert (
        doctor.status == "pass" and f"; 51 warning events in {NAMESPACE}, listed" in doctor.detail
    )

    # From then on, memory: no list, and a new warning (here about the job's pod) is seen.
    warn(core, "waits-worker-0.1", "waits", "FailedScheduling", kind="Pod")
    seen = wait_for(lambda: len(events := events_of(backend, job)) == 2 and events)
    assert seen == [
        "Pod waits: FailedScheduling: FailedScheduling (waits-worker-0.1)",
        "PyTorchJob waits: FailedCreate: FailedCreate (waits.1)",
    ]
    # An event deleted (its TTL, an hour by default) leaves the job's events.
    core.delete_namespaced_event("waits.1", NAMESPACE)
    wait_for(lambda: events_of(backend, job) == [seen[0]])
    assert lists == [f"list warning events in namespace {NAMESPACE}"]
    assert not any("other-" in line for line in events_of(backend, job))


def test_the_watch_of_warnings_stops_when_no_job_needs_it(
    fresh: EmulatorThread,
    core: k8s_client.CoreV1Api,
    backend: KubernetesOrchestrator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = waiting_job(fresh, "idle")
    warn(core, "idle.1", "idle", "FailedCreate", kind="PyTorchJob")
    lists = counting_event_lists(backend, monkeypatch)
    assert events_of(backend, job)
    informer = backend._cache.watched_warnings()[NAMESPACE]
    wait_for(lambda: informer.fresh)
    assert backend._cache.forget_idle_warnings(idle_s=3600) == []  # needed a moment ago

    assert backend._cache.forget_idle_warnings(idle_s=0) == [NAMESPACE]
    assert backend._cache.watched_warnings() == {}
    wait_for(lambda: not informer.fresh)
    # Needed again: listed again (the stopped watch's memory is not used), then watched again.
    assert events_of(backend, job) == ["PyTorchJob idle: FailedCreate: FailedCreate (idle.1)"]
    assert len(lists) == 2
    assert backend._cache.watched_warnings()[NAMESPACE] is not informer


def test_a_closed_backend_starts_no_watch(
    fresh: EmulatorThread, core: k8s_client.CoreV1Api, backend: KubernetesOrchestrator
) -> None:
    """A refresh still running when the server stops starts no watch that would outlive it."""
    job = waiting_job(fresh, "late")
    warn(core, "late.1", "late", "FailedCreate", kind="PyTorchJob")
    backend._cache.stop()
    assert events_of(backend, job) == ["PyTorchJob late: FailedCreate: FailedCreate (late.1)"]
    assert backend._cache.watched_warnings() == {}


def test_no_watch_where_events_may_not_be_listed(
    fresh: EmulatorThread, backend: KubernetesOrchestrator
) -> None:
    """A user whose role may not list events: the job's state without them, and no watch
    retrying what RBAC refuses."""
    assert fresh.emulator is not None
    job = waiting_job(fresh, "norbac")
    fresh.emulator.denied_resources.add("events")
    update = backend.refresh([job])[job.id]
    assert update.state is JobState.PENDING and not update.events
    assert backend._cache.watched_warnings() == {}


def test_the_index_follows_every_change() -> None:
    """Added, modified to be about another object, deleted, listed again: the index always
    finds exactly the stored records."""
    informer = Informer(None, "warning events", lambda k: None, event_record, index=event_about)  # type: ignore[arg-type]

    def event(name: str, about: str, reason: str, version: int) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": str(version)},
            "involvedObject": {"kind": "Pod", "name": about},
            "reason": reason,
            "type": "Warning",
        }

    def reasons(about: str) -> list[str]:
        return sorted(record["reason"] for record in informer.indexed(about))

    informer._apply({"type": "ADDED", "object": event("e1", "a", "One", 1)})
    informer._apply({"type": "ADDED", "object": event("e2", "a", "Two", 2)})
    informer._apply({"type": "ADDED", "object": event("e3", "b", "Three", 3)})
    assert (reasons("a"), reasons("b")) == (["One", "Two"], ["Three"])
    informer._apply({"type": "MODIFIED", "object": event("e2", "b", "Moved", 4)})
    assert (reasons("a"), reasons("b")) == (["One"], ["Moved", "Three"])
    informer._apply({"type": "DELETED", "object": event("e1", "a", "One", 5)})
    assert reasons("a") == [] and "a" not in informer._indexed
    assert informer.resource_version == "5"
    # A regarding/note event (events.k8s.io/v1) is indexed by what it regards.
    informer._apply(
        {
            "type": "ADDED",
            "object": {
                "metadata": {"name": "e4", "namespace": NAMESPACE, "resourceVersion": "6"},
                "regarding": {"kind": "Pod", "name": "c"},
                "note": "new style",
                "reason": "Four",
                "type": "Warning",
            },
        }
    )
    (record,) = informer.indexed("c")
    assert record["message"] == "new style"
    assert sum(len(bucket) for bucket in informer._indexed.values()) == len(informer._items) == 3

    class Listing:
        """What a list after a 410 answers: the index is rebuilt from it alone."""

        def call_json(self, what: str, fn: Any, **params: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "9"}, "items": [event("e9", "b", "Nine", 9)]}

    informer.kube = Listing()  # type: ignore[assignment]
    informer._relist()
    assert (reasons("a"), reasons("b"), reasons("c")) == ([], ["Nine"], [])
    assert informer.resource_version == "9" and len(informer._items) == 1
