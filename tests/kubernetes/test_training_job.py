"""The qlora-finetune template as a 2-worker HyperPodPyTorchJob: each pod runs the training module
(through hyperpodrun, here its shim) on the shared FS as /data, the two ranks shard the tiny model
with FSDP over gloo, and the adapter lands on the shared file system."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.catalog import TemplateContext
from jupyter_hyperpod.core.models import JobState

from .conftest import make_launch, stored, wait_state
from .controller import Controller

pytest.importorskip("peft")


@pytest.mark.slow
def test_qlora_template_trains_on_two_pods(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    if not controller.kubelet.isolated:
        pytest.skip("pods need their own hostname and /data (unshare is not allowed here)")
    from jupyter_hyperpod.templates import get_template
    from jupyter_hyperpod.training.synthetic import (
        build_random_model,
        small_tokenizer,
        write_synthetic_dataset,
    )

    home = fs_root / "Data-Scientist"
    build_random_model(
        home / "models" / "tiny",
        tokenizer=small_tokenizer(),
        hidden_size=64,
        num_layers=2,
        initializer_range=0.2,
    )
    write_synthetic_dataset(home / "data" / "reasoning.jsonl", 64)
    (home / "r1").mkdir()
    # The paths the pods see: the shared FS is /data there.
    (home / "r1" / "args-fine-tuning.yaml").write_text(
        yaml.safe_dump(
            {
                "model_id": "/data/Data-Scientist/models/tiny",
                "dataset": "/data/Data-Scientist/data/reasoning.jsonl",
                "output_dir": "model",
                "learning_rate": 1e-2,
                "per_device_train_batch_size": 2,
                "max_seq_length": 256,
                "system_prompt": "You answer questions.",
                "lora_r": 8,
                "lora_alpha": 16,
                "save_steps": 4,
                "log_system_metrics": False,
            }
        )
    )
    context = TemplateContext("kubernetes", str(home), None, "python3")
    spec = get_template("qlora-finetune").make_spec(
        "ft",
        {
            "config": "r1/args-fine-tuning.yaml",
            "max_steps": "8",
            "nodes": 2,
            "procs_per_node": 1,
            "merge_weights": "false",
            "kind": "HyperPodPyTorchJob",
        },
        context,
    )
    fields = spec.model_dump(exclude={"name"})
    launch = make_launch(fs_root, "ft", **fields)
    launch.workdir = f"/data/Data-Scientist/{spec.workdir}"
    job = stored(launch, backend.submit(launch))
    final = wait_state(backend, job, JobState.SUCCEEDED, JobState.FAILED, timeout=600)
    logs = [backend.log_reader(job, rank) for rank in range(2)]
    text = "\n".join(reader.read(0, 1 << 22).decode(errors="replace") for reader in logs)
    assert final.state is JobState.SUCCEEDED, text[-4000:]
    summary = json.loads((home / "r1" / "model" / "train_results.json").read_text())
    assert summary["world_size"] == 2 and summary["parallelism"] == "fsdp"
    assert (home / "r1" / "model" / "adapter" / "adapter_model.safetensors").is_file()
    for reader in logs:
        reader.close()
