"""The inputs the seed's users have, and a clear message for each wrong one (before any model)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_hyperpod.training.config import ConfigError, load_config
from jupyter_hyperpod.training.dataprep import prepare, read_split
from jupyter_hyperpod.training.scaffold import CONFIG_NAME, scaffold_project
from jupyter_hyperpod.training.synthetic import synthetic_rows

from .conftest import run_module

pytest.importorskip("datasets")

SEED_DATASET = "FreedomIntelligence/medical-o1-reasoning-SFT"


def prepared(tmp_path: Path, source: str | Path, **values: Any) -> list[dict]:
    config = load_config(
        None,
        {
            "dataset": str(source),
            "train_dataset_path": str(tmp_path / "out/train"),
            "test_dataset_path": str(tmp_path / "out/test"),
            **values,
        },
    )
    prepare(config)
    return read_split(config.train_dataset_path) + read_split(config.test_dataset_path)


def test_json_lines_in_json_arrays_parquet_and_saved_datasets(tmp_path: Path) -> None:
    from datasets import Dataset, DatasetDict

    rows = synthetic_rows(20)
    sources = {
        # datasets' to_json (the seed's data prep) writes JSON Lines, even into a .json file.
        "to_json": tmp_path / "jsonl/dataset.json",
        "array": tmp_path / "array.json",
        "parquet": tmp_path / "rows.parquet",
        "saved": tmp_path / "saved",
        "saved_dict": tmp_path / "saved_dict",
    }
    Dataset.from_list(rows).to_json(str(sources["to_json"]))
    assert sources["to_json"].read_text().count("\n") == 20  # really one object per line
    sources["array"].write_text(json.dumps(rows))
    Dataset.from_list(rows).to_parquet(str(sources["parquet"]))
    Dataset.from_list(rows).save_to_disk(str(sources["saved"]))
    DatasetDict(
        {"train": Dataset.from_list(rows), "validation": Dataset.from_list(rows[:4])}
    ).save_to_disk(str(sources["saved_dict"]))
    questions = sorted(r["Question"] for r in rows)
    for name, source in sources.items():
        got = prepared(tmp_path / name, source)
        assert sorted(r["question"] for r in got) == questions, name
    # A DatasetDict gives the split asked for.
    got = prepared(tmp_path / "v", sources["saved_dict"], dataset_split="validation")
    assert len(got) == 4
    with pytest.raises(ConfigError, match=r"'test' is not a split of .* \(it has train, valid"):
        prepared(tmp_path / "t", sources["saved_dict"], dataset_split="test")


def test_each_wrong_input_gets_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "broken.json").write_text('{"Question": "q", ')
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "bad.parquet").write_text("not parquet")
    (tmp_path / "nodata").mkdir()
    config_file = tmp_path / "c.yaml"
    cases = {
        # A mistyped relative path is a missing file, not a hub id.
        "data/x.jsonl": r"no such file or directory: .*/data/x\.jsonl \(relative paths are relative",
        "empty.jsonl": "0 usable record",
        "broken.json": r"broken\.json: not JSON",
        "notes.txt": r"notes\.txt is not a \.jsonl, \.json or \.parquet file",
        "bad.parquet": r"bad\.parquet: not a Parquet file",
        "nodata": r"no \.jsonl, \.json or \.parquet file \(nor a saved dataset\) in",
    }
    for dataset, message in cases.items():
        config_file.write_text(yaml.safe_dump({"dataset": dataset}))
        with pytest.raises(ConfigError, match=message):
            prepare(load_config(config_file))
    (tmp_path / "rows.jsonl").write_text(json.dumps({"q": 1, "a": 2}) + "\n")
    config_file.write_text(yaml.safe_dump({"dataset": "rows.jsonl"}))
    with pytest.raises(ConfigError, match=r"column 'Question' not in the data \(columns: q, a\)"):
        prepare(load_config(config_file))


def cache_hub_dataset(cache: Path, repo_id: str, configs: dict[str, list[dict]]) -> None:
    """Write what `load_dataset(repo_id, config)` leaves in $HF_DATASETS_CACHE after a download:
    `<namespace>___<name>/<config>/<version>/<hash>/` with the Arrow files and dataset_info.json
    (the layout datasets' offline fallback reads: `packaged_modules/cache/cache.py`,
    `_find_hash_in_cache`). datasets' own Json builder writes the files; a hub load names the
    directories after the repo and the config, so they are moved there."""
    from datasets.packaged_modules.json.json import Json

    namespace, name = repo_id.split("/")
    snake = name.lower()  # camelcase_to_snakecase of a hyphenated name
    source = cache / "_sources"
    source.mkdir(parents=True, exist_ok=True)
    for config, rows in configs.items():
        file = source / f"{config}.json"
        file.write_text(json.dumps(rows))
        builder = Json(
            cache_dir=str(cache / "_build"),
            dataset_name=snake,
            config_name=config,
            data_files={"train": str(file)},
            hash="0" * 16,
        )
        builder.download_and_prepare()
        built = Path(builder.cache_dir)  # _build/<name>/<config>-<id>/0.0.0/<hash>
        target = cache / f"{namespace}___{snake}" / config / built.parent.name / built.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), str(target))
    shutil.rmtree(cache / "_build")


def test_a_hub_dataset_with_a_config_name_and_split_offline(tmp_path: Path) -> None:
    cache = tmp_path / "hf-datasets"
    rows = synthetic_rows(12)
    cache_hub_dataset(cache, SEED_DATASET, {"en": rows, "zh": rows[:3]})
    project = tmp_path / "project"
    scaffold_project(
        project, model_id="deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", dataset=SEED_DATASET
    )
    config = yaml.safe_load((project / CONFIG_NAME).read_text())
    assert config["dataset"] == SEED_DATASET
    assert config["dataset_config"] == "en"  # scaffold writes the config the dataset needs
    assert config["dataset_split"] == "train"
    env = {"HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    run = run_module(["dataprep", "--config", CONFIG_NAME], project, **env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1])["records"] == 12
    assert len(read_split(project / "data/train")) + len(read_split(project / "data/test")) == 12

    # The config name left out: the message says which key to set.
    no_config = run_module(
        [
            "dataprep",
            "--config",
            CONFIG_NAME,
            "--set",
            "dataset_config=",
            "--set",
            "dataset_split=train",
        ],
        project,
        **env,
    )
    assert no_config.returncode == 2
    assert "Set dataset_config to one of its configs" in no_config.stdout
    assert "Traceback" not in no_config.stdout + no_config.stderr


def test_a_config_read_from_the_snapshot_points_at_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job reads its config from its snapshot (#24); the paths in it still name the
    workdir's data and outputs, as they did when it was submitted."""
    tree = tmp_path / ".hyperpod" / "snapshots" / "ft-1" / "tree"
    workdir = tmp_path / "examples"
    (tree / "proj").mkdir(parents=True)
    (tree / "proj" / "args.yaml").write_text("output_dir: out\ndataset: data/train.jsonl\n")
    monkeypatch.setenv("HYPERPOD_SNAPSHOT", str(tree))
    monkeypatch.setenv("HYPERPOD_WORKDIR", str(workdir))
    config = load_config(tree / "proj" / "args.yaml", {"train_dataset_path": "split"})
    assert config.output_dir == str(workdir / "proj" / "out")
    assert config.train_dataset_path == str(workdir / "proj" / "split")

    monkeypatch.delenv("HYPERPOD_SNAPSHOT")  # not a job's snapshot: relative to the file
    assert load_config(tree / "proj" / "args.yaml").output_dir == str(tree / "proj" / "out")
