"""A running job's progress (step/total, elapsed, ETA, last loss) from what it prints.

One parser for every client (the job list and the job view show what it returns). It reads the
last lines of a log and understands:

- our training loop (`jupyter_hyperpod.training.progress`):
  `step 12/100 | loss 1.2345 | lr 2.00e-04 | 1,234 tok/s | eta 0:01:23`;
- tqdm bars, as tqdm's `format_meter` writes them (`{l_bar}{bar}| {n_fmt}/{total_fmt}
  [{elapsed}<{remaining}, {rate_fmt}{postfix}]`), which is also how Hugging Face's Trainer shows
  its steps (`  5%|▌         | 5/100 [00:02<00:40,  2.34it/s]`);
- the Trainer's log dicts (`{'loss': 1.234, 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}`,
  written by `Trainer.log` through `ProgressCallback.on_log`, numbers sometimes as strings);
- plain `step 3/16 ... loss=0.5` lines.

Lines redrawn with carriage returns count by their last state.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable

from .core.models import JobProgress

TAIL_LINES = 40

_OURS = re.compile(
    r"\bstep (?P<step>\d+)/(?P<total>\d+) \| loss (?P<loss>[-+0-9.eE]+|nan|inf)"
    r"(?:.*?\| eta (?P<eta>\d+:\d{2}:\d{2}))?"
)
# tqdm.format_meter: "| 12/100 [00:05<00:37, 2.35it/s, loss=1.23]" ("?" while unknown).
_TQDM = re.compile(
    r"\|\s*(?P<step>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]+)"
    r"(?P<rest>[^\]]*)\]"
)
_TQDM_LOSS = re.compile(r"\bloss=(?P<loss>[-+0-9.eE]+)")
_TRAINER_LOSS = re.compile(r"""\{['"]loss['"]:\s*['"]?(?P<loss>[-+0-9.eE]+)['"]?""")
_PLAIN = re.compile(r"\bstep\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)")
_PLAIN_LOSS = re.compile(r"\bloss\s*[=:]\s*(?:\x1b\[[0-9;]*m)?(?P<loss>[-+0-9.eE]+)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clock_seconds(text: str) -> float | None:
    """`1:02:03`, `02:03` (tqdm's format_interval) or `0:01:23` as seconds; None for `?`."""
    try:
        parts = [int(part) for part in text.split(":")]
    except ValueError:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return float(seconds)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def visible_lines(text: str) -> list[str]:
    """The lines as a terminal shows them: the last redraw of each, colours removed."""
    lines = []
    for line in text.split("\n"):
        shown = [part for part in line.split("\r") if part.strip()]
        if shown:
            lines.append(_ANSI.sub("", shown[-1]))
    return lines


def parse_progress(
    lines: Iterable[str], *, started: float | None = None, now: float | None = None
) -> JobProgress | None:
    """The latest progress the lines tell (newest last), or None when they tell none."""
    step: int | None = None
    total: int | None = None
    loss: float | None = None
    eta: float | None = None
    elapsed: float | None = None
    source = ""
    for line in reversed(list(lines)):
        if loss is None:
            for pattern in (_TRAINER_LOSS, _TQDM_LOSS, _PLAIN_LOSS):
                found = pattern.search(line)
                if found:
                    loss = _number(found["loss"])
                    break
        if step is None:
            if match := _OURS.search(line):
                step, total = int(match["step"]), int(match["total"])
                eta = clock_seconds(match["eta"]) if match["eta"] else None
                loss = _number(match["loss"]) if loss is None else loss
                source = "training"
            elif match := _TQDM.search(line):
                step, total = int(match["step"]), int(match["total"])
                elapsed = clock_seconds(match["elapsed"])
                eta = clock_seconds(match["remaining"])
                source = "tqdm"
            elif match := _PLAIN.search(line):
                step, total = int(match["step"]), int(match["total"])
                source = "log"
        if step is not None and loss is not None:
            break
    if step is None or total is None or total <= 0:
        return None
    now = time.time() if now is None else now
    if started is not None:
        elapsed = max(0.0, now - started)
    if eta is None and elapsed and step > 0 and step < total:
        eta = elapsed / step * (total - step)
    if step >= total:
        eta = 0.0
    return JobProgress(
        step=step,
        total=total,
        fraction=min(1.0, step / total),
        elapsed_seconds=elapsed,
        eta_seconds=eta,
        loss=loss,
        source=source,
    )


def progress_of_log(
    text: str, *, started: float | None = None, now: float | None = None
) -> JobProgress | None:
    return parse_progress(visible_lines(text)[-TAIL_LINES:], started=started, now=now)


TOTAL_PARAMS = ("run.total_steps", "max_steps")
"""MLflow params that give the number of steps: ours (`training/train.py`), then the Trainer's
(`MLflowCallback` logs the TrainingArguments; -1 means "by epochs": unknown)."""
LOSS_METRICS = ("loss", "train_loss", "train/loss")


def progress_from_mlflow(
    tracking_uri: str | None, job_id: str, *, started: float | None = None
) -> JobProgress | None:
    """The job's MLflow run: the last step logged and the run's total steps, or None."""
    if not tracking_uri:
        return None
    from .metrics import _find_run, sqlite_store_ready

    if tracking_uri.startswith("sqlite:///") and not sqlite_store_ready(tracking_uri):
        return None  # never open (and so migrate) a store the job is still creating
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        return None
    client = MlflowClient(tracking_uri=tracking_uri)
    run = _find_run(client, job_id)
    if run is None:
        return None
    total = 0
    for param in TOTAL_PARAMS:
        raw = run.data.params.get(param)
        if raw is not None and raw.lstrip("-").isdigit() and int(raw) > 0:
            total = int(raw)
            break
    metric = next((m for m in LOSS_METRICS if m in run.data.metrics), None)
    if not total or metric is None:
        return None
    history = client.get_metric_history(run.info.run_id, metric)
    if not history:
        return None
    last = max(history, key=lambda m: (m.step, m.timestamp))
    step = max(0, min(int(last.step), total))
    if not step:
        return None
    found = parse_progress([f"step {step}/{total} | loss {last.value}"], started=started)
    return found.model_copy(update={"source": "mlflow"}) if found else None
