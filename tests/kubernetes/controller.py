"""A small training operator + kubelet for the emulator: it turns each PyTorchJob (and
HyperPodPyTorchJob) into worker pods that log multi-rank lines and end with conditions, through the
real `kubernetes` client over HTTP.

What a job does is read from its container env (the test's JobSpec.env):
FAKE_STEPS (3), FAKE_STEP_SECONDS (0.02), FAKE_START_DELAY (0.2), FAKE_FAIL_RANK (that worker exits 1),
FAKE_RESTART_RANK (that worker crashes once half-way and its container restarts, as auto-resume
does); an image containing "doesnotexist" never pulls (ImagePullBackOff + Warning events);
FAKE_UNSCHEDULABLE=1 leaves the pods unschedulable.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any

from kubernetes import client, watch

from .emulator import LogStore, now_iso

KINDS = [
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"),
]


class Controller(threading.Thread):
    def __init__(
        self, api_client: Any, logs: LogStore, nodes: list[str], interval: float = 0.05
    ) -> None:
        super().__init__(name="test-controller", daemon=True)
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.logs = logs
        self.nodes = nodes
        self.interval = interval
        self.stopping = threading.Event()
        self.live: set[str] = set()
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
        """Job objects as they come and go (a watch, not polling: lists of every job the session
        created would cost more and more)."""
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
                # Each watch starts with every existing object: what was not seen is gone, even
                # when its DELETED event fell between two watches.
                present: set[str] = set()
                for event in stream:
                    obj = event["object"]
                    uid = obj["metadata"]["uid"]
                    if event["type"] == "DELETED":
                        present.discard(uid)
                        self.live.discard(uid)
                        continue
                    present.add(uid)
                    if uid not in self.runners:
                        self.live.add(uid)
                        runner = JobRunner(self, obj, kind)
                        self.runners[uid] = runner
                        runner.start()
                for uid, runner in list(self.runners.items()):
                    if (
                        runner.plural == plural
                        and uid not in present
                        and runner.is_alive()
                        and uid in self.live
                    ):
                        try:
                            self.custom.get_namespaced_custom_object(
                                group, version, runner.namespace, plural, runner.name
                            )
                        except client.ApiException as exc:
                            if exc.status == 404:
                                self.live.discard(uid)
            except Exception as exc:
                self.errors.append(repr(exc))
                self.stopping.wait(0.2)

    def stop(self) -> None:
        self.stopping.set()
        self.join(5)
        for runner in list(self.runners.values()):
            runner.join(5)


class JobRunner(threading.Thread):
    def __init__(
        self, controller: Controller, obj: dict[str, Any], kind: tuple[str, str, str]
    ) -> None:
        super().__init__(name=f"job-{obj['metadata']['name']}", daemon=True)
        self.ctl = controller
        self.obj = obj
        self.group, self.version, self.plural = kind
        self.uid = obj["metadata"]["uid"]
        self.name = obj["metadata"]["name"]
        self.namespace = obj["metadata"]["namespace"]
        self.conditions: list[dict[str, Any]] = []
        spec = obj["spec"]
        if "pytorchReplicaSpecs" in spec:
            worker = spec["pytorchReplicaSpecs"]["Worker"]
            self.hyperpod = False
        else:
            worker = spec["replicaSpecs"][0]
            self.hyperpod = True
        self.replicas = int(worker["replicas"])
        self.template = worker["template"]
        container = self.template["spec"]["containers"][0]
        self.image = container["image"]
        self.env = {item["name"]: item.get("value", "") for item in container.get("env") or []}
        command = container.get("command") or []
        self.tee = "--tee=3" in command
        per_pod = [
            part.split("=", 1)[1] for part in command if part.startswith("--nproc-per-node=")
        ]
        self.per_pod = int(per_pod[0]) if per_pod and self.tee else 1
        self.pods = [self.pod_name(rank) for rank in range(self.replicas)]
        self.restarts = [0] * self.replicas

    # -- helpers ------------------------------------------------------------------------------
    def pod_name(self, rank: int) -> str:
        return f"{self.name}-pods-{rank}" if self.hyperpod else f"{self.name}-worker-{rank}"

    @property
    def cancelled(self) -> bool:
        return self.uid not in self.ctl.live or self.ctl.stopping.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep; True when the job was deleted meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.cancelled:
                return True
            time.sleep(min(0.01, max(0.0, end - time.monotonic())))
        return self.cancelled

    def condition(self, ctype: str, reason: str, message: str = "", **extra: Any) -> None:
        for existing in self.conditions:
            if existing["status"] == "True" and existing["type"] in ("Running", "Restarting"):
                existing["status"] = "False"
        self.conditions.append(
            {
                "type": ctype,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastUpdateTime": now_iso(),
                "lastTransitionTime": now_iso(),
            }
        )
        status: dict[str, Any] = {"conditions": self.conditions, **extra}
        self.retry(
            self.ctl.custom.patch_namespaced_custom_object_status,
            self.group,
            self.version,
            self.namespace,
            self.plural,
            self.name,
            {"status": status},
        )

    def retry(self, fn: Any, *args: Any) -> Any:
        """Like a kubelet: keep trying while the API server is down; give up on API refusals."""
        while not self.ctl.stopping.is_set():
            try:
                return fn(*args)
            except client.ApiException as exc:
                if exc.status:
                    return None  # deleted meanwhile
            except Exception:
                pass
            time.sleep(0.1)
        return None

    def pod_status(self, rank: int, phase: str, state: dict[str, Any], **extra: Any) -> None:
        container = {
            "name": "pytorch",
            "image": self.image,
            "imageID": "",
            "ready": "running" in state,
            "restartCount": self.restarts[rank],
            "state": state,
            "containerID": f"containerd://{uuid.uuid4().hex}"
            if ("running" in state)
            else extra.pop("container_id", None),
        }
        if container["containerID"] is None:
            del container["containerID"]
        if "last_state" in extra:
            container["lastState"] = extra.pop("last_state")
        status = {"phase": phase, "containerStatuses": [container], "hostIP": "10.0.0.1", **extra}
        self.retry(
            self.ctl.core.patch_namespaced_pod_status,
            self.pods[rank],
            self.namespace,
            {"status": status},
        )
        self.container_ids[rank] = container.get("containerID")

    def event(self, obj_name: str, kind: str, reason: str, message: str) -> None:
        self.ctl.core.create_namespaced_event(
            self.namespace,
            {
                "metadata": {
                    "name": f"{obj_name}.{uuid.uuid4().hex[:8]}",
                    "namespace": self.namespace,
                },
                "involvedObject": {"kind": kind, "name": obj_name, "namespace": self.namespace},
                "reason": reason,
                "message": message,
                "type": "Warning",
                "count": 3,
                "firstTimestamp": now_iso(),
                "lastTimestamp": now_iso(),
            },
        )

    # -- the job ------------------------------------------------------------------------------
    def run(self) -> None:
        self.container_ids: list[str | None] = [None] * self.replicas
        try:
            self.create_pods()
            self.condition("Created", "PyTorchJobCreated", f"PyTorchJob {self.name} is created.")
            if not self.lifecycle():
                self.cleanup()
        except Exception as exc:
            self.ctl.errors.append(f"{self.name}: {exc!r}")
            self.cleanup()

    def create_pods(self) -> None:
        labels = dict(self.template.get("metadata", {}).get("labels") or {})
        for rank, pod in enumerate(self.pods):
            pod_labels = dict(labels)
            if self.hyperpod:
                pod_labels["HPJob"] = self.name
            else:
                pod_labels.update(
                    {
                        "training.kubeflow.org/job-name": self.name,
                        "training.kubeflow.org/replica-index": str(rank),
                        "training.kubeflow.org/replica-type": "worker",
                        "training.kubeflow.org/operator-name": "pytorchjob-controller",
                    }
                )
            spec = dict(self.template["spec"])
            spec["nodeName"] = self.ctl.nodes[rank % len(self.ctl.nodes)]
            self.ctl.core.create_namespaced_pod(
                self.namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": self.namespace,
                        "labels": pod_labels,
                        "ownerReferences": [
                            {
                                "apiVersion": f"{self.group}/{self.version}",
                                "kind": self.obj["kind"],
                                "name": self.name,
                                "uid": self.uid,
                                "controller": True,
                            }
                        ],
                    },
                    "spec": spec,
                },
            )
            self.pod_status(rank, "Pending", {"waiting": {"reason": "ContainerCreating"}})

    def lifecycle(self) -> bool:
        """Run the job; False when it was deleted (cancelled)."""
        if "doesnotexist" in self.image:
            for rank, pod in enumerate(self.pods):
                message = f'Back-off pulling image "{self.image}"'
                self.pod_status(
                    rank, "Pending", {"waiting": {"reason": "ImagePullBackOff", "message": message}}
                )
                self.event(pod, "Pod", "Failed", f'Failed to pull image "{self.image}": not found')
            while not self.sleep(0.05):
                pass
            return False
        if self.env.get("FAKE_UNSCHEDULABLE"):
            message = f"0/{len(self.ctl.nodes)} nodes are available: {len(self.ctl.nodes)} Insufficient nvidia.com/gpu."
            for rank, pod in enumerate(self.pods):
                condition = {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
                self.pod_status(
                    rank,
                    "Pending",
                    {"waiting": {"reason": "ContainerCreating"}},
                    conditions=[condition],
                )
                self.event(pod, "Pod", "FailedScheduling", message)
            while not self.sleep(0.05):
                pass
            return False

        if self.sleep(float(self.env.get("FAKE_START_DELAY", "0.2"))):
            return False
        started = now_iso()
        for rank, pod in enumerate(self.pods):
            self.ctl.logs.start(self.namespace, pod)
            self.pod_status(rank, "Running", {"running": {"startedAt": started}}, startTime=started)
        self.condition(
            "Running", "PyTorchJobRunning", f"PyTorchJob {self.name} is running.", startTime=started
        )

        steps = int(self.env.get("FAKE_STEPS", "3"))
        step_seconds = float(self.env.get("FAKE_STEP_SECONDS", "0.02"))
        fail_rank = int(self.env["FAKE_FAIL_RANK"]) if self.env.get("FAKE_FAIL_RANK") else None
        restart_rank = (
            int(self.env["FAKE_RESTART_RANK"]) if self.env.get("FAKE_RESTART_RANK") else None
        )
        world = self.replicas
        if self.tee:
            # torchrun --tee=3: its own lines bare, each local rank's lines prefixed.
            world = self.replicas * self.per_pod
            for pod in self.pods:
                self.ctl.logs.write(
                    self.namespace, pod, "W1130 torch/distributed/run.py:793] OMP_NUM_THREADS=1\n"
                )
        for step in range(steps):
            if self.cancelled:
                return False
            for rank, pod in enumerate(self.pods):
                if self.tee:
                    lines = "".join(
                        f"[default{local}]:rank {rank * self.per_pod + local}/{world} step {step}\n"
                        for local in range(self.per_pod)
                    )
                    self.ctl.logs.write(self.namespace, pod, lines)
                    continue
                self.ctl.logs.write(
                    self.namespace,
                    pod,
                    f"rank {rank}/{world} step {step} loss {1.0 / (step + 1):.4f}\n",
                )
            if restart_rank is not None and step == steps // 2 and not self.restarts[restart_rank]:
                self.restart(restart_rank, step)
            if self.sleep(step_seconds):
                return False

        ended = now_iso()
        for rank, pod in enumerate(self.pods):
            failed = rank == fail_rank
            self.ctl.logs.write(
                self.namespace,
                pod,
                f"rank {rank}/{world} RuntimeError: CUDA error: an illegal memory access\n"
                if failed
                else f"rank {rank}/{world} done\n",
            )
            self.ctl.logs.finish(self.namespace, pod)
            terminated = {
                "exitCode": 1 if failed else 0,
                "reason": "Error" if failed else "Completed",
                "startedAt": started,
                "finishedAt": ended,
            }
            self.pod_status(
                rank,
                "Failed" if failed else "Succeeded",
                {"terminated": terminated},
                container_id=self.container_ids[rank],
            )
        if fail_rank is not None:
            self.condition(
                "Failed",
                "PyTorchJobFailed",
                f"PyTorchJob {self.name} is failed because 1 Worker replica(s) failed.",
                completionTime=ended,
            )
        else:
            self.condition(
                "Succeeded",
                "PyTorchJobSucceeded",
                f"PyTorchJob {self.name} is successfully completed.",
                completionTime=ended,
            )
        return True

    def restart(self, rank: int, step: int) -> None:
        pod = self.pods[rank]
        self.ctl.logs.write(
            self.namespace, pod, f"rank {rank}/{self.replicas} NCCL error: unhandled system error\n"
        )
        crashed = {"exitCode": 1, "reason": "Error", "finishedAt": now_iso()}
        self.pod_status(
            rank, "Running", {"terminated": crashed}, container_id=self.container_ids[rank]
        )
        self.ctl.logs.finish(self.namespace, pod)
        self.condition(
            "Restarting",
            "PyTorchJobRestarting",
            f"PyTorchJob {self.name} is restarting because 1 Worker replica(s) failed.",
        )
        time.sleep(0.1)
        self.restarts[rank] += 1
        self.ctl.logs.start(self.namespace, pod)
        self.ctl.logs.write(
            self.namespace,
            pod,
            f"rank {rank}/{self.replicas} resumed from checkpoint at step {step}\n",
        )
        self.pod_status(
            rank,
            "Running",
            {"running": {"startedAt": now_iso()}},
            last_state={"terminated": crashed},
        )
        self.condition("Running", "PyTorchJobRunning", f"PyTorchJob {self.name} is running.")

    def cleanup(self) -> None:
        """The job was deleted: garbage-collect its pods like the owner references would."""
        for pod in self.pods:
            self.ctl.logs.finish(self.namespace, pod)
            with contextlib.suppress(Exception):
                self.ctl.core.delete_namespaced_pod(pod, self.namespace)
