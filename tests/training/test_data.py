"""Config loading (the seed's YAML unchanged), data preparation, tokenization and packing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_hyperpod.training.batching import IGNORE_INDEX, collate, make_plan, tokenize_records
from jupyter_hyperpod.training.config import ConfigError, load_config
from jupyter_hyperpod.training.dataprep import prepare, read_split
from jupyter_hyperpod.training.synthetic import deepseek_tokenizer, synthetic_rows

SEED_YAML = """\
# Location in the FSx for Lustre file system where the base model was saved
model_id: "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/DeepSeek-R1-Distill-Qwen-14B"
mlflow_uri: "${MLFLOW_ARN}"
mlflow_experiment_name: "deepseek-r1-distill-llama-8b-agent"
# sagemaker specific parameters
output_dir: "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/model/"
train_dataset_path: "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/data/train/"
test_dataset_path: "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/data/test/"
# training parameters
lora_r: 8
lora_alpha: 16
lora_dropout: 0.1
learning_rate: 2e-4                    # learning rate scheduler
num_train_epochs: 1                    # number of training epochs
per_device_train_batch_size: 2         # batch size per device during training
per_device_eval_batch_size: 2          # batch size for evaluation
gradient_accumulation_steps: 2         # number of steps before performing a backward/update pass
gradient_checkpointing: true           # use gradient checkpointing
bf16: true                             # use bfloat16 precision
tf32: false                            # use tf32 precision
fsdp: "full_shard auto_wrap offload"
fsdp_config:
    backward_prefetch: "backward_pre"
    cpu_ram_efficient_loading: true
    offload_params: true
    forward_prefetch: false
    use_orig_params: true
merge_weights: true
"""


def test_the_seed_yaml_loads_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "args-fine-tuning.yaml"
    path.write_text(SEED_YAML)
    monkeypatch.delenv("MLFLOW_ARN", raising=False)
    config = load_config(path)
    assert config.model_id.endswith("/DeepSeek-R1-Distill-Qwen-14B")
    assert config.output_dir == "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/model"
    assert config.learning_rate == 2e-4 and isinstance(config.learning_rate, float)
    assert (config.lora_r, config.lora_alpha, config.lora_dropout) == (8, 16, 0.1)
    assert config.gradient_accumulation_steps == 2 and config.merge_weights is True
    assert config.fsdp_options == {"full_shard", "auto_wrap", "offload"}
    assert config.fsdp_config["offload_params"] is True
    assert config.mlflow_uri is None  # ${MLFLOW_ARN} unset: fall back to the job's tracking URI

    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/demo"
    monkeypatch.setenv("MLFLOW_ARN", arn)
    assert load_config(path).mlflow_uri == arn


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model_id: m\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigError, match=r"learning_rat.*did you mean 'learning_rate'"):
        load_config(path)
    path.write_text("model_id: m\nlora_r: eight\n")
    with pytest.raises(ConfigError, match="lora_r"):
        load_config(path)
    path.write_text("model_id: m\nreport_to: none\nfsdp: 'full_shard auto_wrap'\n")
    config = load_config(path, {"max_steps": 3})  # HF-only keys are ignored with a warning
    assert config.max_steps == 3
    assert Path(config.train_dataset_path) == tmp_path / "data" / "train"  # relative to the file


def test_dataprep_formats_the_seed_schema_and_splits_with_a_seed(tmp_path: Path) -> None:
    source = tmp_path / "src.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in synthetic_rows(50)))
    config = load_config(
        None,
        {
            "dataset": str(source),
            "system_prompt": "Be brief.",
            "train_dataset_path": str(tmp_path / "a/train"),
            "test_dataset_path": str(tmp_path / "a/test"),
            "test_size": 0.2,
        },
    )
    summary = prepare(config)
    assert summary == {"records": 50, "train": 40, "test": 10, "skipped": 0}
    train, test = read_split(tmp_path / "a/train"), read_split(tmp_path / "a/test")
    row = next(r for r in synthetic_rows(50) if r["Question"] == train[0]["question"])
    assert train[0]["prompt"] == (
        f"<｜begin▁of▁sentence｜>Be brief.<｜User｜>{row['Question']}<｜Assistant｜>"  # noqa: RUF001
    )
    assert train[0]["completion"] == (
        f"<think>\n{row['Complex_CoT']}\n</think>\n{row['Response']}<｜end▁of▁sentence｜>"  # noqa: RUF001
    )
    assert not {r["question"] for r in train} & {r["question"] for r in test}

    again = config.__class__(
        **{
            **config.__dict__,
            "train_dataset_path": str(tmp_path / "b/train"),
            "test_dataset_path": str(tmp_path / "b/test"),
        }
    )
    prepare(again)
    assert read_split(tmp_path / "b/test") == test  # same seed, same split
    other = config.__class__(**{**again.__dict__, "data_seed": 7})
    prepare(other)
    assert read_split(tmp_path / "b/test") != test


def test_dataprep_reads_parquet_and_json_with_a_column_mapping(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"q": f"question {i}", "a": f"answer {i}", "sys": "custom"} for i in range(10)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    (tmp_path / "d.json").write_text(json.dumps(rows))
    for name in ("d.parquet", "d.json"):
        config = load_config(
            None,
            {
                "dataset": str(tmp_path / name),
                "column_mapping": {
                    "question": "q",
                    "response": "a",
                    "reasoning": None,
                    "system": "sys",
                },
                "train_dataset_path": str(tmp_path / name / ".." / f"{name}-train"),
                "test_dataset_path": str(tmp_path / f"{name}-test"),
            },
        )
        assert prepare(config)["records"] == 10
        record = read_split(config.train_dataset_path)[0]
        assert record["prompt"].startswith("<｜begin▁of▁sentence｜>custom<｜User｜>question ")  # noqa: RUF001
        assert record["completion"].startswith("answer ")  # no <think> block without reasoning
    bad = load_config(
        None,
        {
            "dataset": str(tmp_path / "d.json"),
            "column_mapping": {"question": "nope", "response": "a"},
        },
    )
    with pytest.raises(ConfigError, match="column 'nope' not in the data"):
        prepare(bad)


def test_real_deepseek_tokenizer_masks_the_prompt() -> None:
    tokenizer = deepseek_tokenizer()
    record = {
        "prompt": "<｜begin▁of▁sentence｜>sys<｜User｜>Why?<｜Assistant｜>",  # noqa: RUF001
        "completion": "<think>\nbecause\n</think>\nIt is so.<｜end▁of▁sentence｜>",  # noqa: RUF001
    }
    [example], dropped = tokenize_records([record], tokenizer, 64)
    assert dropped == 0
    tokens = tokenizer.convert_ids_to_tokens(example.input_ids)
    for special in (
        "<｜begin▁of▁sentence｜>",  # noqa: RUF001
        "<｜User｜>",  # noqa: RUF001
        "<｜Assistant｜>",  # noqa: RUF001
        "<think>",
        "</think>",
        "<｜end▁of▁sentence｜>",  # noqa: RUF001
    ):
        assert special in tokens  # one id each, not split into pieces
    answer_start = tokens.index("<｜Assistant｜>") + 1  # noqa: RUF001
    assert example.labels[:answer_start] == [IGNORE_INDEX] * answer_start
    assert example.labels[answer_start:] == example.input_ids[answer_start:]
    assert tokenizer.decode(example.labels[answer_start:]) == record["completion"]
    _, dropped = tokenize_records([record], tokenizer, 6)  # the 6-token prompt fills it
    assert dropped == 1


def test_packing_wastes_little_and_keeps_examples_apart(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = load_config(None, {"system_prompt": "s"})
    from jupyter_hyperpod.training.dataprep import to_record

    records = [to_record(r, config) for r in synthetic_rows(64)]
    examples, _ = tokenize_records(records, tokenizer, 256)
    waste = {}
    for packing in (True, False):
        plan = make_plan(
            examples,
            packing=packing,
            max_length=256,
            micro_batch_size=4,
            world_size=1,
            accumulation=1,
            seed=0,
        )
        batches = [collate(b, examples, 0, packing=packing) for b in plan.epoch_micro_batches(0)]
        real = sum(b["real_tokens"] for b in batches[:-1])  # last batch may wrap around
        padded = sum(b["padded_tokens"] for b in batches[:-1])
        waste[packing] = 1 - real / padded
    assert waste[True] < 0.05 < waste[False]

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    a, b = examples[0], examples[1]
    packed = collate([[0, 1]], examples, 0, packing=True)
    with torch.no_grad():
        together = model(
            input_ids=packed["input_ids"], position_ids=packed["position_ids"], use_cache=False
        ).logits[0]
        alone_a = model(input_ids=torch.tensor([a.input_ids])).logits[0]
        alone_b = model(input_ids=torch.tensor([b.input_ids])).logits[0]
    torch.testing.assert_close(together[: len(a)], alone_a, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(together[len(a) :], alone_b, atol=1e-4, rtol=1e-4)


def test_batch_order_is_a_function_of_seed_and_step() -> None:
    from jupyter_hyperpod.training.batching import Example

    examples = [Example([1] * (5 + i % 7), [1] * (5 + i % 7)) for i in range(37)]
    plan = make_plan(
        examples,
        packing=False,
        max_length=64,
        micro_batch_size=2,
        world_size=2,
        accumulation=2,
        seed=3,
    )
    assert plan.steps_per_epoch == 5  # ceil(19 micro-batches / (2 ranks x 2 accumulated))
    seen = []
    for step in range(plan.steps_per_epoch):
        mine = [plan.step_micro_batches(step, rank) for rank in (0, 1)]
        assert len(mine[0]) == len(mine[1]) == 2
        assert mine == [plan.step_micro_batches(step, rank) for rank in (0, 1)]  # replayable
        seen += [row[0] for rank in mine for batch in rank for row in batch]
    assert set(seen) == set(range(37))
    assert plan.step_micro_batches(3, 0) != plan.step_micro_batches(0, 0)  # next epoch reshuffles
