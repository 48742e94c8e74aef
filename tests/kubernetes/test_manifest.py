"""The rendered manifest: the seed's pod-finetuning.yaml shape, kinds, and the security checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.manifest import (
    ManifestOptions,
    build_manifest,
    check_manifest,
    k8s_escape,
)
from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest

from .conftest import IMAGE, make_launch, make_settings


@pytest.fixture
def offline(fs_root: Path, tmp_path: Path) -> KubernetesOrchestrator:
    """Rendering needs no API server."""
    return KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "no-kubeconfig"))


def test_seed_finetuning_job(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(
        fs_root,
        "deepseek-r1-qwen-14b-fine-tuning",
        nodes=8,
        gpus_per_node=1,
        efa_per_node=1,
        env={"MLFLOW_EXPERIMENT_NAME": "deepseek"},
    )
    rendered = offline.render(launch)
    assert rendered.format == "manifest" and rendered.language == "yaml"
    manifest = yaml.safe_load(rendered.text)
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    assert manifest["metadata"]["name"] == launch.job_id
    assert manifest["metadata"]["namespace"] == "default"
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 8 and worker["restartPolicy"] == "Never"
    pod = worker["template"]["spec"]
    assert pod["serviceAccountName"] == "eks-hyperpod-sa"
    assert pod["volumes"] == [
        {"name": "shmem", "hostPath": {"path": "/dev/shm"}},
        {"name": "fsx-volume", "persistentVolumeClaim": {"claimName": "fsx-claim"}},
    ]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["resources"] == {
        "requests": {"nvidia.com/gpu": 1, "vpc.amazonaws.com/efa": 1},
        "limits": {"nvidia.com/gpu": 1, "vpc.amazonaws.com/efa": 1},
    }
    assert container["volumeMounts"] == [
        {"name": "shmem", "mountPath": "/dev/shm"},
        {"name": "fsx-volume", "mountPath": "/data"},
    ]
    assert container["workingDir"] == "/data/Data-Scientist"
    assert container["command"][:3] == ["torchrun", "--nnodes=8", "--nproc-per-node=1"]
    assert "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)" in container["command"]
    assert container["command"][-3:] == [
        "/data/Data-Scientist/scripts/train.py",
        "--config",
        "/data/Data-Scientist/args.yaml",
    ]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MLFLOW_EXPERIMENT_NAME"] == "deepseek" and env["HYPERPOD_JOB_ID"] == launch.job_id
    assert "nodeSelector" not in pod and "annotations" not in manifest["metadata"]
    # The text a person reads keeps the manifest's order: apiVersion, kind, metadata, spec.
    assert rendered.text.splitlines()[0] == "apiVersion: kubeflow.org/v1"


def test_auto_resume_and_healthy_nodes(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(fs_root, nodes=2, auto_resume=True, max_retries=5, healthy_nodes_only=True)
    manifest = yaml.safe_load(offline.render(launch).text)
    assert manifest["metadata"]["annotations"] == {
        "sagemaker.amazonaws.com/enable-job-auto-resume": "true",
        "sagemaker.amazonaws.com/job-max-retry-count": "5",
    }
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    assert worker["template"]["spec"]["nodeSelector"] == {
        "sagemaker.amazonaws.com/node-health-status": "Schedulable",
        "sagemaker.amazonaws.com/deep-health-check-status": "Passed",
    }


def test_hyperpod_kind_by_job_and_by_config(
    offline: KubernetesOrchestrator, fs_root: Path, tmp_path: Path
) -> None:
    manifest = yaml.safe_load(
        offline.render(make_launch(fs_root, kind="HyperPodPyTorchJob", nodes=2, max_retries=2)).text
    )
    assert (
        manifest["apiVersion"] == "sagemaker.amazonaws.com/v1"
        and manifest["kind"] == "HyperPodPyTorchJob"
    )
    replica = manifest["spec"]["replicaSpecs"][0]
    assert replica["replicas"] == 2 and manifest["spec"]["runPolicy"]["jobMaxRetryCount"] == 2
    by_config = KubernetesOrchestrator(
        settings=make_settings(fs_root, tmp_path / "none", job_kind="HyperPodPyTorchJob")
    )
    assert (
        yaml.safe_load(by_config.render(make_launch(fs_root)).text)["kind"] == "HyperPodPyTorchJob"
    )
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, kind="TFJob"))
    assert error.value.field == "kind"


def test_single_process_and_plain_launcher(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    single = yaml.safe_load(
        offline.render(make_launch(fs_root, command=["bash", "-c", "echo $(hostname)"])).text
    )
    container = single["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    # A one-process job runs the program itself; `$(` is escaped so Kubernetes keeps it literal.
    assert container["command"] == ["bash", "-c", "echo $$(hostname)"]
    assert "resources" not in container
    script = yaml.safe_load(
        offline.render(make_launch(fs_root, command=["train.py"], launcher="plain")).text
    )
    command = script["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command == ["python3", "train.py"]
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, launcher="plain", procs_per_node=4))
    assert error.value.field == "procs_per_node"
    local = yaml.safe_load(offline.render(make_launch(fs_root, procs_per_node=8)).text)
    command = local["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command[:3] == ["torchrun", "--nnodes=1", "--nproc-per-node=8"]
    assert not any(part.startswith("--rdzv") for part in command)


def test_namespaces_images_and_names_are_checked(
    offline: KubernetesOrchestrator, fs_root: Path
) -> None:
    assert (
        yaml.safe_load(offline.render(make_launch(fs_root, namespace="team-a")).text)["metadata"][
            "namespace"
        ]
        == "team-a"
    )
    with pytest.raises(Forbidden) as error:
        offline.render(make_launch(fs_root, namespace="kube-system"))
    assert error.value.field == "namespace" and "kube-system" in error.value.message
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, image="bad image; rm -rf /"))
    assert error.value.field == "image"
    launch = make_launch(fs_root)
    launch.job_id = "Not_Valid"
    with pytest.raises(InvalidRequest):
        offline.render(launch)
    launch.job_id = "a" * 60
    with pytest.raises(InvalidRequest):
        offline.render(launch)
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, queue="has spaces"))
    assert error.value.field == "queue"
    queued = yaml.safe_load(
        offline.render(make_launch(fs_root, queue="hyperpod-ns-team-a-localqueue")).text
    )
    assert (
        queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    )


def test_no_default_image_names_the_field(fs_root: Path, tmp_path: Path) -> None:
    bare = KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "none", image=""))
    with pytest.raises(InvalidRequest) as error:
        bare.render(make_launch(fs_root))
    assert error.value.field == "image"


def test_manifest_check_refuses_host_paths_and_privileges(fs_root: Path) -> None:
    options = ManifestOptions(
        namespace="default", kind="PyTorchJob", image=IMAGE, pvc_name="fsx-claim", fs_mount="/data"
    )
    good = build_manifest(make_launch(fs_root), options)
    pod = good["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]

    def refused(mutate: object) -> str:
        manifest = build_manifest(make_launch(fs_root), options)
        target = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        mutate(target)  # type: ignore[operator]
        with pytest.raises(Forbidden) as error:
            check_manifest(manifest, options)
        return error.value.message

    assert "host paths" in refused(
        lambda p: p["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    )
    assert "host paths" in refused(
        lambda p: p["volumes"].__setitem__(0, {"name": "shmem", "hostPath": {"path": "/etc"}})
    )
    assert "privileged" in refused(
        lambda p: p["containers"][0].__setitem__("securityContext", {"privileged": True})
    )
    assert "hostNetwork" in refused(lambda p: p.__setitem__("hostNetwork", True))
    assert "capabilities" in refused(
        lambda p: p["containers"][0].__setitem__(
            "securityContext", {"capabilities": {"add": ["SYS_ADMIN"]}}
        )
    )
    check_manifest(good, options)
    assert pod["volumes"][0]["hostPath"] == {"path": "/dev/shm"}


def test_shm_as_memory_volume(fs_root: Path, tmp_path: Path) -> None:
    orchestrator = KubernetesOrchestrator(
        settings=make_settings(fs_root, tmp_path / "none", shm_size="64Gi")
    )
    pod = yaml.safe_load(orchestrator.render(make_launch(fs_root)).text)["spec"][
        "pytorchReplicaSpecs"
    ]["Worker"]["template"]["spec"]
    assert pod["volumes"][0] == {
        "name": "shmem",
        "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"},
    }


def test_escape() -> None:
    assert k8s_escape("$(A) $B $$(C) $") == "$$(A) $B $$$$(C) $"
