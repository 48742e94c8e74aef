"""The training step: QLoRA/LoRA fine-tuning with FSDP2, checkpoints, auto-resume and MLflow.

Our own loop rather than the Hugging Face Trainer: it shards for real on CPU/gloo too (accelerate
falls back to DDP there), its batch order is a pure function of (seed, step) so a resumed job
replays exactly what an unbroken one would, and the loss is normalised by the number of answer
tokens in the whole global batch, the same on any number of ranks.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

from .batching import IGNORE_INDEX, collate, make_plan, tokenize_records
from .checkpoint import (
    another_jobs_finished_run,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    set_aside,
)
from .config import ConfigError, TrainingConfig
from .dataprep import is_prepared, prepare_missing, read_split
from .mlflow_tracking import Tracker
from .model import load_tokenizer, prepare_model, unwrap
from .progress import Progress
from .runtime import Runtime, init_runtime, seed_everything

log = logging.getLogger("jupyter_hyperpod.training")

KILL_AFTER_STEP_ENV = "HYPERPOD_TRAIN_KILL_AFTER_STEP"
"""Test hook: SIGKILL this process right after the checkpoint of that step is complete."""
RESULTS_FILE = "train_results.json"


def lr_lambda(config: TrainingConfig, total_steps: int):  # type: ignore[no-untyped-def]
    warmup = config.warmup_steps or math.ceil(config.warmup_ratio * total_steps)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if config.lr_scheduler_type == "constant":
            return 1.0
        progress = (step - warmup) / max(1, total_steps - warmup)
        if config.lr_scheduler_type == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return max(0.0, 1.0 - progress)

    return factor


def nothing_to_train(total_steps: int, checkpoint_job: str, job_id: str) -> str:
    """Why a job trains no step: its last checkpoint is already at the end. Another job's (a
    rerun or resubmit into the same output_dir, resumed by `resume: auto`) says how to train."""
    message = f"all {total_steps} steps were already done (last checkpoint): nothing to train"
    if checkpoint_job and job_id and checkpoint_job != job_id:
        message += (
            f"; that checkpoint is job {checkpoint_job}'s, in the same output_dir: to train "
            "again, give each job its own (output_dir: out/${HYPERPOD_JOB_ID}) or set "
            "resume: never"
        )
    return message


def on_main(runtime: Runtime, work: Any) -> Any:
    """Run `work()` on rank 0 only (its result stays there); every rank raises its error.

    A ConfigError (or a missing file) stays one, so every rank exits with the clean message
    (status 2 or 1) instead of a traceback.
    """
    outcome: tuple[str, Any] = ("ok", None)
    result = None
    if runtime.is_main:
        try:
            result = work()
        except ConfigError as exc:
            outcome = ("config", str(exc))
        except FileNotFoundError as exc:
            outcome = ("missing", str(exc))
        except Exception as exc:
            outcome = ("error", f"{type(exc).__name__}: {exc}")
            if not runtime.distributed:
                raise
    kind, value = runtime.broadcast_object(outcome)
    if kind == "config":
        raise ConfigError(value)
    if kind == "missing":
        raise FileNotFoundError(value)
    if kind == "error":
        raise RuntimeError(f"failed on rank 0: {value}")
    return result


def ensure_inputs(config: TrainingConfig, runtime: Runtime) -> None:
    """Rank 0 downloads the model and prepares the data when the config says where from."""

    def work() -> None:
        if config.model_source and not Path(config.model_id).exists():
            from .download import download_model

            download_model(config.model_source, config.model_id, revision=config.model_revision)
        model = Path(config.model_id)
        if not config.model_source and model.is_absolute() and not model.exists():
            # (A hub id stays relative in the config; a path was made absolute.)
            raise ConfigError(f"model_id: {model} does not exist")
        if not config.dataset and not is_prepared(config):
            raise ConfigError(
                f"no training data at {config.train_dataset_path} and no "
                "`dataset` to prepare it from"
            )
        prepare_missing(config)  # a sweep's members wait for the first one's data
        read_split(config.train_dataset_path)  # a bad prepared file fails here, not later

    on_main(runtime, work)


def sequence_limit(config: TrainingConfig) -> int:
    """Longest example (tokens): max_seq_length, else the model's context (like the seed,
    which tokenizes without truncation); packing fills rows of 2048 when it is unset."""
    if config.max_seq_length:
        return config.max_seq_length
    if config.packing:
        return 2048
    from transformers import AutoConfig

    model_config = AutoConfig.from_pretrained(config.model_id)
    text_config = getattr(model_config, "text_config", None) or model_config
    return int(getattr(text_config, "max_position_embeddings", 0) or 2**31 - 1)


def _all_reduce(values: list[float], runtime: Runtime) -> list[float]:
    if not runtime.distributed:
        return [float(v) for v in values]
    import torch

    tensor = torch.tensor(values, dtype=torch.float64)
    if runtime.distributed:
        import torch.distributed as dist

        backend_device = runtime.device if runtime.device.type == "cuda" else "cpu"
        tensor = tensor.to(backend_device)
        dist.all_reduce(tensor)
    return tensor.cpu().tolist()


def shift_labels(labels: Any) -> Any:
    """Targets aligned with the logits (position t predicts token t+1), without copying logits."""
    import torch

    pad = torch.full((labels.size(0), 1), IGNORE_INDEX, dtype=labels.dtype)
    return torch.cat([labels[:, 1:], pad], dim=1)


def _grad_sync(model: Any, enabled: bool) -> None:
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(enabled)
    elif hasattr(model, "require_backward_grad_sync"):  # DDP
        model.require_backward_grad_sync = enabled


def save_adapter(model: Any, tokenizer: Any, target: Path, runtime: Runtime) -> None:
    """Gather the LoRA weights (DTensor shards under FSDP) and write a PEFT adapter on rank 0."""
    from torch.distributed.tensor import DTensor

    state: dict[str, Any] = {}
    for name, parameter in unwrap(model).named_parameters():
        if not parameter.requires_grad:
            continue
        full = parameter.full_tensor() if isinstance(parameter, DTensor) else parameter.detach()
        if runtime.is_main:
            state[name] = full.detach().cpu().clone()
    if runtime.is_main:
        target.mkdir(parents=True, exist_ok=True)
        unwrap(model).save_pretrained(str(target), state_dict=state, safe_serialization=True)
        tokenizer.save_pretrained(str(target))
    runtime.barrier()


def train(config: TrainingConfig) -> dict[str, Any]:
    runtime = init_runtime()
    try:
        return _train(config, runtime)
    finally:
        runtime.close()


def _train(config: TrainingConfig, runtime: Runtime) -> dict[str, Any]:

    ensure_inputs(config, runtime)
    seed_everything(config.seed)
    tokenizer = load_tokenizer(config.model_id)
    records = read_split(config.train_dataset_path)
    limit = sequence_limit(config)
    examples, dropped = tokenize_records(records, tokenizer, limit)
    if not examples:
        raise ConfigError(f"no training example fits in max_seq_length={limit}")
    if dropped:
        log.warning("%d example(s) longer than max_seq_length=%d were dropped", dropped, limit)
    plan = make_plan(
        examples,
        packing=config.packing,
        max_length=limit,
        micro_batch_size=config.per_device_train_batch_size,
        world_size=runtime.world_size,
        accumulation=config.gradient_accumulation_steps,
        seed=config.seed,
    )
    total_steps = (
        config.max_steps
        if config.max_steps > 0
        else max(1, math.ceil(config.num_train_epochs * plan.steps_per_epoch))
    )

    resume_from: Path | None = None
    if config.resume == "auto":
        resume_from = latest_checkpoint(config.checkpoints_path)
        other = (
            another_jobs_finished_run(
                resume_from, total_steps, os.environ.get("HYPERPOD_JOB_ID", "")
            )
            if resume_from
            else None
        )
        if other:
            # A rerun into the same output_dir trains again (every rank decided the same
            # before the main one moves the finished run aside).
            runtime.barrier()
            if runtime.is_main:
                kept = set_aside(config.checkpoints_path, other)
                log.info("job %s's finished run is kept in %s: training again", other, kept)
            runtime.barrier()
            resume_from = None
    elif config.resume != "never":
        resume_from = Path(config.resume)
        if not resume_from.is_dir():
            raise ConfigError(f"resume: no checkpoint directory at {resume_from}")
    # MLflow before the model: a wrong tracking URI fails in seconds, not after the load.
    tracker = on_main(
        runtime,
        lambda: Tracker.for_training(config, active=True, resuming=resume_from is not None),
    )
    if not runtime.is_main:
        tracker = Tracker(False)
    try:
        return _train_model(
            config, runtime, tokenizer, examples, plan, total_steps, tracker, resume_from
        )
    except BaseException:
        tracker.end("FAILED")
        raise


def _train_model(
    config: TrainingConfig,
    runtime: Runtime,
    tokenizer: Any,
    examples: list[Any],
    plan: Any,
    total_steps: int,
    tracker: Tracker,
    resume_from: Path | None,
) -> dict[str, Any]:
    import torch

    model, facts = prepare_model(config, runtime)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=config.learning_rate, weight_decay=config.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(config, total_steps))

    start_step = 0
    torch.manual_seed(config.seed + 7919 * runtime.rank)  # dropout streams, one per rank
    tokens_seen = 0
    resumed_loss = float("nan")
    resumed_job = ""
    if resume_from is not None:
        state = load_checkpoint(resume_from, model, optimizer, runtime)
        scheduler.load_state_dict(state["scheduler"])
        start_step = int(state["step"])
        tokens_seen = int(state.get("tokens_seen", 0))
        resumed_loss = float(state.get("loss", float("nan")))
        resumed_job = str(state.get("job_id") or "")
        log.info("resumed from %s at step %d/%d", resume_from, start_step, total_steps)

    job_id = os.environ.get("HYPERPOD_JOB_ID", "")
    tracker.log_params(
        {
            **config.to_params(),
            **{f"run.{k}": v for k, v in facts.items()},
            "run.world_size": runtime.world_size,
            "run.total_steps": total_steps,
            "run.train_examples": len(examples),
            "run.rows": len(plan.rows),
        }
    )
    if start_step:
        tracker.set_tags({"hyperpod.resumed_from_step": str(start_step)})
    log.info(
        "training %s: %s, %d examples in %d rows, %d steps (%d per epoch), world size %d%s",
        config.model_id,
        ", ".join(f"{k}={v}" for k, v in facts.items()),
        len(examples),
        len(plan.rows),
        total_steps,
        plan.steps_per_epoch,
        runtime.world_size,
        f", job {job_id}" if job_id else "",
    )

    progress = Progress(
        total_steps, start_step, enabled=runtime.is_main, every=config.logging_steps
    )
    kill_after = int(os.environ.get(KILL_AFTER_STEP_ENV, "0") or 0)
    last_loss = resumed_loss
    padded_total = real_total = 0.0
    step_rates: list[float] = []
    step_ends: list[float] = []
    step_padded: list[int] = []
    status = "FAILED"
    try:
        model.train()
        for step in range(start_step, total_steps):
            started = time.perf_counter()
            micro = [
                collate(rows, examples, tokenizer.pad_token_id, packing=config.packing)
                for rows in plan.step_micro_batches(step, runtime.rank)
            ]
            local_targets = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in micro)
            (global_targets,) = _all_reduce([float(local_targets)], runtime)
            loss_sum = torch.zeros((), dtype=torch.float32, device=runtime.device)
            for index, batch in enumerate(micro):
                _grad_sync(model, index == len(micro) - 1)
                inputs = {
                    k: v.to(runtime.device)
                    for k, v in batch.items()
                    if k in ("input_ids", "position_ids", "attention_mask")
                }
                targets = shift_labels(batch["labels"]).to(runtime.device)
                logits = model(**inputs, use_cache=False).logits
                token_losses = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.size(-1)).float(),
                    targets.reshape(-1),
                    ignore_index=IGNORE_INDEX,
                    reduction="sum",
                )
                # Gradients are averaged over ranks: scale so the result is sum / global targets.
                (token_losses * runtime.world_size / max(global_targets, 1.0)).backward()
                loss_sum += token_losses.detach().float()  # no device sync per micro-batch
            grad_norm = torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            if hasattr(grad_norm, "full_tensor"):
                grad_norm = grad_norm.full_tensor()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            real = sum(b["real_tokens"] for b in micro)
            padded = sum(b["padded_tokens"] for b in micro)
            total_loss, real_all, padded_all = _all_reduce([float(loss_sum), real, padded], runtime)
            elapsed = time.perf_counter() - started
            last_loss = total_loss / max(global_targets, 1.0)
            tokens_seen += int(real_all)
            step_rates.append(real_all / elapsed)
            step_ends.append(time.perf_counter())
            step_padded.append(int(padded_all))
            real_total += real_all
            padded_total += padded_all
            done = step + 1
            lr = scheduler.get_last_lr()[0]
            progress.update(done, loss=last_loss, lr=lr, tokens_per_second=real_all / elapsed)
            if done % config.logging_steps == 0 or done == total_steps:
                tracker.log_metrics(
                    {
                        "loss": last_loss,
                        "learning_rate": lr,
                        "grad_norm": float(grad_norm),
                        "tokens_per_second": real_all / elapsed,
                        "step_seconds": elapsed,
                        "epoch": done / plan.steps_per_epoch,
                        "padding_fraction": 1.0 - real_all / max(padded_all, 1.0),
                    },
                    step=done,
                )
            if not math.isfinite(last_loss):
                raise FloatingPointError(f"loss is {last_loss} at step {done}")
            if (config.save_steps and done % config.save_steps == 0) or done == total_steps:
                trainer_state = {
                    "step": done,
                    "total_steps": total_steps,
                    "loss": last_loss,
                    "tokens_seen": tokens_seen,
                    "scheduler": scheduler.state_dict(),
                    "epoch": done / plan.steps_per_epoch,
                    "job_id": job_id,
                }
                tracker.flush()  # the metrics up to this step are stored before the checkpoint
                path = save_checkpoint(
                    config.checkpoints_path,
                    done,
                    model,
                    optimizer,
                    trainer_state,
                    runtime,
                    config.save_total_limit,
                )
                log.info("checkpoint saved: %s", path)
                if kill_after and done >= kill_after and done < total_steps:
                    log.warning("%s=%d: killing this process", KILL_AFTER_STEP_ENV, kill_after)
                    os.kill(os.getpid(), signal.SIGKILL)
        progress.close()
        if start_step >= total_steps:
            log.info("%s", nothing_to_train(total_steps, resumed_job, job_id))
        save_adapter(model, tokenizer, config.adapter_path, runtime)
        results = {
            "final_loss": last_loss,
            "steps": total_steps,
            "resumed_from_step": start_step,
            "tokens_seen": tokens_seen,
            "world_size": runtime.world_size,
            "train_examples": len(examples),
            "rows": len(plan.rows),
            "steps_per_epoch": plan.steps_per_epoch,
            "packing": config.packing,
            "padding_fraction": 1.0 - real_total / padded_total if padded_total else None,
            "adapter_dir": str(config.adapter_path),
            **facts,
        }
        if len(step_rates) > 3:  # the first steps include warm-up (allocations, kernels)
            steady = sorted(step_rates[2:])
            results["tokens_per_second_median"] = steady[len(steady) // 2]
            walls = sorted(b - a for a, b in itertools.pairwise(step_ends[1:]))
            results["step_seconds_median"] = walls[len(walls) // 2]
        if step_ends:
            # Each step's end time and padded tokens (all ranks), for benchmarks that pair a
            # step's tokens with its own wall time (the first 2000 steps).
            first = step_ends[0]
            results["step_log"] = {
                "ends": [round(t - first, 6) for t in step_ends[:2000]],
                "padded_tokens": step_padded[:2000],
                "threads": torch.get_num_threads(),
            }
        if runtime.device.type == "cuda":
            results["peak_memory_gib"] = torch.cuda.max_memory_allocated(runtime.device) / 2**30
        del model, optimizer
        if config.merge_weights:
            if runtime.is_main:
                from .merge import merge_adapter

                merged = merge_adapter(config)
                results["merged_dir"] = str(merged)
                tracker.set_tags({"hyperpod.merged_dir": str(merged)})
            runtime.barrier()
        if runtime.is_main:
            out = Path(config.output_dir) / RESULTS_FILE
            out.write_text(json.dumps(results, indent=1))
            tracker.log_metrics({"final_loss": last_loss}, step=total_steps)
            log.info(
                "training done: final loss %.4f, adapter in %s", last_loss, config.adapter_path
            )
        status = "FINISHED"
        return results
    finally:
        progress.close()
        tracker.end(status)
