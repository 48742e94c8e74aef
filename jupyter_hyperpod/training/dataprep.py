"""Data preparation: a source dataset -> prompt/completion records, split into train and test.

The seed's dataset has `Question`, `Complex_CoT` and `Response`; any JSON/JSONL/Parquet file (or a
Hugging Face dataset) works with a `column_mapping`. Records keep the prompt and the completion
apart so that training puts the loss on the completion (the answer) only.
"""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError, TrainingConfig
from .filelock import exclusive

log = logging.getLogger(__name__)

BOS = "<｜begin▁of▁sentence｜>"  # noqa: RUF001
EOS = "<｜end▁of▁sentence｜>"  # noqa: RUF001
USER = "<｜User｜>"  # noqa: RUF001
ASSISTANT = "<｜Assistant｜>"  # noqa: RUF001
DATA_FILE = "data.jsonl"
SOURCE_SUFFIXES = (".jsonl", ".json", ".parquet")


def deepseek_r1_prompt(system: str, question: str) -> str:
    return f"{BOS}{system}{USER}{question}{ASSISTANT}"


def deepseek_r1_completion(reasoning: str | None, response: str) -> str:
    if reasoning:
        return f"<think>\n{reasoning}\n</think>\n{response}{EOS}"
    return f"{response}{EOS}"


def chat_template_pair(
    tokenizer: Any, system: str, question: str, reasoning: str | None, response: str
) -> tuple[str, str]:
    """Split the tokenizer's own chat rendering into prompt (up to the generation prompt) and answer."""
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError("prompt_format is chat-template but the tokenizer has no chat template")
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": question})
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    answer = f"<think>\n{reasoning}\n</think>\n{response}" if reasoning else response
    full = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": answer}], tokenize=False
    )
    if not full.startswith(prompt):
        raise ConfigError(
            "the chat template renders the answer turn differently from the prompt "
            "turn: use prompt_format: deepseek-r1"
        )
    completion = full[len(prompt) :]
    eos = getattr(tokenizer, "eos_token", None)
    if eos and eos not in completion:
        completion += eos
    return prompt, completion


def iter_source_records(source: str, config: TrainingConfig) -> Iterator[dict[str, Any]]:
    """Rows of a local JSON/JSONL/Parquet file or directory, a `datasets` saved directory
    (`save_to_disk`), or a Hugging Face hub dataset (`dataset_config`, `dataset_split`)."""
    path = Path(source)
    if path.is_dir():
        if _is_saved_dataset(path):
            yield from _iter_saved_dataset(path, config.dataset_split)
            return
        files = sorted(p for p in path.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())
        if not files:
            raise ConfigError(
                f"dataset: no .jsonl, .json or .parquet file (nor a saved dataset) in {path}"
            )
        for file in files:
            yield from _iter_file(file)
    elif path.is_file():
        if path.suffix not in SOURCE_SUFFIXES:
            raise ConfigError(
                f"dataset: {path} is not a .jsonl, .json or .parquet file (nor a directory "
                "written by datasets' save_to_disk)"
            )
        yield from _iter_file(path)
    elif path.is_absolute() or source.startswith((".", "~")) or path.suffix in SOURCE_SUFFIXES:
        raise ConfigError(
            f"dataset: no such file or directory: {path} (relative paths are relative to the "
            "config file's directory)"
        )
    else:
        yield from _iter_hub_dataset(source, config)


def _is_saved_dataset(path: Path) -> bool:
    """A directory written by `Dataset.save_to_disk` (state.json + dataset_info.json) or
    `DatasetDict.save_to_disk` (dataset_dict.json)."""
    return (path / "dataset_dict.json").is_file() or (
        (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


def _iter_file(file: Path) -> Iterator[dict[str, Any]]:
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(file)
        except Exception as error:  # pyarrow raises ArrowInvalid for a file that is not Parquet
            raise ConfigError(f"{file}: not a Parquet file ({error})") from None
        for batch in parquet.iter_batches(batch_size=1024):
            yield from batch.to_pylist()
    elif file.suffix == ".jsonl":
        yield from _iter_json_lines(file)
    else:
        text = file.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            if error.msg != "Extra data":
                raise ConfigError(f"{file}: not JSON ({error})") from None
            # JSON Lines in a .json file: what `datasets`' to_json writes (the seed's data prep).
            yield from _iter_json_lines(file)
            return
        if isinstance(data, dict):
            # {"data": [...]} or a column-oriented {"col": [...], ...}
            lists = [value for value in data.values() if isinstance(value, list)]
            if "data" in data and isinstance(data["data"], list):
                data = data["data"]
            elif lists and all(len(v) == len(lists[0]) for v in lists) and len(lists) == len(data):
                keys = list(data)
                data = [
                    dict(zip(keys, row, strict=True)) for row in zip(*data.values(), strict=True)
                ]
        if not isinstance(data, list):
            raise ConfigError(f"{file}: expected a list of records")
        yield from data


def _iter_json_lines(file: Path) -> Iterator[dict[str, Any]]:
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ConfigError(f"{file}:{number}: not JSON ({error.msg})") from None
                if not isinstance(row, dict):
                    raise ConfigError(f"{file}:{number}: expected a JSON object per line")
                yield row


def _iter_saved_dataset(path: Path, split: str) -> Iterator[dict[str, Any]]:
    try:
        from datasets import load_from_disk
    except ImportError:
        raise ConfigError(
            f"{path} holds a saved Hugging Face dataset: pip install datasets "
            "(part of jupyter-hyperpod[training])"
        ) from None
    dataset = load_from_disk(str(path))
    if hasattr(dataset, "keys"):  # a DatasetDict: one split
        splits = list(dataset.keys())
        if split not in splits:
            raise ConfigError(
                f"dataset_split: '{split}' is not a split of {path} (it has {', '.join(splits)})"
            )
        dataset = dataset[split]
    yield from dataset


def _iter_hub_dataset(name: str, config: TrainingConfig) -> Iterator[dict[str, Any]]:
    try:
        from datasets import load_dataset
    except ImportError:
        raise ConfigError(
            f"dataset '{name}' is not a local file; to read it from the Hugging Face "
            "hub, pip install datasets (part of jupyter-hyperpod[training])"
        ) from None
    try:
        dataset = load_dataset(name, config.dataset_config, split=config.dataset_split)
    except Exception as error:  # the hub's errors are many; name the cause and the fix
        text = str(error)
        hint = "Offline, the dataset must be in the datasets cache ($HF_DATASETS_CACHE) or a file."
        # datasets' own words: "Config name is missing" (online), "multiple ... configurations
        # in the cache" / "Couldn't find cache for ... config" (offline).
        if any(
            words in text
            for words in ("Config name is missing", "configurations in the cache", "for config")
        ):
            hint = "Set dataset_config to one of its configs."
        elif "Unknown split" in text or ("split" in text.lower() and "not" in text.lower()):
            hint = "Set dataset_split to one of its splits."
        raise ConfigError(
            f"cannot load dataset '{name}' (config {config.dataset_config!r}, split "
            f"{config.dataset_split!r}): {type(error).__name__}: {text} {hint}"
        ) from None
    yield from dataset


def to_record(row: dict[str, Any], config: TrainingConfig, tokenizer: Any = None) -> dict[str, Any]:
    mapping = config.column_mapping

    def column(name: str) -> str | None:
        source = mapping.get(name)
        if not source:
            return None
        if source not in row:
            raise ConfigError(
                f"column_mapping.{name}: column '{source}' not in the data "
                f"(columns: {', '.join(map(str, row))})"
            )
        value = row[source]
        return None if value is None else str(value).strip()

    question = column("question")
    response = column("response")
    reasoning = column("reasoning") if mapping.get("reasoning") in row else None
    system = column("system") if mapping.get("system") else config.system_prompt
    if not question or response is None:
        raise ValueError("empty question or response")
    if config.prompt_format == "chat-template":
        prompt, completion = chat_template_pair(
            tokenizer, system or "", question, reasoning, response
        )
    else:
        prompt = deepseek_r1_prompt(system or "", question)
        completion = deepseek_r1_completion(reasoning, response)
    return {
        "prompt": prompt,
        "completion": completion,
        "question": question,
        "reasoning": reasoning,
        "response": response,
    }


def split_records(
    records: list[dict[str, Any]], test_size: float, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    n_test = max(1, round(len(records) * test_size)) if len(records) > 1 else 0
    test = [records[i] for i in order[:n_test]]
    train = [records[i] for i in order[n_test:]]
    return train, test


def write_split(directory: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Atomically write `<directory>/data.jsonl` (readers never see half a file). The file is
    written under a hidden name of this process's own first: `is_prepared` skips it, and two
    writers never share one."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    file = target / DATA_FILE
    tmp = target / f".{DATA_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(file)
    return file


def read_split(directory: str | Path) -> list[dict[str, Any]]:
    """Prepared records: our data.jsonl, any JSONL/JSON/Parquet, or a seed-style saved dataset
    (a `text` column with the whole conversation: split at the assistant marker)."""
    path = Path(directory)
    if not path.exists():
        raise ConfigError(f"prepared data not found: {path} (run the dataprep step first)")
    rows: list[dict[str, Any]] = []
    for row in iter_source_records(str(path), TrainingConfig()):
        if "prompt" in row and "completion" in row:
            rows.append(row)
        elif "text" in row:
            text = str(row["text"])
            cut = text.find(ASSISTANT)
            cut = cut + len(ASSISTANT) if cut >= 0 else 0
            rows.append({"prompt": text[:cut], "completion": text[cut:]})
        else:
            raise ConfigError(f"{path}: records need prompt/completion or text fields")
    return rows


def prepare(config: TrainingConfig, tokenizer: Any = None) -> dict[str, Any]:
    """Run data preparation from `config.dataset`; returns counts for logs and MLflow. The
    source is read first (a bad one creates nothing), the splits written under `prepare_lock`."""
    splits = _read_splits(config, tokenizer)
    with exclusive(prepare_lock(config)):
        return splits.write(config)


def prepare_missing(config: TrainingConfig) -> bool:
    """Prepare the data unless it is there, looked at again once the lock is held: jobs that
    start together (a sweep's members) find the first one's data instead of writing it again
    under each other's reads. True when this call prepared it."""
    if is_prepared(config):
        return False
    splits = _read_splits(config)
    with exclusive(prepare_lock(config)):
        if is_prepared(config):
            return False
        splits.write(config)
        return True


def prepare_lock(config: TrainingConfig) -> Path:
    """The lock of the directory that holds the prepared splits."""
    return Path(config.train_dataset_path).parent / ".dataprep.lock"


@dataclass(frozen=True)
class _Splits:
    train: list[dict[str, Any]]
    test: list[dict[str, Any]]
    skipped: int

    def write(self, config: TrainingConfig) -> dict[str, Any]:
        write_split(config.train_dataset_path, self.train)
        write_split(config.test_dataset_path, self.test)
        summary = {
            "records": len(self.train) + len(self.test),
            "train": len(self.train),
            "test": len(self.test),
            "skipped": self.skipped,
        }
        log.info(
            "prepared %(records)d records (%(skipped)d skipped): %(train)d train, %(test)d test",
            summary,
        )
        return summary


def _read_splits(config: TrainingConfig, tokenizer: Any = None) -> _Splits:
    if not config.dataset:
        raise ConfigError("dataset is not set: the source file or Hugging Face dataset to prepare")
    if config.prompt_format == "chat-template" and tokenizer is None:
        from .model import load_tokenizer

        tokenizer = load_tokenizer(config.model_id)
    records: list[dict[str, Any]] = []
    skipped = 0
    for row in iter_source_records(config.dataset, config):
        try:
            records.append(to_record(row, config, tokenizer))
        except ValueError as error:
            if isinstance(error, ConfigError):
                raise
            skipped += 1
        if config.max_samples and len(records) >= config.max_samples:
            break
    if len(records) < 2:
        raise ConfigError(f"dataset: {len(records)} usable record(s), need at least 2")
    train, test = split_records(records, config.test_size, config.data_seed)
    return _Splits(train, test, skipped)


def is_prepared(config: TrainingConfig) -> bool:
    """The training split is there: our data.jsonl, or any visible entry (a user's own files,
    a saved dataset); never a hidden file being written."""
    train = Path(config.train_dataset_path)
    if (train / DATA_FILE).is_file():
        return True
    return train.is_dir() and any(not entry.name.startswith(".") for entry in train.iterdir())
