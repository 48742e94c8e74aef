"""`jupyter hyperpod apply FILE [--fix] [--dry-run]` and `%%hyperpod apply`: the user's own
manifest or sbatch script through the core's `apply` (core/byo.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.api import HyperPodAPI
from ..core.byo import MAX_FILE_BYTES, AppliedFile
from ..render import RichJob
from .exits import EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from .output import Console, Outcome


def add_apply(verb: Any) -> None:
    """The verb's options (cli/parser.py calls this with its `verb` maker)."""
    apply = verb(
        "apply",
        "submit your own PyTorchJob/HyperPodPyTorchJob manifest or sbatch script as it is",
        epilog="examples:\n"
        "  apply pod-finetuning.yaml --dry-run   # what would be sent, each change marked\n"
        "  apply pod-finetuning.yaml --fix       # accept the offered fixes\n"
        "  apply --resubmit JOB                  # the job's stored file again\n"
        "%%hyperpod apply [--fix] [--dry-run] submits the cell's text.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    apply.add_argument("file", nargs="?", help="the manifest (.yaml) or sbatch script")
    apply.add_argument("--fix", action="store_true", help="accept the fixes offered")
    apply.add_argument(
        "--dry-run", action="store_true", help="check and preview only: nothing is created"
    )
    apply.add_argument("--resubmit", metavar="JOB", help="submit a job's stored file again")


def read_file(name: str) -> str:
    path = Path(name).expanduser()
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CommandError(f"no file '{name}'", EXIT_NOT_FOUND) from None
    except OSError as error:
        raise CommandError(f"cannot read '{name}': {error.strerror}", EXIT_USAGE) from None
    if len(data) > MAX_FILE_BYTES:
        raise CommandError(
            f"'{name}' is over {MAX_FILE_BYTES:,} bytes: a manifest or script is a few kB",
            EXIT_USAGE,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"'{name}' is not UTF-8 text", EXIT_USAGE) from None


class AppliedView(AppliedFile):
    """What apply sent (or would send), each change marked, as text and in a notebook."""

    def __str__(self) -> str:
        what = "dry run: nothing was created" if self.dry_run else "sent"
        out = [f"# {self.filename} ({self.format}), {what}"]
        if self.job is not None:
            out.append(f"# job {self.job.id} ({self.job.state.value})")
        for change in self.changes:
            out.append(f"# + {change.path} {change.action}: {change.value}  ({change.reason})")
        for problem in self.problems:
            out.append(f"# ! {problem.path}: {problem.message}")
            if problem.fix:
                out.append(f"#   fix (--fix): {problem.fix}")
        out += [f"# warning: {w}" for w in self.warnings]
        if self.dry_run:
            out.append(self.text.rstrip())
        if self.diff:
            out.append(self.diff.rstrip())
        if self.problems and self.fix_diff and self.fix_diff != self.diff:
            out += ["# the fix, to accept with --fix:", self.fix_diff.rstrip()]
        return "\n".join(out)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def do_apply(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    if cell is not None:
        if args.file:
            raise CommandError("%%hyperpod apply takes the cell's text, not a file", EXIT_USAGE)
        text, filename = cell, "cell.yaml" if not cell.lstrip().startswith("#!") else "cell.sbatch"
    elif args.resubmit:
        text, filename = "", ""
    elif args.file:
        text, filename = read_file(args.file), Path(args.file).name
    else:
        raise CommandError("apply needs a FILE (or --resubmit JOB)", EXIT_USAGE)
    applied = api.apply(
        text, filename=filename, fix=args.fix, dry_run=args.dry_run, resubmit=args.resubmit
    )
    view = AppliedView.model_construct(**dict(applied))
    if applied.job is not None:
        console.note(str(view))
        console.note(f"Submitted job {applied.job.id} ({applied.job.state.value})")
        return Outcome(RichJob.of(applied.job), print_value=False)
    return Outcome(view)
