"""Every manifest the tests render, checked against the maintained models of its API (not a schema
of ours):

- PyTorchJob: the Kubeflow Training Operator SDK's models (PyPI `kubeflow-training` 1.9.2, whose
  pod templates are the `kubernetes` client's models);
- HyperPodPyTorchJob: AWS's pydantic models of the CRD, `hyperpod_pytorch_job_unified_config`
  from PyPI `sagemaker-hyperpod` 3.12.0, vendored unchanged in vendor/ (sha256 below): that
  package pins pytest==8.3.2, ruff==0.6.2, requests==2.32.4, click==8.1.7 and more, so it cannot be
  installed beside our tools, and `hyperpod-pytorch-job-template` (the CLI's template models)
  imports it without declaring it;
- the pod templates of both: the `kubernetes` client's V1PodTemplateSpec.

The OpenAPI models check types and required fields as they load but drop fields they do not
know, so each check also loads the object and writes it back: a field that does not come back
is not part of the API (a typo, or a field of another version).
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes.client import V1ObjectMeta, V1PodTemplateSpec

VENDORED = Path(__file__).parent / "vendor" / "hyperpod_pytorch_job_unified_config.py.txt"
VENDORED_SHA256 = "ae5de2eb7ad94fb39f0ef1e63824abbdb091420095c0f24081f3dee580710460"


def _load_vendored() -> ModuleType:
    source = VENDORED.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    assert digest == VENDORED_SHA256, "the vendored AWS model is not the published file"
    module = ModuleType("hyperpod_pytorch_job_unified_config")
    module.__file__ = str(VENDORED)
    sys.modules[module.__name__] = module  # pydantic resolves the annotations through it
    exec(compile(source, str(VENDORED), "exec"), module.__dict__)
    return module


hyperpod: Any = _load_vendored()


class _Response:
    def __init__(self, obj: Any) -> None:
        self.data = json.dumps(obj)


def _paths(obj: Any, prefix: str = "") -> set[str]:
    if isinstance(obj, dict):
        found = set()
        for key, value in obj.items():
            if value is None:
                continue
            found.add(f"{prefix}.{key}")
            found |= _paths(value, f"{prefix}.{key}")
        return found
    if isinstance(obj, list):
        return {path for i, item in enumerate(obj) for path in _paths(item, f"{prefix}[{i}]")}
    return set()


def _round_trip(client: Any, obj: dict[str, Any], model: str) -> None:
    loaded = client.deserialize(_Response(obj), model)
    back = client.sanitize_for_serialization(loaded)
    unknown = sorted(_paths(obj) - _paths(back))
    assert not unknown, f"fields {model} does not have: {unknown}"


def _quantities_as_strings(obj: Any) -> Any:
    """Resource quantities may be JSON numbers (the API reads a Quantity from either); the
    client's models type them as strings."""
    if isinstance(obj, dict):
        return {
            key: {k: str(v) for k, v in value.items()}
            if key in ("requests", "limits") and isinstance(value, dict)
            else _quantities_as_strings(value)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [_quantities_as_strings(item) for item in obj]
    return obj


def _kubernetes_round_trip(obj: dict[str, Any], model: Any) -> None:
    """The `kubernetes` client's (pydantic) model: types checked as it loads; unknown fields are
    dropped, so they are the paths that do not come back."""
    obj = _quantities_as_strings(obj)
    back = model.from_dict(obj).to_dict(serialize=True)
    unknown = sorted(_paths(obj) - _paths(back))
    assert not unknown, f"fields {model.__name__} does not have: {unknown}"


def check_pod_template(template: dict[str, Any]) -> None:
    _kubernetes_round_trip(template, V1PodTemplateSpec)


def check_pytorchjob(manifest: dict[str, Any]) -> None:
    from kubeflow.training import ApiClient

    # The SDK's own client reads the job's fields; the embedded Kubernetes objects (metadata,
    # pod templates) are read by the `kubernetes` client, whose newer models the SDK's 1.9
    # deserializer cannot read (their types are spelt `Dict[str, str]`).
    job = copy.deepcopy(manifest)
    job["metadata"] = {}
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"] = {}
    _round_trip(ApiClient(), job, "KubeflowOrgV1PyTorchJob")
    _kubernetes_round_trip(manifest["metadata"], V1ObjectMeta)
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        check_pod_template(replica["template"])


def check_hyperpodpytorchjob(manifest: dict[str, Any]) -> None:
    assert manifest["apiVersion"] == "sagemaker.amazonaws.com/v1"
    assert manifest["kind"] == "HyperPodPyTorchJob"
    assert set(manifest) <= {"apiVersion", "kind", "metadata", "spec", "status"}
    metadata = manifest["metadata"]
    hyperpod.Metadata.model_validate(metadata)
    spec = manifest["spec"]
    # The top-level spec model ignores unknown keys (extra="ignore"): check them by name.
    known = set(hyperpod._HyperPodPytorchJob.model_fields)
    assert set(spec) <= known, f"spec fields the CRD does not have: {set(spec) - known}"
    hyperpod._HyperPodPytorchJob.model_validate(spec, by_name=True)
    if "status" in manifest:
        hyperpod.HyperPodPytorchJobStatus.model_validate(manifest["status"], by_name=True)
    for replica in spec["replicaSpecs"]:
        check_pod_template(replica["template"])


def check_manifest(manifest: dict[str, Any]) -> None:
    if manifest["kind"] == "PyTorchJob":
        check_pytorchjob(manifest)
    else:
        check_hyperpodpytorchjob(manifest)


def refusal(manifest: dict[str, Any]) -> str | None:
    """As an API server answers a create the CRD's schema refuses (422)."""
    try:
        check_manifest(manifest)
    except (AssertionError, ValueError, TypeError) as exc:
        return f"{manifest.get('kind')} is invalid: {exc}"
    return None
