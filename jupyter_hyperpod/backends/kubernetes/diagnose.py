"""The Kubernetes backend's login-node checks (`KubernetesOrchestrator.diagnose`): the kubeconfig
context, the API server, the job CRDs (Kubeflow, HyperPod), the FSx claim and the watch cache."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ...core.diagnose import CONNECT_TIMEOUT, HTTP_TIMEOUT, Check, check, guard
from ...core.errors import HyperPodError
from ...core.models import WatchedResource
from .client import kubeconfig_paths
from .manifest import JOB_KINDS

if TYPE_CHECKING:
    from .backend import KubernetesOrchestrator


def agent_hint(image: str = "<image>") -> str:
    """How to check that an image can run a HyperPodPyTorchJob: the HyperPod training operator
    drives each pod through the HyperPod elastic agent (PyPI hyperpod-elastic-agent), which the
    image must contain, started as `hyperpodrun`."""
    return (
        f"check with `docker run --rm --entrypoint hyperpodrun {image} --help` (or "
        f"`docker run --rm {image} pip show hyperpod-elastic-agent`); install it in the image "
        "with `pip install hyperpod-elastic-agent` (it needs torch<2.12) and start the job with "
        "hyperpodrun"
    )


def kubernetes_checks(orchestrator: KubernetesOrchestrator) -> list[Check]:
    """The kubeconfig context, the API server, the job CRDs and the FSx claim."""
    try:
        from kubernetes import client as k8s
        from kubernetes import config as kconfig
    except ImportError:
        return [
            check(
                "Kubernetes client",
                "fail",
                "the kubernetes package is not installed",
                "pip install 'jupyter-hyperpod[kubernetes]'",
            )
        ]
    connect_fix = (
        "connect to the cluster: jupyter hyperpod connect CLUSTER (or aws eks update-kubeconfig)"
    )
    checks: list[Check] = []
    paths = [p for p in kubeconfig_paths(orchestrator.kubeconfig) if os.path.exists(p)]
    if not paths and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return [
            check(
                "kubeconfig context",
                "fail",
                f"no kubeconfig at {', '.join(kubeconfig_paths(orchestrator.kubeconfig))}",
                connect_fix,
            )
        ]
    if paths:
        try:
            contexts, current = kconfig.list_kube_config_contexts(
                config_file=os.pathsep.join(paths)
            )
        except Exception as error:
            return [
                check(
                    "kubeconfig context",
                    "fail",
                    f"cannot read {', '.join(paths)}: {error}",
                    connect_fix,
                )
            ]
        names = [c["name"] for c in contexts]
        wanted = orchestrator.context or (current or {}).get("name")
        if not wanted or wanted not in names:
            return [
                check(
                    "kubeconfig context",
                    "fail",
                    f"context '{wanted or '(no current context)'}' not in {', '.join(names) or 'no contexts'}",
                    connect_fix + " or set c.KubernetesOrchestrator.context",
                )
            ]
        checks.append(check("kubeconfig context", "pass", f"{wanted} in {', '.join(paths)}"))
    kube = orchestrator.kube
    try:
        api = kube.api_client
    except HyperPodError as error:
        return [*checks, check("Kubernetes API", "fail", error.message, connect_fix)]
    timeout = (CONNECT_TIMEOUT, HTTP_TIMEOUT)
    try:
        version = k8s.VersionApi(api).get_code(_request_timeout=timeout)
        checks.append(
            check(
                "Kubernetes API", "pass", f"{kube.host} answers (Kubernetes {version.git_version})"
            )
        )
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        if status in (401,):
            return [
                *checks,
                check(
                    "Kubernetes API",
                    "fail",
                    f"{kube.host} refused the credentials (401)",
                    "refresh them: " + connect_fix,
                ),
            ]
        if not status:
            translated = kube.translate(error, "read /version")
            return [
                *checks,
                check(
                    "Kubernetes API",
                    "fail",
                    translated.message,
                    "check network access to the API endpoint (a private EKS endpoint needs this VPC)",
                ),
            ]
        checks.append(
            check("Kubernetes API", "pass", f"{kube.host} answers (HTTP {status} on /version)")
        )
    namespace = orchestrator.namespace
    for kind, (group, version_name, plural, _) in JOB_KINDS.items():
        checks.append(
            _crd_check(
                kube,
                k8s,
                kind,
                group,
                version_name,
                plural,
                namespace,
                required=kind == orchestrator.job_kind,
            )
        )
    if orchestrator.default_kind == "HyperPodPyTorchJob":
        image = orchestrator.image or "<image>"
        checks.append(
            check(
                "HyperPod elastic agent",
                "warn",
                f"HyperPodPyTorchJob pods start with hyperpodrun: the image ({image}) must contain "
                "the HyperPod elastic agent, which doctor cannot see from here",
                agent_hint(image),
            )
        )
    checks.append(_pvc_check(kube, k8s, orchestrator.pvc_name, namespace))
    checks.extend(guard("watch cache", lambda: watch_cache_check(orchestrator)))
    return checks


def _resource(what: str, resource: WatchedResource) -> str:
    if not resource.synced:
        return f"{what} not listed" + (f" ({resource.error})" if resource.error else "")
    parts = [f"{resource.items} {what}"]
    if resource.last_list_age_s is not None:
        parts.append(f"listed {resource.last_list_age_s:.1f} s ago")
    if resource.last_event_age_s is not None:
        parts.append(f"last event {resource.last_event_age_s:.1f} s ago")
    parts.append(f"{resource.expired} relists after 410")
    if not resource.connected:
        parts.append(f"watch cut for {resource.stale_s or 0:.1f} s")
        if resource.error:
            parts.append(resource.error)
    return ", ".join(parts)


def watch_cache_check(orchestrator: KubernetesOrchestrator, wait: float = HTTP_TIMEOUT) -> Check:
    """The watch cache of nodes and pods (cache.py): started here if no read has started it
    yet, given `wait` seconds to list and watch, then reported."""
    name = "watch cache"
    if not orchestrator.watch_cache:
        return check(
            name,
            "skip",
            "off (c.KubernetesOrchestrator.watch_cache = False): every request lists nodes "
            "and pods from the API server",
        )
    orchestrator.start_watch_cache()
    deadline = time.monotonic() + wait
    status = orchestrator.watch_cache_status()
    while not status.fresh and time.monotonic() < deadline:
        time.sleep(0.05)
        status = orchestrator.watch_cache_status()
    seen = f"{_resource('nodes', status.nodes)}; {_resource('pods', status.pods)}"
    for namespace, events in status.warning_events.items():
        seen += f"; {_resource(f'warning events in {namespace}', events)}"
    if status.fresh:
        return check(name, "pass", f"synced and watching: {seen}")
    return check(
        name,
        "warn",
        f"not synced ({seen}): until it is, every request lists nodes and pods from the API "
        "server directly (slow at cluster scale)",
        "allow this user to list and watch nodes and pods in all namespaces (a ClusterRole), "
        "or set c.KubernetesOrchestrator.watch_cache = False",
    )


def _crd_check(
    kube: Any,
    k8s: Any,
    kind: str,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    *,
    required: bool,
) -> Check:
    name = f"job kind {kind}"
    timeout = (CONNECT_TIMEOUT, HTTP_TIMEOUT)
    install = (
        "install the Kubeflow training operator (kubectl apply -k ...training-operator)"
        if group == "kubeflow.org"
        else "install the HyperPod training operator (EKS add-on)"
    )
    try:
        k8s.ApiextensionsV1Api(kube.api_client).read_custom_resource_definition(
            f"{plural}.{group}", _request_timeout=timeout
        )
        found: bool | None = True
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        found = False if status == 404 else None
    if found is None:
        try:
            k8s.CustomObjectsApi(kube.api_client).list_namespaced_custom_object(
                group, version, namespace, plural, limit=1, _request_timeout=timeout
            )
            found = True
        except Exception as error:
            status = getattr(error, "status", 0) or 0
            if status == 404:
                found = False
            else:
                return check(
                    name,
                    "fail" if required else "warn",
                    f"cannot tell whether {plural}.{group} is installed: {kube.translate(error, 'list ' + plural).message}",
                    "allow this user to list " + plural,
                )
    if found:
        return check(
            name,
            "pass",
            f"{plural}.{group} installed" + (" (the default kind)" if required else ""),
        )
    if required:
        return check(
            name,
            "fail",
            f"{plural}.{group} is not installed",
            install + " or set c.KubernetesOrchestrator.job_kind",
        )
    return check(
        name, "skip", f"{plural}.{group} not installed (only needed when a job asks for {kind})"
    )


def _pvc_check(kube: Any, k8s: Any, pvc_name: str, namespace: str) -> Check:
    name = "FSx claim"
    fix = (
        f"create the PersistentVolumeClaim {pvc_name} in namespace {namespace} (FSx CSI driver) "
        "or set c.KubernetesOrchestrator.pvc_name"
    )
    try:
        claim = k8s.CoreV1Api(kube.api_client).read_namespaced_persistent_volume_claim(
            pvc_name, namespace, _request_timeout=(CONNECT_TIMEOUT, HTTP_TIMEOUT)
        )
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        if status == 404:
            return check(
                name, "fail", f"no PersistentVolumeClaim {pvc_name} in namespace {namespace}", fix
            )
        return check(name, "fail", kube.translate(error, f"read the claim {pvc_name}").message, fix)
    phase = getattr(getattr(claim, "status", None), "phase", None) or "unknown"
    if phase != "Bound":
        return check(
            name,
            "warn",
            f"{namespace}/{pvc_name} is {phase}",
            "check its PersistentVolume and the FSx CSI driver",
        )
    return check(name, "pass", f"{namespace}/{pvc_name} is Bound")
