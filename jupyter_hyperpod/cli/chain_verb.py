"""`jupyter hyperpod chain JOB` (its links), `chain --submit FILE` (a chain in one request) and
`resume JOB` (a chain again from its failed link), and `%hyperpod` the same (#24 item 4). One job
waits for others with `submit --after ID[,ID] [--after-any]` (cli/submission.py)."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from ..core.api import HyperPodAPI
from ..core.chains import ChainSubmitted, JobChain
from ..core.errors import InvalidRequest
from ..render import Table
from .output import Console, Outcome, TableResult


def add_chain(verb: Any) -> None:
    """The verbs' options (cli/parser.py calls this with its `verb` maker)."""
    chain = verb(
        "chain",
        "a chain's links (jobs that wait for others), or submit a chain from a file",
        epilog="examples:\n"
        "  chain train-1a2b3c                # every link, its state and what it waits for\n"
        "  chain --submit pipeline.yaml      # {links: [{key, job: {name, template, params}, "
        "after: [key]}]}\n"
        "a link's values may name an earlier link's: {{train.output_dir}}, {{train.id}}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chain.add_argument("job", nargs="?", metavar="JOB")
    chain.add_argument("--submit", metavar="FILE", help="a chain ({links: [...]}) as YAML or JSON")
    resume = verb(
        "resume",
        "run a chain again from its failed link: that link and every link that waited on it",
        epilog="--with-changes: your workdir's current files (the fix), not each link's snapshot",
    )
    resume.add_argument("job", metavar="JOB")
    resume.add_argument(
        "--with-changes",
        action="store_true",
        help="run the workdir's current files, not each link's snapshot",
    )


def chain_table(found: JobChain) -> Table:
    rows = [
        [
            link.id,
            link.name,
            link.state.value,
            ",".join(link.after) + (" (any)" if link.after and link.after_any else ""),
            link.state_reason or "",
        ]
        for link in found.links
    ]
    notes = [f"failed: {found.failed}; `resume {found.failed}` runs it and what waited on it"]
    return Table(
        ["JOB", "NAME", "STATE", "AFTER", "WHY"],
        rows,
        notes=notes if found.failed else [],
        colored=["STATE"],
    )


def _submitted_table(found: ChainSubmitted) -> Table:
    return Table(
        ["JOB", "NAME", "STATE", "AFTER", "WHY"],
        [
            [job.id, job.name, job.state.value, ",".join(job.spec.after), job.state_reason or ""]
            for job in found.jobs
        ],
        colored=["STATE"],
    )


def _read_chain(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except OSError as error:
        raise InvalidRequest(
            f"cannot read the chain file {path}: {error.strerror or error}", field="submit"
        ) from None
    except yaml.YAMLError as error:
        raise InvalidRequest(f"the chain file {path} is not valid YAML/JSON: {error}") from None


def do_chain(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    if args.submit:
        if args.job:
            raise InvalidRequest("give JOB (to show its chain) or --submit FILE, not both")
        submitted = api.submit_chain(_read_chain(args.submit))
        console.note(f"Submitted a chain of {len(submitted.jobs)} jobs")
        return Outcome(TableResult(_submitted_table(submitted), submitted))
    if not args.job:
        raise InvalidRequest("give JOB (to show its chain) or --submit FILE", field="job")
    found = api.chain(args.job)
    return Outcome(TableResult(chain_table(found), found))


def do_resume(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    submitted = api.resume(args.job, with_changes=args.with_changes)
    what = "your current files" if args.with_changes else "each link's snapshot"
    console.note(f"Resumed the chain from {args.job} with {what}: {len(submitted.jobs)} new jobs")
    return Outcome(TableResult(_submitted_table(submitted), submitted))
