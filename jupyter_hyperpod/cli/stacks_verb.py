"""`jupyter hyperpod stacks JOB [--last]` and `%hyperpod stacks JOB`: a Python stack of every
rank side by side (py-spy dump, through the core's `dump_stacks`), the frames that differ
between the ranks marked with `*`."""

from __future__ import annotations

import argparse
from typing import Any

from ..core.api import HyperPodAPI
from ..core.models import StackDump
from ..render import Table, when
from .output import Console, Outcome, TableResult


def add_stacks(verb: Any) -> None:
    """The verb's options (cli/parser.py calls this with its `verb` maker)."""
    stacks = verb(
        "stacks",
        "dump a Python stack of every rank of a running job (py-spy), side by side",
        epilog="frames marked * differ between the ranks (the rank waiting somewhere else)",
    )
    stacks.add_argument("job", metavar="JOB")
    stacks.add_argument(
        "--last", action="store_true", help="show the last dump stored with the job instead"
    )


def stacks_table(dump: StackDump) -> Table:
    """One column per rank, the main thread's frames from the outermost down."""
    columns = [list(reversed(r.threads[0].frames)) if r.threads else [] for r in dump.ranks]
    depth = max((len(c) for c in columns), default=0)
    rows = [
        [
            (("* " if c[i].differs else "  ") + f"{c[i].name} ({c[i].filename}:{c[i].line})")
            if i < len(c)
            else ""
            for c in columns
        ]
        for i in range(depth)
    ]
    notes = [
        f"rank {r.rank}: {r.error}" + (f" — {r.fix}" if r.fix else "")
        for r in dump.ranks
        if r.error
    ]
    if any(f.differs for c in columns for f in c):
        notes.append("* differs between the ranks")
    return Table(
        [f"rank {r.rank}" + (f" ({r.node})" if r.node else "") for r in dump.ranks],
        rows,
        title=f"stacks of {dump.job_id} at {when(dump.taken_at)} (outermost frame first)",
        notes=notes,
    )


def do_stacks(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    dump = api.stacks(args.job) if args.last else api.dump_stacks(args.job)
    return Outcome(TableResult(stacks_table(dump), dump))
