"""Tokenization, packing and the deterministic batch order (the same on resume, on every rank).

Packing puts several examples in one row with `position_ids` restarting at 0 for each; with no
attention mask, transformers builds a block-diagonal causal mask from them, so examples never see
each other and rows are nearly full (little padding to compute).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

IGNORE_INDEX = -100


@dataclass
class Example:
    input_ids: list[int]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


def tokenize_records(
    records: list[dict[str, Any]], tokenizer: Any, max_length: int
) -> tuple[list[Example], int]:
    """Prompt tokens get IGNORE_INDEX labels (loss on the answer only). Returns (examples, dropped)."""
    prompts = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    answers = tokenizer([r["completion"] for r in records], add_special_tokens=False)["input_ids"]
    examples: list[Example] = []
    dropped = 0
    for prompt, answer in zip(prompts, answers, strict=True):
        if len(prompt) >= max_length - 1 or not answer:
            dropped += 1
            continue
        answer = answer[: max_length - len(prompt)]
        examples.append(Example(prompt + answer, [IGNORE_INDEX] * len(prompt) + answer))
    return examples, dropped


def pack(examples: list[Example], capacity: int) -> list[list[int]]:
    """First-fit decreasing bins of example indices, each bin's total length <= capacity."""
    order = sorted(range(len(examples)), key=lambda i: (-len(examples[i]), i))
    bins: list[list[int]] = []
    room: list[int] = []
    for index in order:
        size = len(examples[index])
        for b, free in enumerate(room):
            if size <= free:
                bins[b].append(index)
                room[b] -= size
                break
        else:
            bins.append([index])
            room.append(capacity - size)
    return bins


@dataclass
class BatchPlan:
    """Rows (lists of example indices) grouped in micro-batches, in a seeded order per epoch."""

    rows: list[list[int]]
    micro_batch_size: int
    world_size: int
    accumulation: int
    seed: int
    lengths: list[int] | None = None
    """Token count of each row when packed (then micro-batches group rows of similar length)."""

    @property
    def micro_batches_per_epoch(self) -> int:
        return math.ceil(len(self.rows) / self.micro_batch_size)

    @property
    def steps_per_epoch(self) -> int:
        return max(
            1, math.ceil(self.micro_batches_per_epoch / (self.world_size * self.accumulation))
        )

    def epoch_micro_batches(self, epoch: int) -> list[list[list[int]]]:
        rng = random.Random(self.seed * 1000003 + epoch)
        if self.lengths is not None:
            # Packed rows of similar fill share a micro-batch (little padding); the order of the
            # micro-batches is shuffled each epoch instead of the rows.
            order = sorted(range(len(self.rows)), key=lambda i: (-self.lengths[i], i))  # type: ignore[index]
            batches = [
                [self.rows[i] for i in order[start : start + self.micro_batch_size]]
                for start in range(0, len(order), self.micro_batch_size)
            ]
            rng.shuffle(batches)
        else:
            order = list(range(len(self.rows)))
            rng.shuffle(order)
            batches = [
                [self.rows[i] for i in order[start : start + self.micro_batch_size]]
                for start in range(0, len(order), self.micro_batch_size)
            ]
        needed = self.steps_per_epoch * self.world_size * self.accumulation
        # Wrap around (like DistributedSampler) so every rank runs the same number of micro-batches.
        return [batches[i % len(batches)] for i in range(needed)]

    def step_micro_batches(self, step: int, rank: int) -> list[list[list[int]]]:
        """This rank's micro-batches for global optimizer step `step` (0-based)."""
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        batches = self.epoch_micro_batches(epoch)
        per_step = self.world_size * self.accumulation
        window = batches[in_epoch * per_step : (in_epoch + 1) * per_step]
        return window[rank :: self.world_size]


def make_plan(
    examples: list[Example],
    *,
    packing: bool,
    max_length: int,
    micro_batch_size: int,
    world_size: int,
    accumulation: int,
    seed: int,
) -> BatchPlan:
    if packing:
        rows = pack(examples, max_length)
        lengths: list[int] | None = [sum(len(examples[i]) for i in row) for row in rows]
    else:
        rows = [[i] for i in range(len(examples))]
        lengths = None
    return BatchPlan(rows, micro_batch_size, world_size, accumulation, seed, lengths)


def collate(
    rows: list[list[int]], examples: list[Example], pad_id: int, *, packing: bool
) -> dict[str, Any]:
    """Tensors for one micro-batch, right-padded to its longest row.

    packing: input_ids, labels and position_ids (no attention mask); otherwise input_ids, labels
    and attention_mask. `real_tokens`/`padded_tokens` measure padding waste.
    """
    import torch

    ids_rows, label_rows, pos_rows = [], [], []
    for row in rows:
        ids: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        for index in row:
            example = examples[index]
            ids += example.input_ids
            labels += example.labels
            positions += list(range(len(example)))
        ids_rows.append(ids)
        label_rows.append(labels)
        pos_rows.append(positions)
    width = max(len(r) for r in ids_rows)
    real = sum(len(r) for r in ids_rows)
    batch: dict[str, Any] = {}
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels_t = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, labels) in enumerate(zip(ids_rows, label_rows, strict=True)):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels_t[i, : len(labels)] = torch.tensor(labels)
    batch["input_ids"] = input_ids
    batch["labels"] = labels_t
    if packing:
        # Padding gets its own position run so it forms a separate (ignored) sequence.
        position_ids = torch.zeros((len(rows), width), dtype=torch.long)
        for i, positions in enumerate(pos_rows):
            position_ids[i, : len(positions)] = torch.tensor(positions)
            position_ids[i, len(positions) :] = torch.arange(width - len(positions))
        batch["position_ids"] = position_ids
    else:
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ids in enumerate(ids_rows):
            mask[i, : len(ids)] = 1
        batch["attention_mask"] = mask
    batch["real_tokens"] = real
    batch["padded_tokens"] = width * len(rows)
    return batch
