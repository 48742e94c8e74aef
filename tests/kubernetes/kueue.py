"""The Kueue double (HyperPod task governance is Kueue): what Kueue does with a job labelled
`kueue.x-k8s.io/queue-name`, against the emulator over HTTP with the real `kubernetes` client.
Each rule names the file of kubernetes-sigs/kueue it follows:

- installing Kueue adds its CRDs (Workload, ClusterQueue, ResourceFlavor; LocalQueue and
  WorkloadPriorityClass the emulator already serves) to the API server: `install`;
- its mutating webhook suspends a queued job on create (`pkg/controller/jobframework/
  defaults.go` ApplyDefaultForSuspend: a job with a queue name is created suspended; for a
  Kubeflow job `spec.runPolicy.suspend`), before the API server validates it;
- its job reconciler makes one Workload per job (`pkg/controller/jobframework/reconciler.go`
  constructWorkload): named `<kind lowercased>-<job>-<5 hex of sha1(kind, group, name, uid)>`
  (`jobframework/workload_names.go` GetWorkloadNameForOwnerWithGVK), owned by the job
  (ownerReferences, controller), labelled `kueue.x-k8s.io/job-uid=<uid>`, `spec.queueName`, one
  pod set per replica type named after it lowercased (`pkg/controller/jobs/kubeflow/kubeflowjob`
  PodSets) with its count and the summed requests of its containers;
- its scheduler admits in creation order within the ClusterQueue of the LocalQueue
  (`pkg/scheduler/scheduler.go`); the flavor assigner (`pkg/scheduler/flavorassigner/
  flavorassigner.go` fitsResourceQuota) refuses a request above the flavor's nominal quota with
  "insufficient quota for R in flavor F, request > maximum capacity (X > Y)", one that fits the
  quota but not what is left with "insufficient unused quota for R in flavor F, N more needed",
  and a resource the ClusterQueue does not cover with "resource R unavailable in ClusterQueue";
  the message is prefixed "couldn't assign flavors to pod set P: " (`flavorassigner/
  assignment.go` Message). Not admitted: condition QuotaReserved False reason Pending with that
  message, and a Warning event Pending on the Workload (scheduler.go requeueAndUpdate,
  `pkg/workload/workload.go` UnsetQuotaReservationWithCondition). Admitted: QuotaReserved True
  ("Quota reserved in ClusterQueue C") and Admitted True ("The workload is admitted"), then the
  job reconciler unsuspends the job (reconciler.go startJob);
- a finished job's Workload gets Finished True and frees its quota (reconciler.go
  finishWorkload).

Not modelled: cohorts and borrowing, preemption, admission checks, several flavors per resource
(the first flavor that covers a resource is the one), partial admission.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import threading
import uuid
from typing import Any

from kubernetes import client
from kubernetes.utils import parse_quantity

from .emulator import KINDS, HyperPodEmulator, now_iso

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
CRDS = {
    "workloads": "Workload",
    "clusterqueues": "ClusterQueue",
    "resourceflavors": "ResourceFlavor",
}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_KINDS = {
    "pytorchjobs": ("kubeflow.org", "v1", "PyTorchJob"),
    "hyperpodpytorchjobs": ("sagemaker.amazonaws.com", "v1", "HyperPodPyTorchJob"),
}
POLL_S = 0.2


def install(emulator: HyperPodEmulator) -> None:
    """Kueue's CRDs in the API server, and its webhook before each job kind's validation."""
    for plural, kind in CRDS.items():
        emulator.resources[f"{GROUP}/{VERSION}/{plural}"] = {}
        KINDS[plural] = kind
    for plural in JOB_KINDS:
        validate = emulator.admission.get(plural)

        def admit(job: dict[str, Any], validate: Any = validate) -> str | None:
            # The API server runs mutating admission before validation: the object checked
            # and stored is the suspended one.
            suspend_if_queued(job)
            return validate(job) if validate else None

        emulator.admission[plural] = admit


def suspend_if_queued(job: dict[str, Any]) -> None:
    """jobframework ApplyDefaultForSuspend: a job with a queue name is created suspended."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    if labels.get(QUEUE_LABEL):
        job.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = True


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """workload_names.go GetWorkloadNameForOwnerWithGVK."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    return f"{kind.lower()}-{name}"[:247] + "-" + digest[:5]


def pod_sets(job: dict[str, Any], plural: str) -> list[dict[str, Any]]:
    """One pod set per replica type: its name, count and the requests of one pod."""
    spec = job.get("spec") or {}
    if plural == "pytorchjobs":
        replicas = [
            (rtype.lower(), rspec)
            for rtype, rspec in (spec.get("pytorchReplicaSpecs") or {}).items()
        ]
    else:
        # Not public: how the HyperPod operator names its pod sets for Kueue (the CRD has
        # status.podSets "used by Kueue"); here the replicaSpec's name.
        replicas = [(r.get("name") or "pods", r) for r in spec.get("replicaSpecs") or []]
    sets = []
    for name, rspec in replicas:
        requests: dict[str, Any] = {}
        for container in ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []:
            for resource, amount in (
                (container.get("resources") or {}).get("requests") or {}
            ).items():
                requests[resource] = requests.get(resource, 0) + parse_quantity(str(amount))
        sets.append({"name": name, "count": int(rspec.get("replicas") or 1), "requests": requests})
    return sets


def amount(value: Any) -> str:
    """A quantity as Kueue prints it (resources.ResourceQuantityString): whole numbers plain."""
    return str(int(value)) if value == int(value) else str(value)


class Kueue(threading.Thread):
    """Kueue's job reconciler and scheduler, polling the jobs of both kinds cluster-wide."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(name="test-kueue", daemon=True)
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.reported: dict[str, str] = {}

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.reconcile()
            except Exception as exc:  # the API server restarting: try again
                self.errors.append(repr(exc))
            self.stopping.wait(POLL_S)

    def stop(self) -> None:
        self.stopping.set()
        self.join(5)

    def reconcile(self) -> None:
        workloads = {
            (w["metadata"]["namespace"], w["metadata"]["labels"].get(JOB_UID_LABEL, "")): w
            for w in self.custom.list_cluster_custom_object(GROUP, VERSION, "workloads")["items"]
        }
        jobs = []
        for plural, (group, version, kind) in JOB_KINDS.items():
            for job in self.custom.list_cluster_custom_object(group, version, plural)["items"]:
                meta = job["metadata"]
                if not (meta.get("labels") or {}).get(QUEUE_LABEL):
                    continue
                key = (meta["namespace"], meta["uid"])
                if key not in workloads:
                    workloads[key] = self.create_workload(job, plural, group, version, kind)
                jobs.append((job, plural, group, version, workloads[key]))
        live_uids = {(j["metadata"]["namespace"], j["metadata"]["uid"]) for j, *_ in jobs}
        usage: dict[str, dict[str, Any]] = {}
        pending = []
        for key, workload in workloads.items():
            if key not in live_uids:
                continue  # its job was deleted: the garbage collector deletes the Workload
            job_tuple = next(t for t in jobs if t[4] is workload)
            job = job_tuple[0]
            if self.condition(workload, "Finished"):
                continue
            if self.condition(workload, "Admitted"):
                if finished(job):
                    self.set_conditions(
                        workload, [("Finished", "True", "Succeeded", "Job finished")]
                    )
                    continue
                queue = self.cluster_queue(workload)
                for pod_set in workload["spec"]["podSets"]:
                    for resource, value in self.total(pod_set).items():
                        used = usage.setdefault(queue or "", {})
                        used[resource] = used.get(resource, 0) + value
                continue
            pending.append(job_tuple)
        pending.sort(key=lambda t: t[4]["metadata"]["creationTimestamp"])
        for job, plural, group, version, workload in pending:
            self.schedule(job, plural, group, version, workload, usage)

    # -- the job reconciler ---------------------------------------------------------------
    def create_workload(
        self, job: dict[str, Any], plural: str, group: str, version: str, kind: str
    ) -> dict[str, Any]:
        meta = job["metadata"]
        sets = pod_sets(job, plural)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Workload",
            "metadata": {
                "name": workload_name(kind, group, meta["name"], meta["uid"]),
                "namespace": meta["namespace"],
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": f"{group}/{version}",
                        "kind": kind,
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "queueName": meta["labels"][QUEUE_LABEL],
                "podSets": [
                    {
                        "name": s["name"],
                        "count": s["count"],
                        "requests": {r: amount(v) for r, v in s["requests"].items()},
                    }
                    for s in sets
                ],
            },
        }
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], "workloads", body
        )
        return created

    def unsuspend(self, job: dict[str, Any], plural: str, group: str, version: str) -> None:
        """reconciler.go startJob: the admitted job runs (runPolicy.suspend false)."""
        self.custom.patch_namespaced_custom_object(
            group,
            version,
            job["metadata"]["namespace"],
            plural,
            job["metadata"]["name"],
            {"spec": {"runPolicy": {"suspend": False}}},
        )

    # -- the scheduler --------------------------------------------------------------------
    def cluster_queue(self, workload: dict[str, Any]) -> str | None:
        with contextlib.suppress(client.ApiException):
            local = self.custom.get_namespaced_custom_object(
                GROUP,
                VERSION,
                workload["metadata"]["namespace"],
                "localqueues",
                workload["spec"]["queueName"],
            )
            return str(local["spec"]["clusterQueue"])
        return None

    @staticmethod
    def total(pod_set: dict[str, Any]) -> dict[str, Any]:
        return {
            resource: parse_quantity(str(value)) * pod_set["count"]
            for resource, value in (pod_set.get("requests") or {}).items()
        }

    def schedule(
        self,
        job: dict[str, Any],
        plural: str,
        group: str,
        version: str,
        workload: dict[str, Any],
        usage: dict[str, dict[str, Any]],
    ) -> None:
        queue = self.cluster_queue(workload)
        if queue is None:
            # (Kueue keeps such a workload out of every queue: the LocalQueue is missing.)
            message = f"LocalQueue {workload['spec']['queueName']} doesn't exist"
            self.refuse(workload, message)
            return
        try:
            cluster_queue = self.custom.get_cluster_custom_object(
                GROUP, VERSION, "clusterqueues", queue
            )
        except client.ApiException:
            self.refuse(workload, f"ClusterQueue {queue} doesn't exist")
            return
        quotas: dict[str, tuple[str, Any]] = {}
        for group_spec in cluster_queue["spec"].get("resourceGroups") or []:
            for flavor in group_spec.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    quotas.setdefault(
                        resource["name"],
                        (flavor["name"], parse_quantity(str(resource["nominalQuota"]))),
                    )
        used = usage.setdefault(queue, {})
        wanted: dict[str, Any] = {}
        for pod_set in workload["spec"]["podSets"]:
            for resource, value in self.total(pod_set).items():
                if value == 0:
                    continue
                if resource not in quotas:
                    self.refuse(
                        workload,
                        f"couldn't assign flavors to pod set {pod_set['name']}: resource "
                        f"{resource} unavailable in ClusterQueue",
                    )
                    return
                flavor, nominal = quotas[resource]
                request = wanted.get(resource, 0) + value
                if request > nominal:
                    self.refuse(
                        workload,
                        f"couldn't assign flavors to pod set {pod_set['name']}: insufficient quota "
                        f"for {resource} in flavor {flavor}, request > maximum capacity "
                        f"({amount(request)} > {amount(nominal)})",
                    )
                    return
                if request > nominal - used.get(resource, 0):
                    more = request - (nominal - used.get(resource, 0))
                    self.refuse(
                        workload,
                        f"couldn't assign flavors to pod set {pod_set['name']}: insufficient "
                        f"unused quota for {resource} in flavor {flavor}, {amount(more)} more needed",
                    )
                    return
                wanted[resource] = request
        for resource, value in wanted.items():
            used[resource] = used.get(resource, 0) + value
        self.set_conditions(
            workload,
            [
                (
                    "QuotaReserved",
                    "True",
                    "QuotaReserved",
                    f"Quota reserved in ClusterQueue {queue}",
                ),
                ("Admitted", "True", "Admitted", "The workload is admitted"),
            ],
            admission={"clusterQueue": queue},
        )
        self.unsuspend(job, plural, group, version)

    def refuse(self, workload: dict[str, Any], message: str) -> None:
        """requeueAndUpdate: QuotaReserved False (reason Pending) and a Warning event Pending,
        once per message (the event's count grows on repeats; one is enough here)."""
        uid = workload["metadata"]["uid"]
        if self.reported.get(uid) == message:
            return
        self.reported[uid] = message
        self.set_conditions(workload, [("QuotaReserved", "False", "Pending", message)])
        namespace = workload["metadata"]["namespace"]
        with contextlib.suppress(client.ApiException):
            self.core.create_namespaced_event(
                namespace,
                {
                    "metadata": {"name": f"{workload['metadata']['name']}.{uuid.uuid4().hex[:8]}"},
                    "involvedObject": {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "Workload",
                        "name": workload["metadata"]["name"],
                        "namespace": namespace,
                        "uid": uid,
                    },
                    "reason": "Pending",
                    "message": message,
                    "type": "Warning",
                    "source": {"component": "kueue-admission"},
                    "count": 1,
                    "firstTimestamp": now_iso(),
                    "lastTimestamp": now_iso(),
                },
            )

    @staticmethod
    def condition(workload: dict[str, Any], ctype: str) -> bool:
        return any(
            c["type"] == ctype and c["status"] == "True"
            for c in (workload.get("status") or {}).get("conditions") or []
        )

    def set_conditions(
        self,
        workload: dict[str, Any],
        conditions: list[tuple[str, str, str, str]],
        admission: dict[str, Any] | None = None,
    ) -> None:
        status = copy.deepcopy(workload.get("status") or {})
        kept = {c["type"]: c for c in status.get("conditions") or []}
        for ctype, value, reason, message in conditions:
            previous = kept.get(ctype)
            kept[ctype] = {
                "type": ctype,
                "status": value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": previous["lastTransitionTime"]
                if previous and previous["status"] == value
                else now_iso(),
            }
        status["conditions"] = list(kept.values())
        if admission:
            status["admission"] = admission
        workload["status"] = status
        with contextlib.suppress(client.ApiException):
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                workload["metadata"]["namespace"],
                "workloads",
                workload["metadata"]["name"],
                {"status": status},
            )


def finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Succeeded", "Failed", "Completed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )
