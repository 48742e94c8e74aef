"""The argument parser of `jupyter hyperpod` and `%hyperpod`: every verb and its options."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from ..core.api import RankArg
from .apply_verb import add_apply
from .chain_verb import add_chain
from .compare_verb import add_compare
from .exits import EXIT_CODES_HELP, EXIT_USAGE, CommandError, HelpShown
from .queue_verb import add_queue_parser
from .stacks_verb import add_stacks
from .sweep_verb import add_sweep, add_sweep_options


class Parser(argparse.ArgumentParser):
    """Raises instead of exiting, so that a magic never ends the kernel."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(
            f"{self.format_usage().strip()}\n{self.prog}: error: {message}", EXIT_USAGE
        )

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        if status:
            raise CommandError(message or "error", EXIT_USAGE)
        raise HelpShown()

    def options_of(self, verb: str) -> frozenset[str]:
        """Every option string a verb takes (`--dry-run`, `-n`...), its common ones included."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
                sub = action.choices[verb]
                return frozenset(o for a in sub._actions for o in a.option_strings)
        return frozenset()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' cannot be negative")
    return value


def _rank(text: str) -> RankArg:
    if text == "all":
        return "all"
    return _positive(text)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=VALUE")
    return key.strip(), value


def _common() -> Parser:
    """Options every verb takes (also before the verb)."""
    default = argparse.SUPPRESS
    parser = Parser(add_help=False)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--url",
        default=default,
        help="Jupyter server URL (default: $JUPYTER_HYPERPOD_URL, "
        "else the server this runs under, else none: the core runs in this process)",
    )
    group.add_argument(
        "--token", default=default, help="its token (default: $JUPYTER_TOKEN or the server's)"
    )
    group.add_argument(
        "--direct",
        action="store_true",
        default=default,
        help="run the core in this process with the Jupyter configuration files, even if a server runs",
    )
    group.add_argument(
        "--json", action="store_true", default=default, help="print the result as JSON"
    )
    return parser


def build_parser(prog: str = "jupyter hyperpod") -> Parser:
    common = _common()
    parser = Parser(
        prog=prog,
        description="Drive the training cluster (HyperPod EKS/Slurm, Slurm, or this machine) from a terminal or a notebook.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common()],
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    verbs.required = True

    def verb(name: str, help_text: str, **kwargs: Any) -> Parser:
        made = verbs.add_parser(
            name, help=help_text, description=help_text, parents=[common], **kwargs
        )
        assert isinstance(made, Parser)  # parser_class=Parser
        return made

    verb("cluster", "the cluster, the user and the partition")
    verb("nodes", "nodes with their state, health and free GPUs")

    jobs = verb("jobs", "your jobs, newest first")
    jobs.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only these states (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED); repeat or comma-separate",
    )
    jobs.add_argument("--limit", type=_positive, default=20, help="how many (default 20)")
    jobs.add_argument("--offset", type=_positive, default=0)

    submit = verb(
        "submit",
        "submit a script from the partition, a template or a job spec file",
        epilog="examples:\n"
        "  submit --nodes 2 --gpus-per-node 1 project/train.py --config args.yaml\n"
        "  submit --template qlora-finetune --set lora_r=16 --name ft1\n"
        "  submit --spec job.yaml --dry-run\n"
        "the script path is relative to your partition (or absolute inside it); the job runs in its directory.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument("script", nargs="?", help="script or program in the partition")
    submit.add_argument(
        "args", nargs=argparse.REMAINDER, help="its arguments (everything after the script)"
    )
    submit.add_argument("-t", "--template", help="submit a template (see `templates`)")
    submit.add_argument(
        "--set",
        dest="set",
        action="append",
        default=[],
        type=_key_value,
        metavar="PARAM=VALUE",
        help="a template parameter (repeat)",
    )
    submit.add_argument(
        "--spec", metavar="FILE", help="a JobSpec (or {name, template, params}) as YAML or JSON"
    )
    submit.add_argument("-n", "--name", help="job name (default: from the script or template)")
    resources = submit.add_argument_group("resources")
    resources.add_argument("--nodes", type=_positive)
    resources.add_argument(
        "--procs-per-node",
        "--nproc-per-node",
        dest="procs_per_node",
        type=_positive,
        help="processes (ranks) per node",
    )
    resources.add_argument("--gpus-per-node", type=_positive)
    resources.add_argument("--efa-per-node", type=_positive)
    resources.add_argument(
        "--time-limit", dest="time_limit_minutes", type=_positive, metavar="MINUTES"
    )
    resources.add_argument("--queue", help="Slurm partition or Kubernetes queue")
    advanced = submit.add_argument_group("advanced")
    advanced.add_argument(
        "-e", "--env", action="append", default=[], type=_key_value, metavar="NAME=VALUE"
    )
    advanced.add_argument(
        "--workdir", help="working directory in the partition (default: the script's)"
    )
    advanced.add_argument("--image", help="container image (Kubernetes)")
    advanced.add_argument("--kind", help="PyTorchJob or HyperPodPyTorchJob (Kubernetes)")
    advanced.add_argument("--namespace", help="Kubernetes namespace")
    advanced.add_argument("--launcher", choices=["auto", "torchrun", "plain"])
    advanced.add_argument(
        "--auto-resume", action="store_true", default=None, help="restart on node failure"
    )
    advanced.add_argument("--max-retries", type=_positive)
    advanced.add_argument("--healthy-nodes-only", action="store_true", default=None)
    chained = submit.add_argument_group("chain (wait for other jobs)")
    chained.add_argument(
        "--after",
        action="append",
        default=[],
        metavar="ID[,ID]",
        help="start once these jobs succeeded (repeat or comma-separate); one that fails "
        "cancels this job with its reason",
    )
    chained.add_argument(
        "--after-any",
        action="store_true",
        default=None,
        help="with --after: start once they ended, whatever their state",
    )
    add_sweep_options(submit)
    after = submit.add_argument_group("after submitting")
    after.add_argument(
        "--dry-run", action="store_true", help="print what would be submitted, submit nothing"
    )
    after.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait until the job ends (exit code 1 if it fails)",
    )
    after.add_argument(
        "-f", "--follow", action="store_true", help="follow rank 0's log until the job ends"
    )
    after.add_argument("--timeout", type=float, help="seconds to wait at most")

    status = verb("status", "a job's state and ranks (without JOB: the cluster)")
    status.add_argument("job", nargs="?")
    status.add_argument(
        "-w",
        "--wait",
        action="store_true",
        help="wait until the job ends (exit code 1 if it fails)",
    )
    status.add_argument("--timeout", type=float, help="seconds to wait at most")

    wait = verb("wait", "wait until a job ends (exit code 1 if it failed)")
    wait.add_argument("job")
    wait.add_argument("--timeout", type=float, help="seconds to wait at most")

    logs = verb("logs", "a job's log (the last lines, or follow it live with -f)")
    logs.add_argument("job")
    logs.add_argument(
        "-r", "--rank", type=_rank, default=0, help="rank number or 'all' (default 0)"
    )
    logs.add_argument(
        "--tail", type=_positive, default=200, help="lines to show first (default 200)"
    )
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow until the job ends; interrupting stops following, never the job",
    )

    cancel = verb("cancel", "cancel jobs")
    cancel.add_argument("jobs", nargs="+", metavar="JOB")

    rerun = verb(
        "rerun",
        "start a job again, as a new job: exactly what it ran (its snapshot)",
        epilog="--with-changes: the same spec with your workdir's files as they are now",
    )
    rerun.add_argument("job", metavar="JOB")
    rerun.add_argument(
        "--with-changes",
        action="store_true",
        help="run the workdir's current files with the same spec, not the job's snapshot",
    )

    forget = verb(
        "forget",
        "remove jobs from your history (cancelled first if they still run)",
        epilog="outputs a job wrote into the partition are never touched; its own directory "
        "(.hyperpod/jobs/<id>: logs, launch files) is kept unless --delete-files",
    )
    forget.add_argument("jobs", nargs="+", metavar="JOB")
    forget.add_argument(
        "--delete-files", action="store_true", help="also delete each job's .hyperpod/jobs/<id>"
    )

    files = verb("files", "list a directory of your partition")
    files.add_argument("path", nargs="?", default="")
    files.add_argument(
        "--sort", default="name", choices=["name", "-name", "size", "-size", "mtime", "-mtime"]
    )
    files.add_argument("--limit", type=_positive, default=200)
    files.add_argument("--offset", type=_positive, default=0)

    templates = verb("templates", "job templates (with NAME: its parameters)")
    templates.add_argument("name", nargs="?")

    connect = verb(
        "connect",
        "connect to a HyperPod EKS cluster: write its kubeconfig context and switch the running "
        "server (or this process) to it; with --slurm, make the server's machine a login node "
        "of a Slurm cluster; without CLUSTER: list the region's clusters",
    )
    connect.add_argument(
        "--slurm",
        action="store_true",
        help="a Slurm cluster: find its controllers, write slurm.conf, fetch the munge key over "
        "SSM, align the munge/slurm ids, start munged, check sinfo, switch to slurm",
    )
    connect.add_argument(
        "--controller-group", help="--slurm: the controllers' instance group (default: guessed)"
    )
    connect.add_argument(
        "--print-lifecycle-config",
        action="store_true",
        help="--slurm: print the Studio lifecycle configuration that does the same at space start",
    )
    connect.add_argument("cluster", nargs="?", help="HyperPod cluster name or ARN")
    connect.add_argument("--region")
    connect.add_argument("--namespace", help="default namespace of the context")
    connect.add_argument(
        "--auth",
        choices=["exec", "token"],
        default="exec",
        help="exec: refresh tokens with `python -m jupyter_hyperpod.aws token` (default); "
        "token: write a 15-minute token",
    )
    standalone = connect.add_argument_group(
        "without a server (the server uses its own AWS credentials and kubeconfig)"
    )
    standalone.add_argument("--profile", help="AWS profile")
    standalone.add_argument(
        "--kubeconfig", help="file to write (default: $KUBECONFIG or ~/.kube/config)"
    )

    verb(
        "doctor",
        "check that the login node works for the configured cluster: where the core runs (the "
        "server, or this process), what it uses (file system, partition, orchestrator) and what "
        "it checked",
    )
    admin = verbs.add_parser(
        "admin",
        help="cluster-admin tools (per-user partitions); no server is used",
        description="cluster-admin tools, run on a machine with the file system mounted",
    )
    tools = admin.add_subparsers(dest="admin_tool", metavar="TOOL", parser_class=Parser)
    tools.required = True
    from ..admin.cli import add_arguments as partition_arguments

    partition_arguments(
        tools.add_parser(
            "partitions",
            help="per-user partitions: list, create or repair (owner, mode, Studio association)",
            description="the partition of every user profile of the Studio domain (or every "
            "directory under the root): exists, owner, mode, associated; create/repair fix them",
        )
    )
    add_queue_parser(verb)
    add_apply(verb)
    add_stacks(verb)
    add_compare(verb)
    add_chain(verb)
    add_sweep(verb)

    mcp = verb(
        "mcp",
        "serve the API to a local agent over MCP (stdio); read only unless actions are allowed",
        epilog='an agent\'s MCP configuration: {"command": "jupyter", "args": '
        '["hyperpod", "mcp"]}. The server\'s own endpoint: <server>/hyperpod/mcp '
        "(streamable HTTP, its token).",
    )
    mcp.add_argument(
        "--allow-actions",
        action="store_true",
        help="let the agent submit (with render's preview token) and cancel (with the job's "
        "name), unless the administrator turned actions off (c.HyperPodSettings.mcp_actions)",
    )
    mcp.add_argument(
        "--skill", action="store_true", help="print the agent skill file (SKILL.md) and exit"
    )
    return parser
