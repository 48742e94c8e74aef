"""The operator doubles the tests run jobs through, against the emulator over HTTP with the real
`kubernetes` client, and the kubelet double (kubelet.py) that really runs their pods.

`KubeflowJob` does what the Kubeflow training operator v1.9.0 does with a `PyTorchJob`; each rule
names the file of kubeflow/training-operator (tag v1.9.0) it follows:

- admission (`pkg/webhooks/pytorch/pytorchjob_webhook.go` validatePyTorchJob): DNS-1035 names,
  known replica types, a container named `pytorch` with an image, Master replicas == 1,
  elasticPolicy needs a Worker, nProcPerNode not with nprocPerNode;
- defaults (`pkg/apis/kubeflow.org/v1/pytorch_defaults.go`): replicas 1, restartPolicy
  OnFailure, the `pytorchjob-port` 23456 on the `pytorch` container, elasticPolicy min/max from
  the workers, nprocPerNode "auto", cleanPodPolicy None;
- the pods `<job>-<type>-<i>` and their headless Services of the same name (`pkg/core/utils.go`
  GenGeneralName, `pkg/controller.v1/common/pod.go` createNewPod, `common/service.go`
  CreateNewService), their labels (`common/job_controller.go` GenLabels, `pkg/util/labels`),
  the replica restartPolicy on the pod (`pkg/core/pod.go` SetRestartPolicy);
- the env of each replica (`pkg/controller.v1/pytorch/envvar.go` setPodEnv, `elastic.go`,
  `master.go`): PYTHONUNBUFFERED; with a Master MASTER_ADDR/PORT, PET_MASTER_ADDR/PORT,
  WORLD_SIZE, RANK, PET_NODE_RANK; PET_NPROC_PER_NODE; with an elasticPolicy PET_RDZV_ENDPOINT
  (`<job>-worker-0:<port>`), PET_RDZV_BACKEND, PET_NNODES (min:max), PET_MAX_RESTARTS...;
  without one PET_NNODES only;
- the status (`pytorchjob_controller.go` UpdateJobStatus, `common/job.go` ReconcileJobs,
  `pkg/core/job.go` PastBackoffLimit/PastActiveDeadline, `pkg/core/status.go`,
  `pkg/util/status.go` setCondition): Created, Running, Succeeded (all workers, or any with an
  elasticPolicy), Failed when a worker fails with restartPolicy Never, when the restarts of the
  running pods reach backoffLimit (pods and Services deleted), or past activeDeadlineSeconds;
  replicaStatuses active/succeeded/failed.

`HyperPodJob` does what AWS documents for a `HyperPodPyTorchJob` (HyperPod training operator docs;
the CRD fields as in sagemaker-hyperpod's hyperpod_pytorch_job_unified_config): pods labelled
`HPJob=<job>`, a job-level restart of every pod on a fault up to `runPolicy.jobMaxRetryCount`,
`status.restartCount` and `latestFaultyPodInstanceList`. Not public, and chosen here: the pod
names (`<job>-<replicaSpec name>-<i>`), the condition types (Created, Running, Restarting,
Completed, Failed, as `kubectl get` shows them in AWS's docs), the pods' restartPolicy (Never: the
operator, not the kubelet, restarts), and how the operator tells each agent its rank and master
(it calls the agent's server; here the `HYPERPOD_DOUBLE_START` env read by hyperpodrun_shim.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import socket
import threading
import time
from typing import Any

from kubernetes import client, watch

from .emulator import LogStore, now_iso
from .kubelet import Kubelet, PodRun
from .log_agent import PodLogMonitor

KINDS = [
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"),
]
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
OPERATOR_NAME = "pytorchjob-controller"  # pytorchjob_controller.go controllerName
DEFAULT_PORT_NAME = "pytorchjob-port"  # pytorch_types.go
DEFAULT_PORT = 23456
DEFAULT_CONTAINER = "pytorch"
RECONCILE_S = 0.1


def validate_pytorchjob(job: dict[str, Any]) -> str | None:
    """pytorchjob_webhook.go validatePyTorchJob (v1.8+ refuse at create; v1.7 had no webhook and
    left such a job Pending for ever)."""
    name = (job.get("metadata") or {}).get("name", "")
    errors: list[str] = []
    if not DNS1035.match(name) or len(name) > 63:
        errors.append(
            f'metadata.name: Invalid value: "{name}": should match: a DNS-1035 label must consist '
            "of lower case alphanumeric characters or '-', start with an alphabetic character, and "
            "end with an alphanumeric character"
        )
    spec = job.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs")
    if not replicas:
        errors.append("spec.pytorchReplicaSpecs: Required value: must be required")
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        if "Worker" not in (replicas or {}):
            errors.append(
                "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic "
                "policy is used"
            )
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errors.append(
                "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"
            )
    for rtype, rspec in (replicas or {}).items():
        path = f"spec.pytorchReplicaSpecs[{rtype}]"
        if rtype not in ("Master", "Worker"):
            errors.append(f'{path}: Unsupported value: "{rtype}"')
        containers = ((rspec or {}).get("template") or {}).get("spec", {}).get("containers") or []
        if not containers:
            errors.append(f"{path}.template.spec.containers: Required value: must be specified")
        if not any(c.get("name") == DEFAULT_CONTAINER for c in containers):
            errors.append(
                f"{path}.template.spec.containers: Required value: must have at least one "
                f"container with name {DEFAULT_CONTAINER}"
            )
        for index, container in enumerate(containers):
            if not container.get("image"):
                errors.append(f"{path}.template.spec.containers[{index}].image: Required value")
        count = (rspec or {}).get("replicas")
        if rtype == "Master" and count not in (None, 1):
            errors.append(f"{path}.replicas: Forbidden: must be 1")
        if rtype == "Worker" and count is not None and count < 1:
            errors.append(f"{path}.replicas: Forbidden: must be at least 1")
    if not errors:
        return None
    return f'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: {"; ".join(errors)}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Controller(threading.Thread):
    """Both operators, watching their kinds cluster-wide, and the kubelet running their pods."""

    def __init__(self, api_client: Any, logs: LogStore, nodes: list[str]) -> None:
        super().__init__(name="test-operators", daemon=True)
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.logs = logs
        self.nodes = nodes
        self.kubelet = Kubelet(self.core, logs)
        self.stopping = threading.Event()
        self.runners: dict[str, JobRunner] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        watchers = [
            threading.Thread(target=self.watch, args=(kind,), daemon=True) for kind in KINDS
        ]
        for watcher in watchers:
            watcher.start()
        self.stopping.wait()

    def watch(self, kind: tuple[str, str, str]) -> None:
        group, version, plural = kind
        while not self.stopping.is_set():
            try:
                stream = watch.Watch().stream(
                    self.custom.list_cluster_custom_object,
                    group,
                    version,
                    plural,
                    timeout_seconds=1,
                )
                for event in stream:
                    obj = event["object"]
                    uid = obj["metadata"]["uid"]
                    if event["type"] == "DELETED":
                        runner = self.runners.get(uid)
                        if runner:
                            runner.deleted.set()
                        continue
                    if uid not in self.runners:
                        cls = KubeflowJob if plural == "pytorchjobs" else HyperPodJob
                        runner = cls(self, obj, kind)
                        self.runners[uid] = runner
                        runner.start()
            except Exception as exc:
                self.errors.append(repr(exc))
                self.stopping.wait(0.2)

    def runner_for(self, name: str) -> JobRunner:
        for runner in self.runners.values():
            if runner.name == name:
                return runner
        raise KeyError(name)

    def end_all_jobs(self) -> None:
        """As if every job had been deleted: their pods end (the tests' isolation)."""
        for runner in list(self.runners.values()):
            runner.deleted.set()
        for runner in list(self.runners.values()):
            runner.join(15)

    def stop(self) -> None:
        self.stopping.set()
        for runner in list(self.runners.values()):
            runner.deleted.set()
        for runner in list(self.runners.values()):
            runner.join(10)
        self.kubelet.stop()
        self.join(5)


class JobRunner(threading.Thread):
    """What both operators share: owner references, pods and their garbage collection."""

    replica_label: str = ""
    # Kubeflow's JobCondition has lastUpdateTime; the HyperPod CRD's has lastProbeTime.
    update_time = "lastUpdateTime"

    def __init__(
        self, controller: Controller, obj: dict[str, Any], kind: tuple[str, str, str]
    ) -> None:
        super().__init__(name=f"operator-{obj['metadata']['name']}", daemon=True)
        self.ctl = controller
        self.obj = copy.deepcopy(obj)
        self.group, self.version, self.plural = kind
        self.uid = obj["metadata"]["uid"]
        self.name = obj["metadata"]["name"]
        self.namespace = obj["metadata"]["namespace"]
        self.deleted = threading.Event()
        self.status: dict[str, Any] = {"conditions": []}
        self.pods: dict[str, PodRun] = {}
        self.services: list[str] = []

    @property
    def stopping(self) -> bool:
        return self.deleted.is_set() or self.ctl.stopping.is_set()

    def owner(self) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": f"{self.group}/{self.version}",
                "kind": self.obj["kind"],
                "name": self.name,
                "uid": self.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    def set_condition(self, ctype: str, status: str, reason: str, message: str) -> None:
        """pkg/util/status.go setCondition: nothing after Failed; Running and Restarting replace
        each other; Succeeded/Failed turn Running False; same status keeps its transition time."""
        conditions: list[dict[str, Any]] = self.status["conditions"]
        if any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
            return
        current = next((c for c in conditions if c["type"] == ctype), None)
        if current and current["status"] == status and current["reason"] == reason:
            return
        now = now_iso()
        condition = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            self.update_time: now,
            "lastTransitionTime": current["lastTransitionTime"]
            if current and current["status"] == status
            else now,
        }
        kept = []
        for existing in conditions:
            if existing["type"] == ctype:
                continue
            if {ctype, existing["type"]} == {"Running", "Restarting"}:
                continue
            if ctype in ("Failed", "Succeeded", "Completed") and existing["type"] == "Running":
                existing["status"] = "False"
            kept.append(existing)
        self.status["conditions"] = [*kept, condition]

    def finished(self) -> bool:
        return any(
            c["type"] in ("Succeeded", "Failed", "Completed") and c["status"] == "True"
            for c in self.status["conditions"]
        )

    def write_status(self) -> None:
        try:
            self.ctl.custom.patch_namespaced_custom_object_status(
                self.group,
                self.version,
                self.namespace,
                self.plural,
                self.name,
                {"status": copy.deepcopy(self.status)},
            )
        except client.ApiException as exc:
            if exc.status == 404:  # deleted (its DELETED event may fall between two watches)
                self.deleted.set()
        except Exception:
            pass  # the API server is down: the next reconcile writes it again

    def read_object(self) -> dict[str, Any] | None:
        """The object as the API server has it now; None (and `deleted` set) once it is gone.
        Raises while the API server cannot answer."""
        try:
            return self.ctl.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
                self.group, self.version, self.namespace, self.plural, self.name
            )
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            self.deleted.set()
            return None

    def still_there(self) -> bool:
        try:
            return self.read_object() is not None
        except Exception:
            return True  # the API server is down: still there as far as we know

    def create_pods(self, pods: list[dict[str, Any]]) -> None:
        """Create the pod objects, then the kubelet (scheduler) takes them (as the real ones
        get them from their watches, moments after the operator's creates)."""
        for pod in pods:
            pod["metadata"]["ownerReferences"] = self.owner()
            self.create_again_on_conflict(self.ctl.core.create_namespaced_pod, pod)
        for pod in pods:
            name = pod["metadata"]["name"]
            self.pods[name] = self.ctl.kubelet.run(self.namespace, pod, self.ctl.nodes)

    def create_again_on_conflict(self, create: Any, body: dict[str, Any]) -> None:
        """Create a pod or Service. Its name may still be held by the one of a deleted job of
        the same name (deleted with propagationPolicy Background: the garbage collector removes
        dependents after their owner, kube-controller-manager garbagecollector.go); the operator
        then gets a 409 and its reconcile is requeued (controller-runtime requeues a Reconcile
        that returned an error, with backoff), so it is tried again until the name is free."""
        deadline = time.monotonic() + 60.0
        while True:
            try:
                create(self.namespace, body)
                return
            except client.ApiException as exc:
                if exc.status != 409 or self.stopping or time.monotonic() > deadline:
                    raise
            self.deleted.wait(0.2)

    def delete_pod(self, name: str) -> None:
        run = self.pods.pop(name, None)
        if run:
            run.delete()
        with contextlib.suppress(client.ApiException):
            self.ctl.core.delete_namespaced_pod(name, self.namespace)

    def create_service(self, name: str, labels: dict[str, str], ports: dict[str, int]) -> None:
        """A headless Service per pod (common/service.go CreateNewService)."""
        self.create_again_on_conflict(
            self.ctl.core.create_namespaced_service,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "labels": labels, "ownerReferences": self.owner()},
                "spec": {
                    "clusterIP": "None",
                    "selector": labels,
                    "ports": [{"name": key, "port": port} for key, port in ports.items()],
                },
            },
        )
        self.services.append(name)
        self.ctl.kubelet.add_service(self.namespace, name)

    def delete_services(self) -> None:
        for name in self.services:
            self.ctl.kubelet.remove_service(self.namespace, name)
            with contextlib.suppress(client.ApiException):
                self.ctl.core.delete_namespaced_service(name, self.namespace)
        self.services = []

    def garbage_collect(self) -> None:
        """The job object is gone: Kubernetes' garbage collector deletes what it owned."""
        for name in list(self.pods):
            self.delete_pod(name)
        self.delete_services()

    def run(self) -> None:
        try:
            self.reconcile_forever()
        except Exception as exc:
            self.ctl.errors.append(f"{self.name}: {exc!r}")
        finally:
            if self.deleted.is_set() or self.ctl.stopping.is_set():
                self.garbage_collect()
            else:
                # Finished: pods stay (cleanPodPolicy None) until the job is deleted.
                while not self.stopping and self.still_there():
                    self.deleted.wait(0.5)
                self.garbage_collect()

    def reconcile_forever(self) -> None:
        raise NotImplementedError

    def suspended(self) -> bool:
        """`spec.runPolicy.suspend` as the object has it now (Kueue's webhook sets it on a queued
        job's create; Kueue clears it when it admits the job)."""
        if not ((self.obj.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            return False
        try:
            current = self.read_object()
        except Exception:
            current = self.obj  # the API server is down: still suspended as far as we know
        if current is None:
            return False
        self.obj = current
        return bool(((self.obj.get("spec") or {}).get("runPolicy") or {}).get("suspend"))

    def wait_while_suspended(self) -> bool:
        """No pods while the job is suspended; True when it was (and now runs)."""
        if not self.suspended():
            return False
        self.on_suspended()
        while not self.stopping and self.suspended():
            self.deleted.wait(RECONCILE_S * 3)
        return True

    def on_suspended(self) -> None:
        """What the operator records while the job is suspended."""


class KubeflowJob(JobRunner):
    def reconcile_forever(self) -> None:
        spec = self.defaulted(self.obj["spec"])
        self.spec = spec
        self.set_condition(
            "Created", "True", "PyTorchJobCreated", f"PyTorchJob {self.name} is created."
        )
        self.write_status()
        if self.wait_while_suspended():
            if self.stopping:
                return
            # common/job.go ReconcileJobs: a resumed job's Suspended condition turns False.
            self.set_condition(
                "Suspended", "False", "PyTorchJobResumed", f"PyTorchJob {self.name} is resumed."
            )
            self.write_status()
        replicas: dict[str, Any] = spec["pytorchReplicaSpecs"]
        for rtype, rspec in replicas.items():
            for index in range(int(rspec["replicas"])):
                self.create_service(
                    self.general_name(rtype, index),
                    self.labels(rtype, index),
                    self.ports(rspec),
                )
        self.create_pods(
            [
                self.new_pod(rtype, index, rspec)
                for rtype, rspec in replicas.items()
                for index in range(int(rspec["replicas"]))
            ]
        )
        while not self.stopping and not self.finished():
            self.sync_status()
            time.sleep(RECONCILE_S)
        self.sync_status()

    def on_suspended(self) -> None:
        """common/job.go ReconcileJobs: a suspended job has no pods and the condition
        Suspended True, reason PyTorchJobSuspended (commonutil.NewReason(kind,
        JobSuspendedReason)) and the message "PyTorchJob <name> is suspended."."""
        self.set_condition(
            "Suspended", "True", "PyTorchJobSuspended", f"PyTorchJob {self.name} is suspended."
        )
        self.write_status()

    # -- defaults and names --------------------------------------------------------------
    @staticmethod
    def defaulted(spec: dict[str, Any]) -> dict[str, Any]:
        """pytorch_defaults.go SetDefaults_PyTorchJob."""
        spec = copy.deepcopy(spec)
        spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
        for rspec in spec["pytorchReplicaSpecs"].values():
            rspec.setdefault("replicas", 1)
            rspec.setdefault("restartPolicy", "OnFailure")
            for container in rspec["template"]["spec"]["containers"]:
                if container["name"] != DEFAULT_CONTAINER:
                    continue
                ports = container.setdefault("ports", [])
                if not any(p.get("name") == DEFAULT_PORT_NAME for p in ports):
                    ports.append({"name": DEFAULT_PORT_NAME, "containerPort": DEFAULT_PORT})
        elastic = spec.get("elasticPolicy")
        if elastic is not None:
            workers = spec["pytorchReplicaSpecs"]["Worker"]["replicas"]
            elastic.setdefault("minReplicas", elastic.get("maxReplicas", workers))
            elastic.setdefault("maxReplicas", elastic["minReplicas"])
        if elastic is None or elastic.get("nProcPerNode") is None:
            spec.setdefault("nprocPerNode", "auto")
        return spec

    def general_name(self, rtype: str, index: int) -> str:
        """pkg/core/utils.go GenGeneralName."""
        return f"{self.name}-{rtype.lower()}-{index}".replace("/", "-")

    def labels(self, rtype: str, index: int) -> dict[str, str]:
        labels = {
            "training.kubeflow.org/operator-name": OPERATOR_NAME,
            "training.kubeflow.org/job-name": self.name.replace("/", "-"),
            "training.kubeflow.org/replica-type": rtype.lower(),
            "training.kubeflow.org/replica-index": str(index),
        }
        if rtype == "Master":  # pytorchjob_controller.go IsMasterRole
            labels["training.kubeflow.org/job-role"] = "master"
        return labels

    @staticmethod
    def ports(rspec: dict[str, Any]) -> dict[str, int]:
        """pkg/core GetPortsFromJob: the named ports of the `pytorch` container."""
        for container in rspec["template"]["spec"]["containers"]:
            if container["name"] == DEFAULT_CONTAINER:
                return {
                    p["name"]: int(p["containerPort"])
                    for p in container.get("ports") or []
                    if p.get("name")
                }
        return {}

    def port_of(self, rtype: str) -> int:
        """envvar.go getPortFromPyTorchJob."""
        port = self.ports(self.spec["pytorchReplicaSpecs"][rtype]).get(DEFAULT_PORT_NAME)
        if port is None:
            raise ValueError("port not found")
        return port

    # -- envvar.go ------------------------------------------------------------------------
    def replica_env(self, rtype: str, index: int) -> list[dict[str, str]]:
        spec = self.spec
        replicas = spec["pytorchReplicaSpecs"]
        total = sum(int(r["replicas"]) for r in replicas.values())
        nproc = spec.get("nprocPerNode")
        nproc_int = int(nproc) if nproc and str(nproc).isdigit() else 1
        env = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
        if "Master" in replicas:
            port = str(self.port_of("Master"))
            address = self.general_name("Master", 0)
            env += [  # master.go
                {"name": "MASTER_PORT", "value": port},
                {"name": "PET_MASTER_PORT", "value": port},
                {"name": "MASTER_ADDR", "value": address},
                {"name": "PET_MASTER_ADDR", "value": address},
            ]
            rank = index + 1 if rtype == "Worker" else index
            env += [
                {"name": "WORLD_SIZE", "value": str(total * nproc_int)},
                {"name": "RANK", "value": str(rank)},
                {"name": "PET_NODE_RANK", "value": str(rank)},
            ]
        if nproc is not None:
            env.append({"name": "PET_NPROC_PER_NODE", "value": str(nproc)})
        elastic = spec.get("elasticPolicy")
        if elastic is not None:  # elastic.go Generate
            host = elastic.get("rdzvHost") or f"{self.name}-worker-0"
            port = elastic.get("rdzvPort") or self.port_of("Worker")
            env.append({"name": "PET_RDZV_ENDPOINT", "value": f"{host}:{port}"})
            env.append({"name": "PET_RDZV_BACKEND", "value": elastic.get("rdzvBackend", "c10d")})
            if elastic.get("minReplicas") is None and elastic.get("maxReplicas") is None:
                nnodes = str(replicas["Worker"]["replicas"])
            else:
                nnodes = f"{elastic['minReplicas']}:{elastic['maxReplicas']}"
            env.append({"name": "PET_NNODES", "value": nnodes})
            if elastic.get("maxRestarts") is not None:
                env.append({"name": "PET_MAX_RESTARTS", "value": str(elastic["maxRestarts"])})
            if elastic.get("nProcPerNode") is not None:
                env.append({"name": "PET_NPROC_PER_NODE", "value": str(elastic["nProcPerNode"])})
            if elastic.get("rdzvId") is not None:
                env.append({"name": "PET_RDZV_ID", "value": elastic["rdzvId"]})
            if elastic.get("rdzvConf"):
                conf = ",".join(f"{c['key']}={c['value']}" for c in elastic["rdzvConf"])
                env.append({"name": "PET_RDZV_CONF", "value": conf})
            if elastic.get("standalone"):
                env.append({"name": "PET_STANDALONE", "value": ""})
        else:
            env.append({"name": "PET_NNODES", "value": str(total)})
        return env

    def new_pod(self, rtype: str, index: int, rspec: dict[str, Any]) -> dict[str, Any]:
        """common/pod.go createNewPod."""
        template = copy.deepcopy(rspec["template"])
        metadata = template.get("metadata") or {}
        labels = {**(metadata.get("labels") or {}), **self.labels(rtype, index)}
        pod_spec = template["spec"]
        for container in pod_spec["containers"]:
            container["env"] = [*(container.get("env") or []), *self.replica_env(rtype, index)]
        # pkg/core/pod.go SetRestartPolicy: ExitCode runs as Never, the rest as given.
        policy = rspec["restartPolicy"]
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.general_name(rtype, index),
                "namespace": self.namespace,
                "labels": labels,
                "annotations": metadata.get("annotations") or {},
            },
            "spec": pod_spec,
        }

    # -- status ---------------------------------------------------------------------------
    def sync_status(self) -> None:
        spec = self.spec
        replicas = spec["pytorchReplicaSpecs"]
        run_policy = spec.get("runPolicy") or {}
        pods = {name: run.snapshot() for name, run in self.pods.items()}
        statuses: dict[str, dict[str, int]] = {}
        for rtype in replicas:
            counts = {"active": 0, "succeeded": 0, "failed": 0}
            for name, pod in pods.items():
                if name.startswith(f"{self.name}-{rtype.lower()}-"):
                    phase = pod["phase"]  # pkg/core/status.go UpdateJobReplicaStatuses
                    if phase == "Running":
                        counts["active"] += 1
                    elif phase == "Succeeded":
                        counts["succeeded"] += 1
                    elif phase == "Failed":
                        counts["failed"] += 1
            statuses[rtype] = counts
        self.status["replicaStatuses"] = {
            rtype: {
                **counts,
                "selector": f"training.kubeflow.org/job-name={self.name},"
                f"training.kubeflow.org/operator-name={OPERATOR_NAME},"
                f"training.kubeflow.org/replica-type={rtype.lower()}",
            }
            for rtype, counts in statuses.items()
        }
        started = any(p["phase"] in ("Running", "Succeeded", "Failed") for p in pods.values())
        if started and "startTime" not in self.status:
            self.status["startTime"] = now_iso()

        # common/job.go ReconcileJobs: backoff limit (pkg/core/job.go PastBackoffLimit) first.
        failure = ""
        limit = run_policy.get("backoffLimit")
        if limit is not None:
            restarts = 0
            for name, pod in pods.items():
                rtype = self.type_of(name)
                if replicas[rtype]["restartPolicy"] not in ("OnFailure", "Always", "ExitCode"):
                    continue
                if pod["phase"] == "Running":
                    restarts += pod["restartCount"]
            past = restarts > 0 if limit == 0 else restarts >= limit
            if past:
                failure = (
                    f"Job {self.name} has failed because it has reached the specified backoff limit"
                )
        deadline = run_policy.get("activeDeadlineSeconds")
        if (
            not failure
            and deadline
            and self.status.get("startTime")
            and time.time() - self.started_at() >= float(deadline)
        ):
            failure = (
                f"Job {self.name} has failed because it was active longer than specified deadline"
            )
        if failure:
            self.status.setdefault("completionTime", now_iso())
            for name in list(self.pods):  # DeletePodsAndServices: not finished yet, so all
                self.delete_pod(name)
            self.delete_services()
            self.set_condition("Failed", "True", "PyTorchJobFailed", failure)
            self.write_status()
            return

        # pytorchjob_controller.go UpdateJobStatus (the Worker-only branch; a Master decides
        # alone when there is one).
        for rtype, rspec in replicas.items():
            counts = statuses[rtype]
            expected = int(rspec["replicas"]) - counts["succeeded"]
            if "Master" in replicas:
                if rtype == "Master":
                    if counts["active"] > 0:
                        self.set_condition(
                            "Running",
                            "True",
                            "PyTorchJobRunning",
                            f"PyTorchJob {self.name} is running.",
                        )
                    if expected == 0:
                        self.status.setdefault("completionTime", now_iso())
                        self.set_condition(
                            "Succeeded",
                            "True",
                            "PyTorchJobSucceeded",
                            f"PyTorchJob {self.name} is successfully completed.",
                        )
                        self.write_status()
                        return
            elif rtype == "Worker":
                if expected == 0 or (spec.get("elasticPolicy") is not None and counts["succeeded"]):
                    self.status.setdefault("completionTime", now_iso())
                    self.set_condition(
                        "Succeeded",
                        "True",
                        "PyTorchJobSucceeded",
                        f"PyTorchJob {self.namespace}/{self.name} successfully completed.",
                    )
                elif counts["active"] > 0:
                    self.set_condition(
                        "Running",
                        "True",
                        "PyTorchJobRunning",
                        f"PyTorchJob {self.namespace}/{self.name} is running.",
                    )
            if (
                counts["failed"] > 0
                and int(rspec["replicas"]) > counts["succeeded"] + counts["active"]
            ):
                if rspec["restartPolicy"] != "Never":
                    self.set_condition(
                        "Restarting",
                        "True",
                        "PyTorchJobRestarting",
                        f"PyTorchJob {self.name} is restarting because {counts['failed']} "
                        f"{rtype} replica(s) failed.",
                    )
                    # common/pod.go ReconcilePods: a Failed pod of a restartable replica is
                    # deleted and created again.
                    for name, pod in pods.items():
                        if self.type_of(name) == rtype and pod["phase"] == "Failed":
                            self.delete_pod(name)
                            self.create_pods([self.new_pod(rtype, self.index_of(name), rspec)])
                else:
                    self.status.setdefault("completionTime", now_iso())
                    self.set_condition(
                        "Failed",
                        "True",
                        "PyTorchJobFailed",
                        f"PyTorchJob {self.name} is failed because {counts['failed']} {rtype} "
                        "replica(s) failed.",
                    )
        self.write_status()

    def started_at(self) -> float:
        from jupyter_hyperpod.backends.kubernetes.jobs import timestamp

        return timestamp(self.status.get("startTime")) or time.time()

    def type_of(self, pod_name: str) -> str:
        rest = pod_name[len(self.name) + 1 :]
        lowered = rest.rsplit("-", 1)[0]
        return "Master" if lowered == "master" else "Worker"

    @staticmethod
    def index_of(pod_name: str) -> int:
        return int(pod_name.rsplit("-", 1)[1])


class HyperPodJob(JobRunner):
    update_time = "lastProbeTime"

    def reconcile_forever(self) -> None:
        spec = self.obj["spec"]
        replica = spec["replicaSpecs"][0]
        self.replica_name = replica.get("name") or "pods"
        self.replicas = int(replica.get("replicas") or 1)
        self.template = replica["template"]
        self.max_retries = int((spec.get("runPolicy") or {}).get("jobMaxRetryCount") or 0)
        self.rules = (spec.get("runPolicy") or {}).get("logMonitoringConfiguration") or []
        self.monitors: dict[str, PodLogMonitor] = {}
        self.fault: tuple[str, float] | None = None  # the fault reason being remediated, since
        self.status["restartCount"] = 0
        self.set_condition(
            "Created", "True", "Created", f"HyperPodPyTorchJob {self.name} is created."
        )
        self.write_status()
        # `runPolicy.suspend` (the CRD: "Suspend suspends HyperPodPytorchJob when set to true"):
        # no pods meanwhile. Not public: which condition the operator writes then; none here.
        self.wait_while_suspended()
        if self.stopping:
            return
        self.start_pods()
        while not self.stopping and not self.finished():
            self.sync_status()
            time.sleep(RECONCILE_S)

    def pod_name(self, index: int) -> str:
        return f"{self.name}-{self.replica_name}-{index}"

    def start_pods(self) -> None:
        master_port = free_port()
        pods = []
        for index in range(self.replicas):
            template = copy.deepcopy(self.template)
            labels = {**((template.get("metadata") or {}).get("labels") or {}), "HPJob": self.name}
            pod_spec = template["spec"]
            pod_spec["restartPolicy"] = "Never"
            start = {  # the agent's StartRequest fields (hyperpod-elastic-agent api_models.py)
                "rank": index,
                "nnodes": self.replicas,
                "faultCount": self.status["restartCount"],
                "master_addr": self.ctl.kubelet.pod_ip(self.namespace, self.pod_name(0)),
                "master_port": master_port,
            }
            for container in pod_spec["containers"]:
                container["env"] = [
                    *(container.get("env") or []),
                    {"name": "HYPERPOD_DOUBLE_START", "value": json.dumps(start)},
                ]
            if self.rules:  # the agent gets the rules in its start request (log_agent.py)
                self.monitors[self.pod_name(index)] = PodLogMonitor(self.rules)
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": self.pod_name(index),
                        "namespace": self.namespace,
                        "labels": labels,
                    },
                    "spec": pod_spec,
                }
            )
        self.create_pods(pods)

    def log_faults(self, pods: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
        """The agents' log-monitoring faults, by pod: each running pod's new log lines fed to
        its rules (log_agent.py)."""
        faults = {}
        for name, monitor in self.monitors.items():
            if (pods.get(name) or {}).get("phase") != "Running":
                continue
            got = self.ctl.logs.read(self.namespace, name, monitor.offset)
            monitor.feed(got[0] if got else b"")
            if (fault := monitor.fault()) is not None:
                faults[name] = fault
        return faults

    def sync_status(self) -> None:
        pods = {name: run.snapshot() for name, run in self.pods.items()}
        phases = [pod["phase"] for pod in pods.values()]
        if "startTime" not in self.status and any(p != "Pending" for p in phases):
            self.status["startTime"] = now_iso()
        faulty = [name for name, pod in pods.items() if pod["phase"] == "Failed"]
        log_faults = {} if faulty else self.log_faults(pods)
        if log_faults:
            faulty = sorted(log_faults)
            reason, message = log_faults[faulty[0]]
            self.fault = (reason, time.time())
        if faulty:
            # FaultyPodInstanceList of the CRD (AWS's unified config): a job-level restart (JLR).
            self.status["latestFaultyPodInstanceList"] = {
                "restartType": "JLR",
                "faultyPodList": faulty,
                "faultyRankList": [str(self.index_of(name)) for name in faulty],
                "faultyInstanceIdList": [self.pods[name].node or "" for name in faulty],
            }
            if self.status["restartCount"] < self.max_retries:
                self.status["restartCount"] += 1
                if log_faults:  # the agent's reason and words on the condition (see above)
                    self.set_condition("Restarting", "True", reason, message)
                else:
                    self.set_condition(
                        "Restarting",
                        "True",
                        "Restarting",
                        f"HyperPodPyTorchJob {self.name} is restarting: {', '.join(faulty)} "
                        "failed.",
                    )
                self.write_status()
                for name in list(self.pods):
                    self.delete_pod(name)
                self.start_pods()
                return
            self.status.setdefault("completionTime", now_iso())
            if log_faults:  # its retries spent: the agents stop their workers
                self.set_condition("Failed", "True", reason, message)
                for name in list(self.pods):
                    self.delete_pod(name)
            else:
                self.set_condition(
                    "Failed",
                    "True",
                    "Failed",
                    f"HyperPodPyTorchJob {self.name} failed: {', '.join(faulty)} failed after "
                    f"{self.status['restartCount']} restart(s).",
                )
        elif phases and all(p == "Succeeded" for p in phases):
            self.status.setdefault("completionTime", now_iso())
            self.set_condition(
                "Completed", "True", "Completed", f"HyperPodPyTorchJob {self.name} completed."
            )
        elif any(p == "Running" for p in phases):
            if self.fault is not None:  # AWS's guide: "The fault of reason NodeFault was ..."
                reason, since = self.fault
                self.fault = None
                self.set_condition(
                    "Running",
                    "True",
                    "Running",
                    f"The fault of reason {reason} was remediated in "
                    f"{int((time.time() - since) * 1000)} milliseconds.",
                )
            else:
                self.set_condition(
                    "Running", "True", "Running", f"HyperPodPyTorchJob {self.name} is running."
                )
        self.write_status()

    @staticmethod
    def index_of(pod_name: str) -> int:
        return int(pod_name.rsplit("-", 1)[1])
