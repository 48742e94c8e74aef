"""The verbs of `jupyter hyperpod` and `%hyperpod`: one function per verb, in one table, over
any implementation of the API (`HyperPodAPI`: the server's REST client or the core in this
process). Same `JobSpec`, templates and error messages as the panel: every one ends in the core.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from ..core.api import HyperPodAPI, LogEvent, RankArg
from ..core.errors import HyperPodError
from ..core.models import Job, JobState
from ..render import (
    FileResults,
    JobResults,
    LogText,
    NodeResults,
    RichCluster,
    RichJob,
    RichRendered,
    Table,
    TemplateDetail,
    TemplateResults,
)
from ..terminal_text import TerminalText
from .apply_verb import do_apply
from .chain_verb import do_chain, do_resume
from .compare_verb import do_compare, do_diff
from .exits import (
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    CommandError,
    command_error,
)
from .output import Console, LineGate, Outcome, RankPrefixer, TableResult
from .parser import Parser, build_parser
from .queue_verb import do_queue
from .session import open_api
from .stacks_verb import do_stacks
from .submission import build_submission, check_option_order, misplaced_options
from .sweep_verb import do_sweep, do_sweeps, submit_sweep

Verb = Callable[[argparse.Namespace, HyperPodAPI, Console, "str | None"], Outcome]
"""(options, the API, the console, the cell of %%hyperpod) -> the outcome."""


def job_exit_code(job: Job | None, state: JobState | None = None) -> int:
    final = state or (job.state if job else None)
    return EXIT_OK if final == JobState.SUCCEEDED else EXIT_JOB_FAILED


def wait_for(
    api: HyperPodAPI, job_id: str, timeout: float | None, console: Console | None = None
) -> Job:
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.2
    reported: JobState | None = None
    while True:
        job = api.job(job_id)
        if console is not None and job.state != reported:
            reported = job.state
            if not job.state.finished:
                console.note(
                    f"job {job_id} is {job.state.value}"
                    + (f": {job.state_reason}" if job.state_reason else "")
                )
        if job.state.finished:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise CommandError(
                f"job {job_id} is still {job.state.value} after {timeout:g} s", EXIT_TIMEOUT
            )
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(5.0, delay * 1.5)


def follow_logs(
    api: HyperPodAPI, job_id: str, console: Console, *, rank: RankArg = 0, tail: int = 200
) -> LogEvent | None:
    """Print the last `tail` lines, then the live log until the job ends; returns the end event.
    KeyboardInterrupt stops following (the caller reports it); the job is never touched."""
    job = api.job(job_id)
    ranks = list(range(job.spec.world_size)) if rank == "all" else [int(rank)]
    prefixer = RankPrefixer(len(ranks) > 1)
    gate = LineGate(console)
    offsets: dict[int, int] = {}
    for r in ranks:
        snapshot = api.logs(job_id, rank=r, tail=tail)
        offsets[r] = snapshot.offset
        if snapshot.text:
            gate.write(prefixer.feed(r, snapshot.text))
    end: LogEvent | None = None
    shown_state = job.state  # the stream opens with the state it finds: only changes are news
    stream = api.follow(job_id, rank=rank, offsets=offsets)
    try:
        for event in stream:
            if event.type == "status" and event.state is not None and not event.state.finished:
                if event.state == shown_state:
                    continue
                shown_state = event.state
                reason = f": {event.reason}" if event.reason else ""
                gate.note(f"[job {job_id} {event.state.value}{reason}]")
            elif event.type == "data" and event.rank is not None:
                gate.write(prefixer.feed(event.rank, event.data))
            elif event.type == "end":
                end = event
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        gate.write(prefixer.flush())
        gate.close()
    if end is not None:
        code = f" (exit code {end.exit_code})" if end.exit_code is not None else ""
        console.note(f"[job {job_id} {end.state.value if end.state else 'ended'}{code}]")
    return end


def _states(values: Sequence[str]) -> list[JobState] | None:
    states: list[JobState] = []
    for value in values:
        for item in filter(None, value.split(",")):
            try:
                states.append(JobState(item.strip().upper()))
            except ValueError:
                allowed = ", ".join(s.value for s in JobState)
                raise CommandError(
                    f"state must be one of {allowed}, not '{item}'", EXIT_USAGE
                ) from None
    return states or None


def do_submit(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    check_option_order(getattr(args, "misplaced", []), console)
    body = build_submission(args, api, cell=cell)
    if getattr(args, "sweep", None):  # one group of jobs (#24 item 3, cli/sweep_verb.py)
        return submit_sweep(args, api, console, body)
    if args.dry_run:
        return Outcome(RichRendered.of(api.render(body)))
    job = api.submit(body)
    console.note(f"Submitted job {job.id} ({job.state.value})")
    if args.follow:
        try:
            end = follow_logs(api, job.id, console, rank=0, tail=0)
        except KeyboardInterrupt:
            return _interrupted(job.id, console, api.job(job.id))
        final = api.job(job.id)
        return Outcome(
            RichJob.of(final), job_exit_code(final, end.state if end else None), print_value=False
        )
    if args.wait:
        final = wait_for(api, job.id, args.timeout, console)
        console.note(
            f"job {final.id} {final.state.value}"
            + (f" (exit code {final.exit_code})" if final.exit_code is not None else "")
        )
        return Outcome(RichJob.of(final), job_exit_code(final), print_value=False)
    return Outcome(RichJob.of(job), print_value=False)


def _interrupted(job_id: str, console: Console, job: Job | None = None) -> Outcome:
    state = f" (still {job.state.value})" if job is not None else ""
    console.note(
        f"[stopped following {job_id}{state}; the job keeps running — cancel it with"
        f" `{console.prog} cancel {job_id}`]"
    )
    return Outcome(
        RichJob.of(job) if job is not None else None, EXIT_INTERRUPTED, print_value=False
    )


def do_logs(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    if args.follow:
        try:
            end = follow_logs(api, args.job, console, rank=args.rank, tail=args.tail)
        except KeyboardInterrupt:
            try:
                job = api.job(args.job)
            except (HyperPodError, KeyboardInterrupt):
                job = None
            return _interrupted(args.job, console, job)
        return Outcome(None, job_exit_code(None, end.state if end else None), print_value=False)
    if args.rank == "all":
        job = api.job(args.job)
        parts = []
        for r in range(job.spec.world_size):
            snapshot = api.logs(args.job, rank=r, tail=args.tail)
            parts.append(f"==> rank {r} <==\n{snapshot.text}")
        return Outcome(TerminalText("\n".join(parts)))
    return Outcome(LogText(api.logs(args.job, rank=args.rank, tail=args.tail)))


def do_cancel(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    results = []
    for job_id in args.jobs:
        before = api.job(job_id)
        job = api.cancel(job_id)
        if before.state.finished:
            console.note(f"job {job.id} had already ended ({job.state.value})")
        else:
            console.note(f"Cancelled job {job.id} ({job.state.value})")
        results.append(job)
    if len(results) == 1:
        return Outcome(RichJob.of(results[0]), print_value=False)
    return Outcome(JobResults(results), print_value=False)


def do_rerun(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    job = api.rerun(args.job, with_changes=args.with_changes)
    what = "your current files" if args.with_changes else "the files it ran"
    ran = job.snapshot
    commit = f" ({ran.commit[:7]}{'+diff' if ran.dirty else ''})" if ran and ran.commit else ""
    console.note(f"Rerun of {args.job} with {what}{commit}: job {job.id} ({job.state.value})")
    return Outcome(RichJob.of(job), print_value=False)


def do_forget(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    results = []
    for job_id in args.jobs:
        gone = api.forget(job_id, delete_files=args.delete_files)
        first = "cancelled, then " if gone.cancelled else ""
        files = "deleted" if gone.files_deleted else "kept"
        console.note(f"Job {gone.id} {first}removed from your history; {gone.job_dir} {files}")
        results.append(gone)
    return Outcome(results[0] if len(results) == 1 else results, print_value=False)


def do_connect(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    """The core's connect: where the API runs (the server, or this process) writes the context
    and switches to the cluster; without a cluster, the region's clusters and why not each."""
    if not args.cluster:
        listing = api.aws_clusters(args.region)
        rows = [
            [c.name, c.orchestrator or "?", c.status, "yes" if c.connectable else f"no: {c.reason}"]
            for c in listing.clusters
        ]
        table = Table(
            ["cluster", "orchestrator", "status", "connectable"],
            rows,
            title=f"HyperPod clusters in {listing.region}",
            notes=[
                "connect to an EKS cluster with: connect CLUSTER",
                "make this machine a login node of a Slurm one with: connect --slurm CLUSTER",
            ],
        )
        return Outcome(TableResult(table, listing))
    if args.print_lifecycle_config:
        from ..aws.slurm_login.lifecycle import lifecycle_config

        print(
            lifecycle_config(
                args.cluster, region=args.region, controller_group=args.controller_group
            ),
            end="",
        )
        return Outcome(None, print_value=False)
    info = api.connect(
        args.cluster,
        region=args.region,
        namespace=args.namespace,
        auth=args.auth,
        slurm=args.slurm,
        controller_group=args.controller_group,
    )
    details = info.details
    login = details.get("login_node")
    if login:
        table = Table(
            ["step", "done"],
            [[step["step"], step["detail"]] for step in login["steps"]],
            title=f"{api.description} now uses {info.name}: this machine is its login node",
            notes=[f"in a terminal: export SLURM_CONF={login['slurm_conf']}"],
        )
        return Outcome(TableResult(table, info))
    table = Table(
        ["", ""],
        [
            ["cluster", info.name],
            ["orchestrator", info.orchestrator],
            *(
                [key, details[key]]
                for key in ("context", "namespace", "api_server")
                if details.get(key)
            ),
        ],
        title=f"{api.description} now uses {info.name}",
    )
    return Outcome(TableResult(table, info))


def do_doctor(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    from ..doctor import doctor_report

    report = doctor_report(api)
    return Outcome(report, EXIT_OK if report.ok else EXIT_JOB_FAILED)


def do_cluster(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    return Outcome(RichCluster.of(api.cluster()))


def do_nodes(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    return Outcome(NodeResults(api.nodes()))


def do_jobs(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    page = api.jobs(states=_states(args.state), limit=args.limit or 20, offset=args.offset)
    return Outcome(JobResults(page.jobs, page.total))


def do_status(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    if not args.job:
        return Outcome(RichCluster.of(api.cluster()))
    if args.wait:
        job = wait_for(api, args.job, args.timeout, console)
        return Outcome(RichJob.of(job), job_exit_code(job))
    return Outcome(RichJob.of(api.job(args.job)))


def do_wait(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    job = wait_for(api, args.job, args.timeout, console)
    return Outcome(RichJob.of(job), job_exit_code(job))


def do_files(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    listing = api.files(args.path, offset=args.offset, limit=args.limit or 200, sort=args.sort)
    return Outcome(FileResults(listing))


def do_templates(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    templates = api.templates()
    if not args.name:
        return Outcome(TemplateResults(templates))
    for info in templates:
        if info.name == args.name:
            return Outcome(TemplateDetail(info))
    known = ", ".join(t.name for t in templates)
    raise CommandError(f"unknown template '{args.name}' (available: {known})", EXIT_NOT_FOUND)


def do_mcp(
    args: argparse.Namespace, api: HyperPodAPI, console: Console, cell: str | None
) -> Outcome:
    """Serve MCP on stdin/stdout until the agent closes them (`agent/server.py`)."""
    if console.prog.startswith("%"):  # a kernel's stdin/stdout are not an agent's
        raise CommandError(
            "mcp serves an agent on stdin/stdout: start `jupyter hyperpod mcp` from the agent's "
            "MCP configuration (or use the server's endpoint hyperpod/mcp), not in a notebook",
            EXIT_USAGE,
        )
    try:
        from ..agent import server as _needs_the_mcp_package  # noqa: F401
        from ..agent.stdio import serve
    except ImportError:
        raise CommandError(
            "jupyter hyperpod mcp needs the mcp package: pip install 'jupyter-hyperpod[mcp]'",
            EXIT_USAGE,
        ) from None
    from .session import load_settings

    serve(
        api,
        actions_setting=str(load_settings().mcp_actions),
        allow_actions=args.allow_actions,
    )
    return Outcome(None, print_value=False)


VERBS: dict[str, Verb] = {
    "cluster": do_cluster,
    "nodes": do_nodes,
    "jobs": do_jobs,
    "submit": do_submit,
    "status": do_status,
    "wait": do_wait,
    "logs": do_logs,
    "cancel": do_cancel,
    "rerun": do_rerun,
    "diff": do_diff,
    "compare": do_compare,
    "sweeps": do_sweeps,
    "sweep": do_sweep,
    "chain": do_chain,
    "resume": do_resume,
    "forget": do_forget,
    "files": do_files,
    "templates": do_templates,
    "connect": do_connect,
    "doctor": do_doctor,
    "queue": do_queue,
    "apply": do_apply,
    "stacks": do_stacks,
    "mcp": do_mcp,
}
"""Every verb of the parser, by name."""


def run(
    argv: Sequence[str],
    *,
    console: Console,
    api: HyperPodAPI | None = None,
    api_factory: Callable[[argparse.Namespace], HyperPodAPI] = open_api,
    cell: str | None = None,
    parser: Parser | None = None,
    keep_api: bool = False,
) -> tuple[Outcome, argparse.Namespace]:
    """Parse argv and run the verb. Raises CommandError (with its exit code) or HelpShown.
    An API made by api_factory is closed afterwards unless keep_api (the magics keep theirs for
    the next call)."""
    parser = parser or build_parser()
    args = parser.parse_args(list(argv))
    if args.verb == "submit":
        args.misplaced = misplaced_options(argv, args.args, parser.options_of("submit"))
    if getattr(args, "json", False):
        console.notes_to_err = True  # stdout is the JSON document
    if cell is not None and args.verb not in ("submit", "apply"):
        raise CommandError(
            "%%hyperpod (a cell) only works with submit and apply: %%hyperpod submit [options]",
            EXIT_USAGE,
        )
    if args.verb == "admin":  # the admin's tools touch the file system and AWS, no core
        from ..admin.cli import partitions

        try:
            report = partitions(args)
        except HyperPodError as error:
            raise command_error(error) from None
        return Outcome(report, report.exit_code), args
    if args.verb == "mcp" and args.skill:  # the skill file needs no cluster
        from ..agent.skill import skill_text
        from ..render import Message

        return Outcome(Message(skill_text())), args
    verb = VERBS[args.verb]
    owned = api is None and not keep_api
    try:
        if api is None:
            api = api_factory(args)
        return verb(args, api, console, cell), args
    except HyperPodError as error:
        raise command_error(error) from None
    except Exception as error:
        if type(error).__name__ == "NoRegionError":  # botocore's, raised creating a client
            raise CommandError(
                "no AWS region: pass --region or set AWS_REGION", EXIT_USAGE
            ) from None
        raise
    finally:
        if owned and api is not None:
            api.close()


__all__ = ["VERBS", "Verb", "follow_logs", "job_exit_code", "run", "wait_for"]
