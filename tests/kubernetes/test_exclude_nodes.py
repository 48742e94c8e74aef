"""A resubmit without a suspect node (JobSpec.exclude_nodes): a required node affinity NotIn on
the node's name, in both kinds, as the official models accept it; bad names are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import validation_error
from jupyter_hyperpod.core.models import JobSpec

from . import official
from .conftest import make_launch, make_settings


@pytest.mark.parametrize("kind", ["PyTorchJob", "HyperPodPyTorchJob"])
def test_excluded_nodes_become_a_node_affinity_not_in(
    fs_root: Path, tmp_path: Path, kind: str
) -> None:
    offline = KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "no-kubeconfig"))
    launch = make_launch(
        fs_root, "resubmit", kind=kind, nodes=2, exclude_nodes=["hyperpod-i-0abc.ec2.internal"]
    )
    manifest = yaml.safe_load(offline.render(launch).text)
    official.check_manifest(manifest)
    spec = manifest["spec"]
    replica = (
        spec["pytorchReplicaSpecs"]["Worker"] if kind == "PyTorchJob" else spec["replicaSpecs"][0]
    )
    terms = replica["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/hostname",
                    "operator": "NotIn",
                    "values": ["hyperpod-i-0abc.ec2.internal"],
                }
            ]
        }
    ]


def test_a_node_name_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValidationError) as invalid:
        JobSpec(name="x", command=["a.py"], exclude_nodes=["node-1; rm -rf /"])
    refused = validation_error(invalid.value)  # what REST answers with its 400
    assert refused.field == "exclude_nodes"
    assert "is not a node name" in refused.message
