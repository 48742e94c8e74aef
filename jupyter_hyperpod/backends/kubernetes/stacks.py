"""Python stacks of a Kubernetes job's ranks: the probe of core/stacks.py in each worker pod,
through the pods' exec subresource (`connect GET /api/v1/namespaces/{namespace}/pods/{name}/exec`,
the `kubernetes` client's `stream`, a WebSocket of the v4.channel.k8s.io protocol). py-spy needs
ptrace in the container: without the SYS_PTRACE capability it is refused, and the rank's stack
says what to add."""

from __future__ import annotations

from collections.abc import Iterable

from ...core.errors import BackendUnavailable
from ...core.models import RankStack
from ...core.stacks import DUMP_TIMEOUT_S, PROBE, read_probe
from .client import KubeClient
from .manifest import CONTAINER


def exec_in_pod(
    kube: KubeClient, namespace: str, pod: str, command: list[str]
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a command in the pod's training container."""
    from kubernetes.stream import stream

    try:
        client = stream(
            kube.core.connect_get_namespaced_pod_exec,
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


def dump_stacks(
    kube: KubeClient, job_id: str, pods: Iterable[tuple[str, str, str | None]]
) -> dict[int, RankStack]:
    """Every rank's stack, by rank: the probe in each worker pod (namespace, name, node; its
    ranks, torchrun's too)."""
    stacks: dict[int, RankStack] = {}
    for namespace, name, node in pods:
        code, out, _ = exec_in_pod(
            kube, namespace, name, ["python3", "-c", PROBE, job_id, f"{DUMP_TIMEOUT_S:g}"]
        )
        if code != 0:
            continue
        for rank, found in read_probe(out).items():
            if rank not in stacks:
                stacks[rank] = found if found.node else found.model_copy(update={"node": node})
    return stacks
