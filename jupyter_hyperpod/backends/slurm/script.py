"""A job -> the sbatch script a person would write: `#SBATCH` header, environment, one srun.

Ranks get the variables torch.distributed expects (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT): torchrun sets them when it launches the ranks (one torchrun per node, rendezvous at
the allocation's first node on a port derived from the job id), otherwise a small rank shell sets
them from SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS. Rank 0 writes to the job's output file
(Slurm's StdOut, with the launcher's messages); every other rank to `rank-<N>.log` beside it.
Every user string goes through shell quoting.

Slurm records one end for a step, the same for all of its tasks, and no restart inside it, so the
rank shell records each rank's own: it runs the program as its child, not by `exec`, and appends
to `rank-<N>.runs` when the program starts and when it ends (rank_runs.py). That says which rank
failed first, and how often the ranks were restarted. Signals still
reach the program: Slurm (scancel, the time limit, `--signal`, `--kill-on-bad-exit`) signals
every process of the step and torchrun the rank's whole session, so the program gets them as
before; the shell traps them only so that it outlives the program, then ends the way the program
did (the same exit code, or the same signal).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ...core.backend import Launch
from ...core.errors import InvalidRequest
from ...core.launch import program_argv, shell_join, torchrun_argv, uses_torchrun

OUTPUT_NAME = "slurm-%j.out"
SCRIPT_NAME = "job.sbatch"
EXIT_CODE_NAME = "exit-code"
PORT_BASE = 20000
PORT_RANGE = 20000
RANK_REDIRECT = '[ "$RANK" = 0 ] || exec >>"$HYPERPOD_RANK_LOG_DIR/rank-$RANK.log" 2>&1'
RANK_RUNS_SUFFIX = ".runs"
# The rank's record (rank_runs.py): `start - <time>` before the program, `end <code> <time>` after.
# The time is bash's own, EPOCHREALTIME (bash 5), else printf's %(%s)T (bash 4.2, whole seconds):
# no `$(` and no child while the traps are set, because a trap that runs while bash expands a `$(`
# breaks the parse (bash 5.2, with signals that come in bursts) and the signals would end a child
# such as date(1). The function's name is no program's: bash finds functions before PATH.
_RECORD = (
    'hyperpod_record() { if [ -n "${EPOCHREALTIME:-}" ]; then printf "%s %s %s\\n" "$1" "$2"'
    ' "$EPOCHREALTIME"; else printf "%s %s %(%s)T\\n" "$1" "$2" -1; fi'
    ' >>"$HYPERPOD_RANK_LOG_DIR/rank-$RANK.runs"; }'
)
# Signals 1-15 all end a process by default (signal(7)); trapped by a command (not ignored), they
# are reset to the default in the program (bash(1), COMMAND EXECUTION ENVIRONMENT), and bash runs
# the trap only once its foreground child has ended. One `{ }` group, parsed whole before the
# program runs. No `$$`: torchrun reads its arguments as a string.Template
# (torch/distributed/elastic/utils/api.py, `macros`), which turns `$$` into `$`.
_TRAPPED = "HUP INT QUIT USR1 USR2 ALRM TERM"
RANK_RUN = [
    _RECORD,
    f"{{ hyperpod_record start -; trap : {_TRAPPED}",
    '  "$@"',
    "  status=$?",
    '  hyperpod_record end "$status"',
    f"  trap - {_TRAPPED}",
    # Ended by signal N (status 128+N): end by the same signal, as `exec` would have.
    '  [ "$status" -gt 128 ] && [ "$status" -le 143 ] && ulimit -c 0'
    ' && kill -$((status - 128)) "$BASHPID"',
    '  exit "$status"; }',
]
_UNSAFE_SBATCH_VALUE = re.compile(r"[\s\"'\\]")


@dataclass
class ScriptOptions:
    partition: str = ""
    extra_sbatch: list[str] = field(default_factory=list)
    hyperpod: bool = False
    auto_resume: bool = True
    gpu_option: str = "gpus-per-node"
    cpus_per_rank: int = 1
    torchrun: str = "torchrun"
    python: str = "python3"


def rank_log_name(rank: int) -> str:
    return f"rank-{rank}.log"


def rank_runs_name(rank: int) -> str:
    """Where the rank shell records when the rank's program started and how and when it ended."""
    return f"rank-{rank}{RANK_RUNS_SUFFIX}"


def output_path(job_dir: str, slurm_id: str | None = None) -> str:
    """The job's output file: Slurm's pattern (a literal '%' doubled), or the path for an id."""
    if slurm_id:
        return f"{job_dir.rstrip('/')}/{OUTPUT_NAME.replace('%j', slurm_id)}"
    return f"{job_dir.rstrip('/').replace('%', '%%')}/{OUTPUT_NAME}"


def sbatch_value(value: str, what: str) -> str:
    """A value for an `#SBATCH` line, which sbatch (not a shell) reads."""
    if "\n" in value or "\r" in value:
        raise InvalidRequest(f"the {what} cannot contain a line break")
    if _UNSAFE_SBATCH_VALUE.search(value):
        if '"' in value or "\\" in value:
            raise InvalidRequest(f"the {what} cannot contain quotes or backslashes on Slurm")
        return f'"{value}"'
    return value


def render_script(launch: Launch, options: ScriptOptions) -> tuple[str, list[str]]:
    """(script text, warnings)."""
    spec = launch.spec
    warnings: list[str] = []
    torchrun = uses_torchrun(spec, multi_node_cluster=True)
    job_dir = launch.job_dir.rstrip("/")
    partition = spec.queue or options.partition
    auto_resume = options.hyperpod and (options.auto_resume or spec.auto_resume)
    if spec.auto_resume and not options.hyperpod:
        warnings.append(
            "auto-resume needs a HyperPod cluster (/opt/sagemaker_cluster); not used here"
        )
    if spec.image:
        warnings.append(
            "container images are not used on Slurm; the job runs in the nodes' environment"
        )
    if spec.efa_per_node:
        warnings.append("EFA is not requested on Slurm: NCCL uses the nodes' EFA devices by itself")
    if spec.kind:
        warnings.append(f"the job kind '{spec.kind}' is for Kubernetes; Slurm runs a batch job")

    header = [
        f"--job-name={sbatch_value(spec.name, 'job name')}",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={1 if torchrun else spec.procs_per_node}",
    ]
    # CPUs for each srun task: torchrun's task holds all of its node's ranks.
    cpus_per_task = options.cpus_per_rank * (spec.procs_per_node if torchrun else 1)
    if cpus_per_task > 1:
        header.append(f"--cpus-per-task={cpus_per_task}")
    if spec.gpus_per_node:
        header.append(
            f"--gres=gpu:{spec.gpus_per_node}"
            if options.gpu_option == "gres"
            else f"--gpus-per-node={spec.gpus_per_node}"
        )
    if partition:
        header.append(f"--partition={sbatch_value(partition, 'partition')}")
    if spec.time_limit_minutes:
        header.append(f"--time={spec.time_limit_minutes}")
    if spec.exclude_nodes:  # names checked by JobSpec (NODE_NAME_PATTERN): no quoting needed
        header.append(f"--exclude={sbatch_value(','.join(spec.exclude_nodes), 'node list')}")
    if launch.after_ids:  # a chain (#24): Slurm holds it (reason Dependency) until they end
        if not all(slurm_id.isdigit() for slurm_id in launch.after_ids):
            raise InvalidRequest(
                "after: the jobs it waits for have no Slurm job ids", field="after"
            )
        kind = "afterany" if launch.after_any else "afterok"
        header.append(f"--dependency={kind}:{':'.join(launch.after_ids)}")
    out = sbatch_value(output_path(job_dir), "job directory")
    header += [
        f"--chdir={sbatch_value(job_dir, 'job directory')}",
        f"--output={out}",
        f"--error={out}",
    ]
    for extra in options.extra_sbatch:
        if not extra.startswith("-") or "\n" in extra:
            raise InvalidRequest(
                f"sbatch_extra_args must be options such as --account=x, not {extra!r}"
            )
        header.append(extra)

    lines = [
        "#!/bin/bash",
        f"# jupyter-hyperpod job {spec.name} ({launch.job_id}) of {launch.user}: this file,",
        f"# {SCRIPT_NAME} in its job directory, went to `sbatch --parsable` on standard input.",
        "# Rank 0 and the launcher write to the output file below, rank N > 0 to rank-N.log in",
        "# the same directory.",
        *[f"#SBATCH {item}" for item in header],
        "",
        "# Environment of every rank.",
        *[f"export {key}={shlex.quote(value)}" for key, value in sorted(launch.env.items())],
        f"export HYPERPOD_RANK_LOG_DIR={shlex.quote(job_dir)}",
        "",
        "# Rendezvous: the allocation's first node is the master, the port comes from the job id.",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"MASTER_PORT=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_RANGE}))",
        "export MASTER_ADDR MASTER_PORT",
        'echo "job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s) ($SLURM_JOB_NODELIST),'
        ' master $MASTER_ADDR:$MASTER_PORT, $(date -u +%FT%TZ)"',
        "",
        f"cd {shlex.quote(launch.workdir)} || exit 1",
        "",
    ]

    program = program_argv(launch.command, options.python)
    srun = ["srun", "--kill-on-bad-exit=1"]
    if auto_resume:
        srun.append("--auto-resume=1")
    if torchrun:
        lines += [
            "# Each rank (started by torchrun, which sets RANK, LOCAL_RANK, WORLD_SIZE...):",
            "# rank 0 writes to the job's output, the others to their own log; rank-N.runs",
            "# records when the rank's program started, and how and when it ended.",
            "RANK_SHELL='" + RANK_REDIRECT,
            *RANK_RUN[:-1],
            RANK_RUN[-1] + "'",
            "",
            f"# torchrun on each node starts {spec.procs_per_node} rank(s), node rank SLURM_NODEID",
        ]
        argv = torchrun_argv(
            ["bash"],
            nnodes=spec.nodes,
            nproc_per_node=spec.procs_per_node,
            rdzv_endpoint=None,  # static rendezvous: the master node and the node rank are Slurm's
            max_restarts=spec.max_retries,
            torchrun=options.torchrun,
        )[:-2]  # without the trailing "--no-python bash": the rank shell follows
        launcher = [
            shell_join(argv),
            '--master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT" --no-python',
        ]
        node_shell = shlex.quote('exec "$0" --node-rank="$SLURM_NODEID" "$@"')
        srun_line = [
            shell_join(srun),
            f"bash -c {node_shell}",
            *launcher,
            'bash -c "$RANK_SHELL" rank',
            shell_join(program),
        ]
    else:
        lines += [
            "# Each rank (one srun task): torch.distributed variables from Slurm's; rank 0 writes",
            "# to the job's output, the others to their own log; rank-N.runs records when the",
            "# rank's program started, and how and when it ended.",
            "RANK_SHELL='export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID"
            f" WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE={spec.procs_per_node}",
            RANK_REDIRECT,
            *RANK_RUN[:-1],
            RANK_RUN[-1] + "'",
            "",
            f"# {spec.world_size} rank(s): {spec.nodes} node(s) x {spec.procs_per_node}.",
        ]
        srun_line = [shell_join(srun), 'bash -c "$RANK_SHELL" rank', shell_join(program)]
    lines += [
        " \\\n    ".join(srun_line),
        "status=$?",
        "",
        "# Kept for jupyter-hyperpod in case Slurm forgets the job before its end is seen.",
        f'echo "$status" > {shlex.quote(job_dir + "/" + EXIT_CODE_NAME)}',
        'echo "job $SLURM_JOB_ID finished with exit code $status, $(date -u +%FT%TZ)"',
        'exit "$status"',
        "",
    ]
    return "\n".join(lines), warnings
