"""`jupyter hyperpod diff A B` and `compare A B ...` (and `%hyperpod diff`, `%hyperpod compare`):
what differs between two jobs as text (spec, configs, code, packages; unified diffs, no colour),
and two or more jobs side by side as a table (one column a job), both from the core's
`diff`/`compare`; --json prints the same result as the REST API answers it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.api import HyperPodAPI
from ..core.models import CodeSide, JobComparison, JobDiff, ValueChange
from ..render import Table, duration, size
from .output import Console, Outcome, TableResult


def add_compare(verb: Any) -> None:
    """The verbs' options (cli/parser.py calls this with its `verb` maker)."""
    diff = verb(
        "diff",
        "what differs between two jobs: spec, configs, code, Python packages",
        epilog="from the jobs' snapshots (what each ran); --json for the whole result",
    )
    diff.add_argument("job", metavar="A")
    diff.add_argument("other", metavar="B")
    compare = verb(
        "compare",
        "two or more jobs side by side: state, duration, what differs, final metrics",
        epilog="up to 10 jobs; the metrics are each MLflow metric's last point",
    )
    compare.add_argument("jobs", nargs="+", metavar="JOB")


def _value(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, default=str)


def _changes(changes: list[ValueChange], indent: str = "  ") -> list[str]:
    return [f"{indent}{c.field}: {_value(c.a)} -> {_value(c.b)}" for c in changes]


def _ran(job_id: str, side: CodeSide | None) -> str:
    if side is None:
        return f"{job_id}: no snapshot"
    commit = f"{side.commit[:7]}{'+diff' if side.dirty else ''}" if side.commit else "no git"
    return f"{job_id}: {commit}, {side.files} files ({size(side.bytes)})"


def diff_text(found: JobDiff) -> str:
    """The diff for a person: one section a kind, only what differs."""
    lines = [f"diff {found.a} {found.b}", ""]
    lines.append("spec:" if found.spec else "spec: the same")
    lines += _changes(found.spec)
    for config in found.configs:
        lines += ["", f"config {config.name} ({config.status}):"]
        lines += _changes(config.values)
        lines += ["  " + line for line in config.diff.splitlines()]
    code = found.code
    lines += ["", f"code: {_ran(found.a, code.a)}; {_ran(found.b, code.b)}"]
    if code.a and code.b:
        counts = {
            s: sum(f.status == s for f in code.files) for s in ("changed", "added", "removed")
        }
        lines.append(
            "  " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f", {code.unchanged} the same"
        )
    for change in code.files:
        lines.append(
            f"  {change.status} {change.path}" + (f" ({change.note})" if change.note else "")
        )
        lines += ["    " + line for line in (change.diff or "").splitlines()]
    env = found.environment
    if env.same:
        lines += ["", "environment: the same packages"]
    elif env.a_sha256 and env.b_sha256:
        lines += ["", f"environment: {len(env.packages)} packages differ"]
        for package in env.packages:
            if package.status == "changed":
                lines.append(f"  ~ {package.name} {package.a} -> {package.b}")
            else:
                sign, version = ("+", package.b) if package.status == "added" else ("-", package.a)
                lines.append(f"  {sign} {package.name} {version}")
    else:
        lines += ["", "environment: not compared (see the notes)"]
    if found.notes:
        lines += ["", "notes:"] + [f"  {note}" for note in found.notes]
    return "\n".join(lines) + "\n"


class DiffResult:
    """The diff as text for people; `.result` (and --json) is the JobDiff."""

    def __init__(self, result: JobDiff) -> None:
        self.result = result

    def __str__(self) -> str:
        return diff_text(self.result)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def to_json(self) -> Any:
        return self.result.model_dump(mode="json")


def _metric(point: Any) -> str:
    return "" if point is None else f"{point.value:.6g} (step {point.step})"


def comparison_table(found: JobComparison) -> Table:
    """One column a job; rows: the outcome, the values that differ, the final metrics."""
    jobs = found.jobs
    rows: list[list[Any]] = [
        ["name", *(j.name for j in jobs)],
        ["state", *(j.state.value for j in jobs)],
        ["duration", *(duration(j.duration) if j.duration is not None else "" for j in jobs)],
        ["exit code", *("" if j.exit_code is None else j.exit_code for j in jobs)],
        [
            "commit",
            *(f"{j.commit[:7]}{'+diff' if j.dirty else ''}" if j.commit else "" for j in jobs),
        ],
    ]
    rows += [[key, *(_value(j.values.get(key)) for j in jobs)] for key in found.differing]
    rows += [[name, *(_metric(j.final_metrics.get(name)) for j in jobs)] for name in found.metrics]
    variants = sorted({r.name for j in jobs if j.evaluation for r in j.evaluation.rouge})
    for variant in variants:
        cells = []
        for job in jobs:
            score = next(
                (r for r in (job.evaluation.rouge if job.evaluation else []) if r.name == variant),
                None,
            )
            cells.append(
                ""
                if score is None
                else f"{score.finetuned if score.finetuned is not None else '-'} "
                f"(base {score.base if score.base is not None else '-'})"
            )
        rows.append([variant, *cells])
    notes = list(found.notes)
    without = [j.id for j in jobs if not j.final_metrics and j.metrics_message]
    if without and not found.metrics:
        notes.append(f"no metrics: {jobs[0].metrics_message}")
    elif without:
        notes.append(f"no metrics for {', '.join(without)}")
    return Table(["", *(j.id for j in jobs)], rows, notes=notes)


def do_diff(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    return Outcome(DiffResult(api.diff(args.job, args.other)))


def do_compare(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    found = api.compare(args.jobs)
    return Outcome(TableResult(comparison_table(found), found))
