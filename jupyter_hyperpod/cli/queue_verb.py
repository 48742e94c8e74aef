"""`jupyter hyperpod queue` and `%hyperpod queue`: the cluster's queue (every user's jobs), and
for my jobs submitted elsewhere: adopt, logs, cancel (after a confirmation).

    queue [--mine] [--state S] [--queue Q] [--limit N] [--offset N] [--refresh]
    queue adopt ID | queue logs ID [--tail N] | queue cancel ID [--yes]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..core.api import HyperPodAPI
from ..core.queue import QueueJob, QueuePage
from ..render import RichJob, Table, when
from .exits import EXIT_FORBIDDEN, EXIT_USAGE, CommandError
from .output import Console, Outcome, TableResult

ACTIONS = ("list", "adopt", "logs", "cancel")


def add_queue_parser(verb: Callable[..., argparse.ArgumentParser]) -> None:
    queue = verb(
        "queue",
        "the cluster's queue: every job it reports, all users (Slurm squeue, Kubernetes job "
        "objects, this machine's shared store); adopt, read or cancel a job of yours "
        "submitted elsewhere",
    )
    queue.add_argument("action", nargs="?", default="list", choices=ACTIONS)
    queue.add_argument("id", nargs="?", help="a queue row's id (adopt, logs, cancel)")
    queue.add_argument("--mine", action="store_true", help="only my jobs")
    queue.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="these states (default PENDING,RUNNING; 'all' for every state); repeat or comma-separate",
    )
    queue.add_argument("--queue", dest="partition", help="only this partition, queue or namespace")
    queue.add_argument("--limit", type=int, default=50, help="rows per page (default 50)")
    queue.add_argument("--offset", type=int, default=0)
    queue.add_argument("--refresh", action="store_true", help="ask the cluster now")
    queue.add_argument("--tail", type=int, default=200, help="log lines (logs)")
    queue.add_argument("--yes", action="store_true", help="cancel without asking")


def _state(row: QueueJob) -> str:
    text = row.state.value
    if row.reason:
        text += f" ({row.reason})"
    return text


def queue_table(page: QueuePage) -> Table:
    rows = [
        [
            ("* " if row.mine else "") + row.id,
            row.name,
            row.user or "?",
            _state(row),
            row.nodes,
            row.gpus,
            row.partition or "",
            row.priority if row.priority is not None else (row.priority_class or ""),
            when(row.submitted),
            when(row.started) if row.started else "",
        ]
        for row in page.jobs
    ]
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(page.counts.items()))
    notes = (
        [
            f"{page.offset + 1}-{page.offset + len(page.jobs)} of {page.total} ({counts}; "
            f"from {page.source} at {when(page.fetched)}); * = mine"
        ]
        if page.jobs
        else [f"no job matches ({counts or 'the queue is empty'})"]
    )
    notes += [f"{row.id}: {row.explanation}" for row in page.jobs if row.explanation]
    adoptable = [row.id for row in page.jobs if row.adoptable]
    if adoptable:
        notes.append(f"yours, submitted elsewhere: open with `queue adopt {adoptable[0]}`")
    return Table(
        [
            "id",
            "name",
            "user",
            "state",
            "nodes",
            "gpus",
            "queue",
            "priority",
            "submitted",
            "started",
        ],
        rows,
        title="Cluster queue",
        notes=notes,
        colored=["state"],
    )


def _confirm(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        raise CommandError("cannot ask for a confirmation here: pass --yes", EXIT_USAGE) from None


def do_queue(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    queue_api = api
    if args.action == "list":
        if args.id:
            raise CommandError("queue takes an id only with adopt, logs or cancel", EXIT_USAGE)
        states = [s for value in args.state for s in value.split(",") if s]
        page = queue_api.queue(
            mine=args.mine,
            state=states,
            partition=args.partition,
            offset=args.offset,
            limit=args.limit,
            fresh=args.refresh,
        )
        return Outcome(TableResult(queue_table(page), page))
    if not args.id:
        raise CommandError(f"queue {args.action} needs the id of a queue row", EXIT_USAGE)
    if args.action == "logs":
        logs = queue_api.queue_logs(args.id, tail=args.tail)
        return Outcome(logs.text if not args.json else logs)
    row = next(
        (r for r in queue_api.queue(state="all", limit=1000, fresh=True).jobs if r.id == args.id),
        None,
    )
    if row is not None and not row.mine:
        raise CommandError(
            f"job {row.id} belongs to {row.user or 'someone else'}: others' jobs are read-only",
            EXIT_FORBIDDEN,
        )
    job = queue_api.adopt(args.id)
    if args.action == "adopt":
        console.note(f"Adopted {args.id} as job {job.id}: status, logs and cancel work on it")
        return Outcome(RichJob.of(job))
    if job.state.finished:
        console.note(f"job {job.id} has already ended ({job.state.value})")
        return Outcome(RichJob.of(job))
    what = f"{job.name} ({args.id}, {job.state.value}, {job.spec.nodes} node(s))"
    if not args.yes and not _confirm(f"Cancel {what}? [y/N] "):
        console.note("not cancelled")
        return Outcome(RichJob.of(job), EXIT_USAGE)
    cancelled = api.cancel(job.id)
    console.note(f"Cancelled job {cancelled.id} ({cancelled.state.value})")
    return Outcome(RichJob.of(cancelled), print_value=False)
