"""Python stacks of a Kubernetes job's ranks: the probe of core/stacks.py in each worker pod,
through the pods' exec subresource (`connect GET /api/v1/namespaces/{namespace}/pods/{name}/exec`,
the `kubernetes` client's `stream`, a WebSocket of the v4.channel.k8s.io protocol). py-spy needs
ptrace in the container: without the SYS_PTRACE capability it is refused, and the rank's stack
says what to add."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.errors import BackendUnavailable
from ...core.models import RankStack
from ...core.stacks import DUMP_TIMEOUT_S, PROBE, read_probe
from .manifest import CONTAINER

if TYPE_CHECKING:
    from ..base import StoredJob
    from .backend import KubernetesOrchestrator


def exec_in_pod(
    backend: KubernetesOrchestrator, namespace: str, pod: str, command: list[str]
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a command in the pod's training container."""
    from kubernetes.stream import stream

    try:
        client = stream(
            backend.kube.core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=CONTAINER,
            command=command,
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            _preload_content=False,
        )
    except Exception as error:  # the API refused the upgrade (403, 404, not running)
        raise BackendUnavailable(f"cannot exec in pod {pod}: {error}") from None
    try:
        client.run_forever(timeout=DUMP_TIMEOUT_S * 2)
        out, err = client.read_stdout() or "", client.read_stderr() or ""
        code = client.returncode
    finally:
        client.close()
    return int(code if code is not None else 1), out, err


def dump_stacks(backend: KubernetesOrchestrator, job: StoredJob) -> dict[int, RankStack]:
    """Every rank's stack, by rank: the probe in each worker pod (its ranks, torchrun's too)."""
    namespace = backend._namespace_of(job)
    kind = backend._kind_of(job)[3]
    stacks: dict[int, RankStack] = {}
    for worker in range(max(1, int(job.spec.nodes))):
        pod = backend._find_pod(namespace, job.backend_id or "", worker, kind)
        name = ((pod or {}).get("metadata") or {}).get("name")
        if not name:
            continue
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        code, out, _ = exec_in_pod(
            backend, namespace, name, ["python3", "-c", PROBE, job.id, f"{DUMP_TIMEOUT_S:g}"]
        )
        if code != 0:
            continue
        for rank, found in read_probe(out).items():
            if rank not in stacks:
                stacks[rank] = found if found.node else found.model_copy(update={"node": node})
    return stacks
