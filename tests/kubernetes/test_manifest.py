"""The rendered manifest: the seed's pod-finetuning.yaml shape, kinds, and the security checks."""

from __future__ import annotations

import copy
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

from . import official
from .conftest import IMAGE, make_launch, make_settings


@pytest.fixture
def offline(fs_root: Path, tmp_path: Path) -> KubernetesOrchestrator:
    """Rendering needs no API server."""
    return KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "no-kubeconfig"))


def test_seed_finetuning_job(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(
        fs_root,
        "deepseek-r1-qwen-14b-fine-tuning",
        kind="PyTorchJob",
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
    # 8 workers x 1 GPU: c10d rendezvous through the elasticPolicy, whose PET_* variables the
    # operator injects and torchrun reads; no `$(VAR)` that nobody sets is left in the argv.
    assert container["command"][:3] == ["torchrun", "--nnodes=8", "--nproc-per-node=1"]
    assert not any("$(" in part or part.startswith("--rdzv") for part in container["command"])
    assert manifest["spec"]["elasticPolicy"] == {
        "rdzvBackend": "c10d",
        "minReplicas": 8,
        "maxReplicas": 8,
        "maxRestarts": 0,
    }
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert "backoffLimit" not in manifest["spec"]["runPolicy"]
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
    launch = make_launch(
        fs_root,
        kind="PyTorchJob",
        namespace="hyperpod-ns-team-a",
        nodes=2,
        auto_resume=True,
        max_retries=5,
        healthy_nodes_only=True,
    )
    manifest = yaml.safe_load(offline.render(launch).text)
    assert manifest["metadata"]["annotations"] == {
        "sagemaker.amazonaws.com/enable-job-auto-resume": "true",
        "sagemaker.amazonaws.com/job-max-retry-count": "5",
    }
    # 5 restarts that run: the operator fails the job when restarts reach backoffLimit.
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 6
    assert manifest["spec"]["elasticPolicy"]["maxRestarts"] == 5
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
        settings=make_settings(fs_root, tmp_path / "none", job_kind="PyTorchJob")
    )
    assert yaml.safe_load(by_config.render(make_launch(fs_root)).text)["kind"] == "PyTorchJob"
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, kind="TFJob"))
    assert error.value.field == "kind"


def test_single_process_and_plain_launcher(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    single = yaml.safe_load(
        offline.render(
            make_launch(fs_root, kind="PyTorchJob", command=["bash", "-c", "echo $(hostname)"])
        ).text
    )
    container = single["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    # A one-process job runs the program itself; `$(` is escaped so Kubernetes keeps it literal.
    assert container["command"] == ["bash", "-c", "echo $$(hostname)"]
    assert "resources" not in container
    script = yaml.safe_load(
        offline.render(
            make_launch(fs_root, kind="PyTorchJob", command=["train.py"], launcher="plain")
        ).text
    )
    command = script["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command == ["python3", "train.py"]
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, kind="PyTorchJob", launcher="plain", procs_per_node=4))
    assert error.value.field == "procs_per_node"
    # Several plain pods of a PyTorchJob would get no rank variables from the operator.
    with pytest.raises(InvalidRequest) as error:
        offline.render(make_launch(fs_root, kind="PyTorchJob", launcher="plain", nodes=2))
    assert error.value.field == "launcher"
    local = yaml.safe_load(
        offline.render(make_launch(fs_root, kind="PyTorchJob", procs_per_node=8)).text
    )
    command = local["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command[:4] == ["torchrun", "--standalone", "--nnodes=1", "--nproc-per-node=8"]
    assert "elasticPolicy" not in local["spec"]


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
    pod = yaml.safe_load(orchestrator.render(make_launch(fs_root, kind="PyTorchJob")).text)["spec"][
        "pytorchReplicaSpecs"
    ]["Worker"]["template"]["spec"]
    assert pod["volumes"][0] == {
        "name": "shmem",
        "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"},
    }


def test_escape() -> None:
    assert k8s_escape("$(A) $B $$(C) $") == "$$(A) $B $$$$(C) $"


def test_hyperpod_job_is_first_and_runs_hyperpodrun(
    offline: KubernetesOrchestrator, fs_root: Path
) -> None:
    """Without a cluster to ask, and on a cluster that serves it, the kind is HyperPodPyTorchJob,
    launched by the HyperPod elastic agent with torchrun's arguments and its port declared."""
    launch = make_launch(fs_root, nodes=4, procs_per_node=2, gpus_per_node=2, max_retries=2)
    manifest = yaml.safe_load(offline.render(launch).text)
    assert manifest["kind"] == "HyperPodPyTorchJob"
    (replica,) = manifest["spec"]["replicaSpecs"]
    assert replica["name"] == "pods" and replica["replicas"] == 4
    assert manifest["spec"]["nprocPerNode"] == "2"
    run_policy = manifest["spec"]["runPolicy"]
    rules = run_policy.pop("logMonitoringConfiguration")  # the watchdog's (test_log_monitoring)
    assert [rule["name"] for rule in rules] == ["hyperpod-watchdog-hang"]
    assert run_policy == {"jobMaxRetryCount": 2, "cleanPodPolicy": "None"}
    (container,) = replica["template"]["spec"]["containers"]
    assert container["command"][:4] == [
        "hyperpodrun",
        "--nnodes=4",
        "--nproc-per-node=2",
        "--tee=3",
    ]
    assert container["command"][-3:] == launch.command
    assert container["ports"] == [{"name": "hyperpod-agent", "containerPort": 8080}]
    # A one-process script still starts through the agent, which the operator talks to.
    single = yaml.safe_load(offline.render(make_launch(fs_root, command=["bash", "-c", "x"])).text)
    command = single["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    assert command == [
        "hyperpodrun",
        "--nnodes=1",
        "--nproc-per-node=1",
        "--no-python",
        "bash",
        "-c",
        "x",
    ]


def test_retries_and_annotation_agree(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    """auto-resume without max_retries is 3 retries everywhere: the annotation HyperPod reads,
    the restarts the operator allows (backoffLimit 4, see pkg/core/job.go) and the warning."""
    launch = make_launch(
        fs_root, kind="PyTorchJob", namespace="kubeflow", nodes=2, auto_resume=True
    )
    rendered = offline.render(launch)
    manifest = yaml.safe_load(rendered.text)
    assert manifest["metadata"]["annotations"]["sagemaker.amazonaws.com/job-max-retry-count"] == "3"
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 4
    assert manifest["spec"]["elasticPolicy"]["maxRestarts"] == 3
    assert manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert any("up to 3 times" in warning for warning in rendered.warnings)
    hyperpod = yaml.safe_load(offline.render(make_launch(fs_root, auto_resume=True)).text)
    assert hyperpod["spec"]["runPolicy"]["jobMaxRetryCount"] == 3
    plain = yaml.safe_load(offline.render(make_launch(fs_root, kind="PyTorchJob")).text)
    assert "backoffLimit" not in plain["spec"]["runPolicy"]
    assert plain["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"


def test_auto_resume_needs_an_eligible_namespace(fs_root: Path, tmp_path: Path) -> None:
    """HyperPod auto-resume watches Kubeflow jobs in `kubeflow` or `hyperpod*` namespaces only."""
    strict = KubernetesOrchestrator(
        settings=make_settings(fs_root, tmp_path / "none", allowed_namespaces=["default", "team-a"])
    )
    with pytest.raises(InvalidRequest) as error:
        strict.render(make_launch(fs_root, kind="PyTorchJob", auto_resume=True))
    assert error.value.field == "namespace" and error.value.status == 400
    assert "'kubeflow'" in error.value.message and "'hyperpod'" in error.value.message
    with pytest.raises(InvalidRequest) as error:
        strict.render(make_launch(fs_root, kind="PyTorchJob", auto_resume=True, namespace="team-a"))
    assert error.value.field == "namespace" and "team-a" in error.value.message
    # A HyperPodPyTorchJob restarts itself wherever it runs.
    assert strict.render(make_launch(fs_root, auto_resume=True)).text
    picks = KubernetesOrchestrator(
        settings=make_settings(
            fs_root, tmp_path / "none", allowed_namespaces=["default", "hyperpod-ns-team-a"]
        )
    )
    manifest = yaml.safe_load(
        picks.render(make_launch(fs_root, kind="PyTorchJob", auto_resume=True)).text
    )
    assert manifest["metadata"]["namespace"] == "hyperpod-ns-team-a"
    with pytest.raises(InvalidRequest) as error:
        picks.render(make_launch(fs_root, kind="PyTorchJob", auto_resume=True, namespace="default"))
    assert "hyperpod-ns-team-a" in error.value.message


@pytest.mark.parametrize("kind", ["PyTorchJob", "HyperPodPyTorchJob"])
def test_job_names_fit_every_derived_object(
    offline: KubernetesOrchestrator, fs_root: Path, kind: str
) -> None:
    """DNS-1035 (a letter first), and `<job>-<replica>-<index>` within 63 characters."""
    launch = make_launch(fs_root, kind=kind, nodes=16)
    launch.job_id = "8b-finetune-abc123"
    with pytest.raises(InvalidRequest) as error:
        offline.render(launch)
    assert error.value.field == "name" and "starting with a letter" in error.value.message
    replica = "worker" if kind == "PyTorchJob" else "pods"
    longest = 63 - len(f"-{replica}-15")
    launch.job_id = "a" * longest
    assert offline.render(launch).text
    launch.job_id = "a" * (longest + 1)
    with pytest.raises(InvalidRequest) as error:
        offline.render(launch)
    assert error.value.field == "name" and "1 character(s) too long" in error.value.message


def test_queue_and_priority_class_are_the_clusters(fs_root: Path) -> None:
    options = ManifestOptions(
        namespace="hyperpod-ns-team-a",
        kind="HyperPodPyTorchJob",
        image=IMAGE,
        pvc_name="fsx-claim",
        fs_mount="/data",
        local_queues={"hyperpod-ns-team-a": ["hyperpod-ns-team-a-localqueue"]},
        priority_classes=["inference-priority", "training-priority"],
    )
    manifest = build_manifest(
        make_launch(
            fs_root, queue="hyperpod-ns-team-a-localqueue", priority_class="training-priority"
        ),
        options,
    )
    for labels in (
        manifest["metadata"]["labels"],
        manifest["spec"]["replicaSpecs"][0]["template"]["metadata"]["labels"],
    ):
        assert labels["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
        assert labels["kueue.x-k8s.io/priority-class"] == "training-priority"
    with pytest.raises(InvalidRequest) as error:
        build_manifest(make_launch(fs_root, queue="other-queue"), options)
    assert error.value.field == "queue" and "hyperpod-ns-team-a-localqueue" in error.value.message
    with pytest.raises(InvalidRequest) as error:
        build_manifest(make_launch(fs_root, priority_class="urgent"), options)
    assert error.value.field == "priority_class" and "training-priority" in error.value.message


def test_official_models_refuse_what_the_apis_do_not_have(fs_root: Path) -> None:
    """The checks every rendered manifest goes through (official.py) do catch a field that is not
    in the API, at each level: job spec, elastic policy, pod template."""
    options = ManifestOptions(
        namespace="kubeflow", kind="PyTorchJob", image=IMAGE, pvc_name="fsx-claim", fs_mount="/data"
    )
    kubeflow = build_manifest(make_launch(fs_root, nodes=2, auto_resume=True), options)
    hyperpod = build_manifest(make_launch(fs_root, kind="HyperPodPyTorchJob", nodes=2), options)
    official.check_manifest(kubeflow)
    official.check_manifest(hyperpod)
    for manifest, path in [
        (kubeflow, ["spec", "elasticPolicy"]),
        (kubeflow, ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec"]),
        (hyperpod, ["spec", "runPolicy"]),
        (hyperpod, ["spec"]),
    ]:
        broken = copy.deepcopy(manifest)
        target = broken
        for key in path:
            target = target[key]
        target["notAField"] = 1
        with pytest.raises((AssertionError, ValueError)):
            official.check_manifest(broken)
