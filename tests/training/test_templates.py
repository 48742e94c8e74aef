"""The qlora-finetune and evaluate templates on every backend, and the project scaffold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from traitlets.config import Config

from jupyter_hyperpod.core.errors import InvalidRequest
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.templates import TemplateContext, get_template
from jupyter_hyperpod.training.config import load_config
from jupyter_hyperpod.training.scaffold import CONFIG_NAME, scaffold_project

from .conftest import module_env

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu"


def settings(fs_root: Path, tmp_path: Path, **kubernetes: Any) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.HyperPodSettings.user = "Data-Scientist"
    config.HyperPodSettings.partition = "user"
    config.HyperPodSettings.job_store = str(tmp_path / "jobs.sqlite")
    config.HyperPodSettings.mlflow_tracking_uri = "http://mlflow.internal:5000"
    config.KubernetesOrchestrator.kubeconfig = str(tmp_path / "no-kubeconfig")
    config.KubernetesOrchestrator.image = IMAGE
    config.KubernetesOrchestrator.allowed_namespaces = ["default"]
    config.SlurmOrchestrator.bin_dir = str(tmp_path / "no-slurm")
    return HyperPodSettings(config=config)


@pytest.fixture
def fs(tmp_path: Path) -> Path:
    root = tmp_path / "fsx"
    scaffold_project(
        root / "Data-Scientist" / "r1",
        model_id="deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        dataset="FreedomIntelligence/medical-o1-reasoning-SFT",
    )
    return root


FORM = {
    "config": "r1/args-fine-tuning.yaml",
    "model_id": "models/qwen",
    "max_steps": "200",
    "nodes": 2,
    "procs_per_node": 4,
    "merge_weights": "false",
}


def test_spec_runs_the_module_in_the_config_directory(fs: Path) -> None:
    context = TemplateContext("slurm", str(fs / "Data-Scientist"), None, "python3")
    spec = get_template("qlora-finetune").make_spec("ft", FORM, context)
    assert spec.workdir == "r1"
    assert spec.command == [
        "python3",
        "-m",
        "jupyter_hyperpod.training",
        "train",
        "--config",
        "args-fine-tuning.yaml",
        "--set",
        "model_id=../models/qwen",
        "--set",
        "max_steps=200",
        "--set",
        "merge_weights=false",
    ]
    assert (spec.nodes, spec.procs_per_node, spec.gpus_per_node) == (2, 4, 4)
    assert spec.auto_resume and spec.max_retries == 3
    local = get_template("qlora-finetune").make_spec(
        "ft", FORM, TemplateContext("local", str(fs / "Data-Scientist"), None, "python3")
    )
    assert local.gpus_per_node == 0  # this machine: no GPU unless asked
    with pytest.raises(InvalidRequest) as error:
        get_template("evaluate").make_spec("ev", {"config": "r1/nope.yaml"}, context)
    assert error.value.field == "params.config"
    with pytest.raises(InvalidRequest) as error:
        get_template("qlora-finetune").make_spec("ft", {**FORM, "quantization": "int3"}, context)
    assert error.value.field == "params.quantization"


def test_a_literal_tracking_uri_in_the_config_goes_to_the_job(fs: Path) -> None:
    path = fs / "Data-Scientist" / "r1" / CONFIG_NAME
    data = yaml.safe_load(path.read_text())
    path.write_text(
        yaml.safe_dump(
            {**data, "mlflow_uri": "arn:aws:sagemaker:us-east-1:1:mlflow-tracking-server/x"}
        )
    )
    context = TemplateContext("kubernetes", str(fs / "Data-Scientist"), None, "python3")
    spec = get_template("qlora-finetune").make_spec("ft", FORM, context)
    assert spec.env["MLFLOW_TRACKING_URI"].startswith("arn:aws:sagemaker")


def test_slurm_preview_launches_torchrun_on_every_node(fs: Path, tmp_path: Path) -> None:
    from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator

    conf = settings(fs, tmp_path)
    service = HyperPodService(conf, orchestrator=SlurmOrchestrator(settings=conf))
    rendered = service.render({"name": "ft", "template": "qlora-finetune", "params": FORM})
    text = rendered.text
    assert rendered.format == "sbatch"
    assert "#SBATCH --nodes=2" in text and "#SBATCH --gpus-per-node=4" in text
    assert "torchrun --nnodes=2 --nproc-per-node=4" in text
    assert "python3 -m jupyter_hyperpod.training train --config args-fine-tuning.yaml" in text
    assert "/Data-Scientist/r1" in text  # runs in the config's directory on the cluster
    evaluation = service.render(
        {"name": "ev", "template": "evaluate", "params": {"config": "r1/args-fine-tuning.yaml"}}
    )
    assert "jupyter_hyperpod.training evaluate --config args-fine-tuning.yaml" in evaluation.text


def test_kubernetes_preview_is_a_pytorchjob_with_the_module(fs: Path, tmp_path: Path) -> None:
    from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator

    conf = settings(fs, tmp_path)
    # A Kubeflow PyTorchJob (HyperPodPyTorchJob is the default kind), in a namespace where
    # HyperPod auto-resume watches Kubeflow jobs.
    orchestrator = KubernetesOrchestrator(
        settings=conf, job_kind="PyTorchJob", namespace="kubeflow", allowed_namespaces=["kubeflow"]
    )
    service = HyperPodService(conf, orchestrator=orchestrator)
    rendered = service.render(
        {"name": "ft", "template": "qlora-finetune", "params": {**FORM, "efa_per_node": 1}}
    )
    manifest = yaml.safe_load(rendered.text)
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    container = worker["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
    command = " ".join(container.get("command", []) + container.get("args", []))
    assert "-m jupyter_hyperpod.training train --config args-fine-tuning.yaml" in command
    assert "/data/Data-Scientist/r1" in rendered.text
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.internal:5000"
    # Auto-resume: restarted pods run the same command, which resumes from the last checkpoint.
    assert worker["restartPolicy"] == "OnFailure"
    assert manifest["metadata"]["annotations"][
        "sagemaker.amazonaws.com/enable-job-auto-resume"
    ] == ("true")
    hyperpod = service.render(
        {
            "name": "ft",
            "template": "qlora-finetune",
            "params": {**FORM, "kind": "HyperPodPyTorchJob"},
        }
    )
    assert yaml.safe_load(hyperpod.text)["kind"] == "HyperPodPyTorchJob"
    assert "jupyter_hyperpod.training" in hyperpod.text


def test_scaffold_writes_a_project_that_loads_and_runs(fs: Path) -> None:
    project = fs / "Data-Scientist" / "r1"
    for name in (
        "download_model.py",
        "scripts/dataprep.py",
        "scripts/train.py",
        "scripts/evaluation.py",
        "README.md",
    ):
        assert (project / name).is_file()
    config = load_config(project / CONFIG_NAME)
    assert config.model_source == "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"
    assert config.model_id == str(project / "models" / "base")
    assert config.dataset == "FreedomIntelligence/medical-o1-reasoning-SFT"
    assert config.fsdp_options == {"full_shard", "auto_wrap", "offload"} and config.save_steps == 50
    with pytest.raises(FileExistsError):
        scaffold_project(project)
    # The thin entry scripts reach the module (an offline download fails with a clear message).
    result = subprocess.run(
        [sys.executable, str(project / "download_model.py")],
        cwd=fs,
        env=module_env(HF_HUB_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "hub is unreachable" in result.stdout + result.stderr


def test_download_uses_a_local_directory_and_explains_failures(
    tmp_path: Path, tiny_model: Path
) -> None:
    from jupyter_hyperpod.training.download import DownloadError, download_model

    # A local model goes where the config's model_id says (every later step reads it there).
    assert download_model(str(tiny_model), tmp_path / "base") == tmp_path / "base"
    assert (tmp_path / "base" / "config.json").read_bytes() == (
        tiny_model / "config.json"
    ).read_bytes()
    assert download_model(str(tiny_model), tiny_model) == tiny_model
    (tmp_path / "empty").mkdir()
    with pytest.raises(DownloadError, match=r"without config\.json"):
        download_model(str(tmp_path / "empty"), tmp_path / "x")
