"""The kubelet (and scheduler) double: every pod the operator doubles create is scheduled on an
emulated node and its container really runs, as a local process, with its logs streamed to the
emulator's log endpoint and its status written back through the API.

Like the real ones:
- the scheduler keeps a pod Pending (PodScheduled False, Unschedulable, a FailedScheduling
  event) while no Ready node matches its nodeSelector with enough free `nvidia.com/gpu`;
- an image the registry lacks (here: any reference containing "doesnotexist") stays in
  ImagePullBackOff with Failed events;
- the container's env is the image's (PATH with the image's tools; OMP_NUM_THREADS=1, as a
  CPU image would set) plus the container's `env` in order, each value expanded with `$(VAR)`
  from the entries before it, and `command`+`args` expanded from the container env; `$$` is a
  literal `$`, an unknown `$(VAR)` stays as written (Kubernetes' expansion rules);
- the process runs in its own mount and UTS namespaces (sandbox.py): hostname = pod name, the
  pod's volumes where the container mounts them (the FSx claim -> the test's shared FS root via
  `claims`), /etc/hosts managed by the kubelet with the namespace's Services (cluster DNS);
- restartPolicy: Never ends the pod Succeeded/Failed with the exit code; OnFailure/Always
  restart the container in place (restartCount, lastState, CrashLoopBackOff meanwhile);
- deleting a pod sends SIGTERM to its processes, then SIGKILL after the grace period.

The image's `hyperpodrun` is hyperpodrun_shim.py (the HyperPod elastic agent cannot be installed
beside our torch): see that file. Where this machine cannot make namespaces, pods run without
them: `/data` paths are rewritten to the claim's directory and Service names do not resolve.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from .emulator import LogStore, now_iso

HERE = Path(__file__).resolve().parent
GRACE_S = 2.0
BACKOFF_S = 0.3
MISSING_IMAGE = "doesnotexist"
# A container: its own mount, UTS and PID namespaces; the command is PID 1 there, and when it
# ends the kernel ends every process it left (as when a container stops).
UNSHARE = ["unshare", "--mount", "--uts", "--pid", "--mount-proc", "--fork", "--kill-child"]
_EXPANSION = re.compile(r"\$\$|\$\(([A-Za-z_][-._A-Za-z0-9]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (third_party/forked/golang/expansion)."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _EXPANSION.sub(one, text)


def die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def namespaces_available() -> bool:
    try:
        return subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class Kubelet:
    def __init__(self, core: Any, logs: LogStore) -> None:
        self.core = core
        self.logs = logs
        self.claims: dict[str, str] = {}
        """PersistentVolumeClaim name -> the directory its volume is (the test's FS root)."""
        self.dir = Path(tempfile.mkdtemp(prefix="kubelet-double-"))
        self.bin = self.dir / "image-bin"
        self.bin.mkdir()
        shim = self.bin / "hyperpodrun"
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "hyperpodrun_shim.py"} "$@"\n')
        shim.chmod(0o755)
        self.isolated = namespaces_available()
        self.lock = threading.Lock()
        self.services: dict[str, set[str]] = {}
        self.gpus_used: dict[str, int] = {}
        self.pods_on: dict[str, int] = {}
        self.runs: list[PodRun] = []
        self.ips: dict[tuple[str, str], str] = {}

    def image_env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
        }

    def run(self, namespace: str, pod: dict[str, Any], nodes: list[str]) -> PodRun:
        run = PodRun(self, namespace, pod)
        with self.lock:
            self.runs.append(run)
        run.bind()  # the scheduler's first try, before the operator creates the next pod
        run.start()
        return run

    # -- the pod network and cluster DNS -----------------------------------------------
    def pod_ip(self, namespace: str, name: str) -> str:
        """Each pod its own address on this machine's loopback network (127.0.0.0/8), kept by
        name so that a pod made again under its name gets it back."""
        with self.lock:
            if (namespace, name) not in self.ips:
                index = len(self.ips) + 1
                self.ips[(namespace, name)] = (
                    f"127.{10 + index // 65536}.{index // 256 % 256}.{index % 256}"
                )
            return self.ips[(namespace, name)]

    def hosts_text(self, namespace: str, hostname: str) -> str:
        lines = ["# Kubernetes-managed hosts file (the kubelet double).", "127.0.0.1\tlocalhost"]
        lines.append(f"{self.pod_ip(namespace, hostname)}\t{hostname}")
        with self.lock:
            names = sorted(self.services.get(namespace, set()))
        for name in names:
            # A headless Service answers with the address of the pod it selects (the operators'
            # Services select the pod of the same name).
            if name == hostname:
                continue
            lines.append(
                f"{self.pod_ip(namespace, name)}\t{name} {name}.{namespace}.svc "
                f"{name}.{namespace}.svc.cluster.local"
            )
        return "\n".join(lines) + "\n"

    def add_service(self, namespace: str, name: str) -> None:
        with self.lock:
            self.services.setdefault(namespace, set()).add(name)
        self.rewrite_hosts(namespace)

    def remove_service(self, namespace: str, name: str) -> None:
        with self.lock:
            self.services.get(namespace, set()).discard(name)
        self.rewrite_hosts(namespace)

    def rewrite_hosts(self, namespace: str) -> None:
        """In place (same inode), so that the bind mount in running pods sees the change."""
        with self.lock:
            runs = [r for r in self.runs if r.namespace == namespace and r.hosts.exists()]
        for run in runs:
            with open(run.hosts, "r+", encoding="utf-8") as handle:
                handle.truncate(0)
                handle.write(self.hosts_text(namespace, run.name))

    # -- scheduling ---------------------------------------------------------------------
    def schedule(self, pod: dict[str, Any]) -> tuple[str | None, str]:
        """A node for the pod (fewest pods, then most free GPUs), or None and why, in the
        default scheduler's words: `pkg/scheduler/framework/types.go` FitError.Error,
        "0/<nodes> nodes are available: <count> <reason>, ...." with the Filter plugins' reasons
        (`plugins/noderesources/fit.go` "Insufficient nvidia.com/gpu", `plugins/nodeaffinity`
        "node(s) didn't match Pod's node affinity/selector"). Not modelled: the " preemption:
        ..." tail that schedulers with the preemption PostFilter append (no priorities here)."""
        spec = pod["spec"]
        selector = spec.get("nodeSelector") or {}
        wanted = 0
        for container in spec["containers"]:
            requests = (container.get("resources") or {}).get("requests") or {}
            wanted += int(requests.get("nvidia.com/gpu") or 0)
        nodes = self.core.list_node().items
        fits: list[tuple[int, int, str]] = []
        mismatched = insufficient = 0
        with self.lock:
            for node in nodes:
                labels = node.metadata.labels or {}
                ready = any(
                    c.type == "Ready" and c.status == "True" for c in node.status.conditions or []
                )
                if not ready or any(labels.get(k) != v for k, v in selector.items()):
                    mismatched += 1
                    continue
                capacity = int((node.status.allocatable or {}).get("nvidia.com/gpu") or 0)
                free = capacity - self.gpus_used.get(node.metadata.name, 0)
                if free < wanted:
                    insufficient += 1
                    continue
                fits.append((-free, self.pods_on.get(node.metadata.name, 0), node.metadata.name))
            if fits:
                name = min(fits, key=lambda item: (item[1], item[0], item[2]))[2]
                self.gpus_used[name] = self.gpus_used.get(name, 0) + wanted
                self.pods_on[name] = self.pods_on.get(name, 0) + 1
                return name, ""
        reasons = []
        if insufficient:
            reasons.append(f"{insufficient} Insufficient nvidia.com/gpu")
        if mismatched:
            reasons.append(f"{mismatched} node(s) didn't match Pod's node affinity/selector")
        return None, f"0/{len(nodes)} nodes are available: {', '.join(reasons)}."

    def release(self, node: str, gpus: int) -> None:
        with self.lock:
            self.gpus_used[node] = max(0, self.gpus_used.get(node, 0) - gpus)
            self.pods_on[node] = max(0, self.pods_on.get(node, 0) - 1)

    def exec_in(
        self, namespace: str, pod: str, container: str, command: list[str]
    ) -> tuple[int, str, str] | None:
        """`kubectl exec`: the command in the running container's environment (its env, its
        working directory), as the kubelet's CRI ExecSync runs it beside the container's
        process; (exit code, stdout, stderr), or None when no such container runs."""
        with self.lock:
            runs = [
                r
                for r in self.runs
                if r.namespace == namespace
                and r.name == pod
                and r.process is not None
                and r.process.poll() is None
                and (r.container.get("name") == container or not container)
            ]
        if not runs:
            return None
        env, _ = runs[-1].environment()
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=60, check=False
            )
        except FileNotFoundError as error:
            # runc: 'exec: "x": executable file not found in $PATH' (exit code 127 via the CRI).
            return 127, "", f'exec: "{command[0]}": executable file not found in $PATH: {error}'
        return done.returncode, done.stdout, done.stderr

    def stop(self) -> None:
        with self.lock:
            runs = list(self.runs)
        for run in runs:
            run.delete()
        for run in runs:
            run.join(GRACE_S + 5)
        shutil.rmtree(self.dir, ignore_errors=True)


class PodRun(threading.Thread):
    """One pod on its node: its container started, watched, restarted and killed."""

    def __init__(self, kubelet: Kubelet, namespace: str, pod: dict[str, Any]) -> None:
        super().__init__(name=f"kubelet-{pod['metadata']['name']}", daemon=True)
        self.kubelet = kubelet
        self.namespace = namespace
        self.pod = pod
        self.name: str = pod["metadata"]["name"]
        self.container: dict[str, Any] = pod["spec"]["containers"][0]
        self.policy: str = pod["spec"].get("restartPolicy") or "Always"
        self.deleted = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.phase = "Pending"
        self.restart_count = 0
        self.node: str | None = None
        self.gpus = 0
        self.dir = kubelet.dir / f"{namespace}_{self.name}_{uuid.uuid4().hex[:6]}"
        self.dir.mkdir()
        self.hosts = self.dir / "etc-hosts"
        self.exit_codes: list[int] = []
        self.container_id: str | None = None
        self.unschedulable = ""

    def snapshot(self) -> dict[str, Any]:
        return {"phase": self.phase, "restartCount": self.restart_count}

    # -- status -------------------------------------------------------------------------
    def patch(self, status: dict[str, Any]) -> None:
        """Like a kubelet: keep trying while the API server is down; give up on a refusal (the
        pod was deleted meanwhile)."""
        while not self.deleted.is_set():
            try:
                self.kubelet.core.patch_namespaced_pod_status(
                    self.name, self.namespace, {"status": status}
                )
                return
            except client.ApiException as exc:
                if exc.status:
                    return
            except Exception:
                pass
            self.deleted.wait(0.2)

    def container_status(self, state: dict[str, Any], **extra: Any) -> dict[str, Any]:
        status = {
            "name": self.container["name"],
            "image": self.container["image"],
            "imageID": "",
            "ready": "running" in state,
            "started": "running" in state,
            "restartCount": self.restart_count,
            "state": state,
            **extra,
        }
        if self.container_id and "waiting" not in state:
            # The ID of the container that runs or ran; a waiting one has none yet.
            status["containerID"] = self.container_id
        return status

    def event(self, reason: str, message: str, component: str = "kubelet") -> None:
        with contextlib.suppress(client.ApiException):
            self.kubelet.core.create_namespaced_event(
                self.namespace,
                {
                    "metadata": {"name": f"{self.name}.{uuid.uuid4().hex[:8]}"},
                    "involvedObject": {
                        "kind": "Pod",
                        "name": self.name,
                        "namespace": self.namespace,
                    },
                    "reason": reason,
                    "message": message,
                    "type": "Warning",
                    "source": {"component": component},
                    "count": 1,
                    "firstTimestamp": now_iso(),
                    "lastTimestamp": now_iso(),
                },
            )

    # -- life ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.live()
        finally:
            if self.node:
                self.kubelet.release(self.node, self.gpus)

    def bind(self) -> bool:
        node, self.unschedulable = self.kubelet.schedule(self.pod)
        if not node:
            return False
        self.node = node
        requests = (self.container.get("resources") or {}).get("requests") or {}
        self.gpus = int(requests.get("nvidia.com/gpu") or 0)
        with contextlib.suppress(client.ApiException):
            self.kubelet.core.patch_namespaced_pod(
                self.name, self.namespace, {"spec": {"nodeName": node}}
            )
        return True

    def live(self) -> None:
        reported = False
        while not self.node and not self.deleted.is_set():
            if self.bind():
                break
            why = self.unschedulable
            if not reported:
                # `pkg/scheduler/schedule_one.go` handleSchedulingFailure: a Warning event
                # FailedScheduling (action Scheduling) with the FitError's message, and the pod's
                # condition PodScheduled False, reason Unschedulable (v1.PodReasonUnschedulable).
                condition = {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": why,
                    "lastTransitionTime": now_iso(),
                }
                self.patch({"phase": "Pending", "conditions": [condition]})
                self.event("FailedScheduling", why, component="default-scheduler")
                reported = True
            self.deleted.wait(0.5)
        if not self.node:
            return
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()}
        self.patch(
            {
                "phase": "Pending",
                "hostIP": "10.0.0.1",
                "conditions": [scheduled],
                "containerStatuses": [
                    self.container_status({"waiting": {"reason": "ContainerCreating"}})
                ],
            }
        )
        image = self.container["image"]
        if MISSING_IMAGE in image:
            message = f'Back-off pulling image "{image}"'
            self.patch(
                {
                    "containerStatuses": [
                        self.container_status(
                            {"waiting": {"reason": "ImagePullBackOff", "message": message}}
                        )
                    ]
                }
            )
            self.event("Failed", f'Failed to pull image "{image}": not found')
            self.deleted.wait()
            return
        started_pod = now_iso()
        last_state: dict[str, Any] | None = None
        while not self.deleted.is_set():
            started = now_iso()
            code = self.run_container(started_pod, started, last_state)
            if code is None:
                return  # deleted
            finished = now_iso()
            terminated = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": finished,
            }
            restart = self.policy == "Always" or (self.policy == "OnFailure" and code != 0)
            if not restart:
                self.phase = "Succeeded" if code == 0 else "Failed"
                self.patch(
                    {
                        "phase": self.phase,
                        "containerStatuses": [self.container_status({"terminated": terminated})],
                    }
                )
                return
            last_state = {"terminated": terminated}
            waiting = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off restarting failed container={self.container['name']} "
                    f"pod={self.name}",
                }
            }
            self.patch(
                {"containerStatuses": [self.container_status(waiting, lastState=last_state)]}
            )
            if self.deleted.wait(BACKOFF_S):
                return
            self.restart_count += 1

    def environment(self) -> tuple[dict[str, str], list[str]]:
        container_env: dict[str, str] = {}
        for item in self.container.get("env") or []:
            if "value" in item:
                container_env[item["name"]] = expand(str(item.get("value") or ""), container_env)
            elif "valueFrom" in item:
                path = ((item["valueFrom"] or {}).get("fieldRef") or {}).get("fieldPath")
                container_env[item["name"]] = {
                    "metadata.name": self.name,
                    "metadata.namespace": self.namespace,
                    "status.podIP": self.kubelet.pod_ip(self.namespace, self.name),
                    "spec.nodeName": self.node or "",
                }.get(path or "", "")
        argv = [
            expand(part, container_env)
            for part in [
                *(self.container.get("command") or []),
                *(self.container.get("args") or []),
            ]
        ]
        env = {**self.kubelet.image_env(), "HOSTNAME": self.name, **container_env}
        return env, argv

    def mounts(self) -> list[dict[str, str]]:
        volumes = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        mounts = []
        for item in self.container.get("volumeMounts") or []:
            volume = volumes.get(item["name"]) or {}
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                if claim not in self.kubelet.claims:
                    raise RuntimeError(f"persistentvolumeclaim {claim!r} not found")
                # subPath: "Path within the volume from which the container's volume should
                # be mounted" (core/v1 VolumeMount; the kubelet mounts <volume>/<subPath>).
                source = self.kubelet.claims[claim]
                if item.get("subPath"):
                    source = os.path.join(source, str(item["subPath"]).strip("/"))
                mounts.append({"mountPath": item["mountPath"], "hostPath": source})
            elif (volume.get("hostPath") or {}).get("path") == item["mountPath"]:
                continue  # /dev/shm on /dev/shm: already this machine's
            elif "emptyDir" in volume:
                empty = self.dir / f"empty-{item['name']}"
                empty.mkdir(exist_ok=True)
                mounts.append({"mountPath": item["mountPath"], "hostPath": str(empty)})
        return mounts

    def run_container(
        self, started_pod: str, started: str, last_state: dict[str, Any] | None
    ) -> int | None:
        env, argv = self.environment()
        mounts = self.mounts()
        workdir = self.container.get("workingDir") or "/"
        if self.kubelet.isolated:
            self.hosts.write_text(self.kubelet.hosts_text(self.namespace, self.name))
            spec = {
                "hostname": self.name[:63],
                "root": str(self.dir / "root"),
                "mounts": mounts,
                "hosts": str(self.hosts),
                "workingDir": workdir,
                "argv": argv,
                "env": env,
            }
            spec_path = self.dir / "pod.json"
            spec_path.write_text(json.dumps(spec))
            command = [
                *UNSHARE,
                sys.executable,
                str(HERE / "sandbox.py"),
                str(spec_path),
            ]
            cwd = "/"
        else:

            def rewrite(text: str) -> str:
                for item in mounts:
                    text = text.replace(item["mountPath"], item["hostPath"])
                return text

            argv = [rewrite(part) for part in argv]
            env = {key: rewrite(value) for key, value in env.items()}
            command, cwd = argv, rewrite(workdir)
            if command and command[0] == "hyperpodrun":
                command = [str(self.kubelet.bin / "hyperpodrun"), *command[1:]]
        self.kubelet.logs.start(self.namespace, self.name)
        try:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env if not self.kubelet.isolated else {"PATH": os.environ.get("PATH", "")},
                start_new_session=True,
                # If the test process dies, so do its pods (unshare --kill-child ends the rest).
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            self.kubelet.logs.write(self.namespace, self.name, f"{exc}\n")
            self.kubelet.logs.finish(self.namespace, self.name)
            return 127
        self.phase = "Running"
        self.container_id = f"containerd://{uuid.uuid4().hex}"
        extra = {"lastState": last_state} if last_state else {}
        self.patch(
            {
                "phase": "Running",
                "startTime": started_pod,
                "podIP": self.kubelet.pod_ip(self.namespace, self.name),
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": started},
                ],
                "containerStatuses": [
                    self.container_status({"running": {"startedAt": started}}, **extra)
                ],
            }
        )
        reader = threading.Thread(target=self.pump, args=(self.process,), daemon=True)
        reader.start()
        while self.process.poll() is None:
            if self.deleted.wait(0.05):
                self.terminate()
                break
        code = self.process.wait()
        reader.join(5)
        self.kubelet.logs.finish(self.namespace, self.name)
        self.exit_codes.append(code)
        if self.deleted.is_set():
            return None
        # A process killed by a signal: the runtime reports 128 + the signal number.
        return 128 - code if code < 0 else code

    def pump(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while True:
            data = os.read(fd, 65536)
            if not data:
                return
            self.kubelet.logs.write(self.namespace, self.name, data)

    def signal_all(self, sig: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def terminate(self) -> None:
        self.signal_all(signal.SIGTERM)
        end = time.monotonic() + GRACE_S
        while self.process is not None and self.process.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        self.signal_all(signal.SIGKILL)

    def crash(self) -> None:
        """Kill the container's processes, as an OOM kill or a lost node does (exit 137)."""
        self.signal_all(signal.SIGKILL)

    def delete(self) -> None:
        self.deleted.set()
        self.terminate()
