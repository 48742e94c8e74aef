"""Sweeps from the CLI and `%hyperpod` (#24 item 3): `submit ... --sweep PARAM=A,B [--sweep ...]
[--max-concurrent N] [--metric NAME --goal min|max] [--wait]` submits one group of jobs (the grid
of the values), `sweeps` lists the group rows, `sweep ID` shows one with its members and
`sweep ID --cancel` cancels every unfinished member. The body is `submit`'s template submission
(cli/submission.py) with the swept values added: the same `POST sweeps` the panel sends."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..core.api import HyperPodAPI
from ..core.errors import InvalidRequest
from ..core.models import JobState
from ..core.sweeps import Sweep, SweepList, SweepSummary
from ..render import Table
from .exits import EXIT_USAGE, CommandError
from .output import Console, Outcome, TableResult

POLL_SECONDS = 1.0


def add_sweep_options(submit: Any) -> None:
    """`submit`'s sweep options (cli/parser.py calls this with the submit parser)."""
    group = submit.add_argument_group("sweep (one job per combination of values)")
    group.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="PARAM=A,B",
        help="a template parameter's values (repeat: the grid of every combination)",
    )
    group.add_argument(
        "--max-concurrent", type=int, metavar="N", help="members started at once at most"
    )
    group.add_argument("--metric", help="the MLflow metric that ranks members (default loss)")
    group.add_argument("--goal", choices=["min", "max"], help="min (default): lowest is best")


def add_sweep(verb: Any) -> None:
    """The `sweeps` and `sweep` verbs (cli/parser.py calls this with its `verb` maker)."""
    verb("sweeps", "your sweeps: each group's counts per state, progress and best member")
    sweep = verb(
        "sweep",
        "one sweep's members, or cancel them all",
        epilog="a sweep is submitted with `submit ... --sweep learning_rate=1e-4,2e-4 "
        "--sweep lora_r=8,16 --max-concurrent 2`",
    )
    sweep.add_argument("sweep_id", metavar="SWEEP")
    sweep.add_argument("--cancel", action="store_true", help="cancel every unfinished member")


def parse_values(text: str) -> Any:
    """A value as typed: 8 -> 8, 2e-4 -> 0.0002, anything else the text (the template coerces)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def sweep_values(items: list[str]) -> dict[str, list[Any]]:
    swept: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise CommandError(f"--sweep takes PARAM=A,B[,C], not {item!r}", EXIT_USAGE)
        if key in swept:
            raise CommandError(f"--sweep {key} is given twice: list its values once", EXIT_USAGE)
        swept[key] = [parse_values(value.strip()) for value in values.split(",")]
    return swept


def sweep_body(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """`POST sweeps`' body: the template submission `submit` built, with the swept values."""
    if "template" not in body or "command" in body:
        raise CommandError(
            "--sweep sweeps a template's parameters: submit a script or --template NAME",
            EXIT_USAGE,
        )
    swept = sweep_values(args.sweep)
    # What submit filled in (a script's empty args) gives way to the swept values.
    params = {key: value for key, value in body.get("params", {}).items() if key not in swept}
    request: dict[str, Any] = {**body, "params": params, "sweep": swept}
    if args.max_concurrent is not None:
        request["max_concurrent"] = args.max_concurrent
    if args.metric:
        request["metric"] = args.metric
    if args.goal:
        request["goal"] = args.goal
    return request


def submit_sweep(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, body: dict[str, Any]
) -> Outcome:
    if args.dry_run or args.follow:
        raise CommandError("--dry-run and --follow take one job, not a --sweep", EXIT_USAGE)
    submitted = api.submit_sweep(sweep_body(args, body))
    summary = submitted.summary
    cap = f", at most {summary.max_concurrent} at once" if summary.max_concurrent else ""
    console.note(f"Submitted sweep {summary.id}: {summary.size} jobs{cap}")
    if args.wait:
        submitted = wait_sweep(api, summary.id, args.timeout, console)
        state = submitted.summary.state
        return Outcome(
            TableResult(sweep_table(submitted), submitted),
            0 if state == JobState.SUCCEEDED else 1,
        )
    return Outcome(TableResult(sweep_table(submitted), submitted))


def wait_sweep(api: HyperPodAPI, sweep_id: str, timeout: float | None, console: Console) -> Sweep:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        found = api.sweep(sweep_id)
        if found.summary.progress >= 1:
            console.note(f"sweep {sweep_id} {found.summary.state.value}: {counts(found.summary)}")
            return found
        if deadline is not None and time.monotonic() > deadline:
            raise InvalidRequest(
                f"sweep {sweep_id} is not done after {timeout:g} s", field="timeout"
            )
        time.sleep(POLL_SECONDS)


def counts(summary: SweepSummary) -> str:
    shown = [
        f"{summary.counts.get(state.value, 0)} {state.value.lower()}"
        for state in JobState
        if summary.counts.get(state.value)
    ]
    waiting = summary.counts.get("waiting", 0)
    return ", ".join(shown) + (f" ({waiting} waiting for a slot)" if waiting else "")


def best_text(summary: SweepSummary) -> str:
    if summary.best is None:
        return ""
    return f"{summary.metric} {summary.best.value:.4g} ({summary.best.name})"


def sweep_table(found: Sweep) -> Table:
    summary = found.summary
    rows = [
        [
            job.id,
            ", ".join(
                f"{k}={v}" for k, v in (job.spec.sweep.point if job.spec.sweep else {}).items()
            ),
            job.state.value,
            job.state_reason or "",
        ]
        for job in found.jobs
    ]
    notes = [f"{summary.name}: {counts(summary)}; {summary.progress:.0%} done"]
    if summary.best:
        notes.append(f"best so far: {best_text(summary)}")
    if len(found.jobs) >= 2:
        notes.append("side by side: compare " + " ".join(job.id for job in found.jobs[:10]))
    return Table(["JOB", "POINT", "STATE", "WHY"], rows, notes=notes, colored=["STATE"])


def sweeps_table(found: SweepList) -> Table:
    rows = [
        [
            summary.id,
            summary.state.value,
            f"{summary.progress:.0%}",
            counts(summary),
            ",".join(summary.fields),
            best_text(summary),
        ]
        for summary in found.sweeps
    ]
    return Table(["SWEEP", "STATE", "DONE", "MEMBERS", "SWEPT", "BEST"], rows, colored=["STATE"])


def do_sweeps(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    found = api.sweeps()
    return Outcome(TableResult(sweeps_table(found), found))


def do_sweep(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    if args.cancel:
        found = api.cancel_sweep(args.sweep_id)
        console.note(f"Cancelled sweep {args.sweep_id}: {counts(found.summary)}")
    else:
        found = api.sweep(args.sweep_id)
    return Outcome(TableResult(sweep_table(found), found))
