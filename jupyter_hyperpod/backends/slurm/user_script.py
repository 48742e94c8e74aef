"""A user's own sbatch script: its directives read as `sbatch` reads them, policed like our
jobs (paths in the partition, no other identity, no credentials exported), run unchanged.

sbatch(1): "The batch script may contain options preceded with "#SBATCH" before any executable
commands in the script. sbatch will stop processing further #SBATCH directives once the first
non-comment non-whitespace line has been reached in the script." Its first line must be `#!`
("This does not look like a batch script"), and it refuses DOS line breaks ("Batch script
contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks"): both are refused here
the same way, before anything reaches Slurm.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from ...core.byo import FileChange, FileContext, FileProblem, PreparedFile
from ...core.errors import Forbidden, InvalidRequest
from .script import rank_log_name

DIRECTIVE = "#SBATCH"
# The short options of sbatch that take a value (sbatch --help), so that `-o x` is one option.
SHORT_WITH_VALUE = set("AabcDdeFGiJLMmNnopqSstwxC")
SHORT_NAMES = {"D": "chdir", "o": "output", "e": "error", "i": "input", "N": "nodes", "n": "ntasks"}
# srun(1), INPUT ENVIRONMENT VARIABLES: SLURM_STDOUTMODE is -o/--output, SLURM_OPEN_MODE is
# --open-mode; sbatch(1) --export: SLURM_* variables are always propagated (even with NONE), so
# every srun of the user's script finds them. %t is the task's rank in the step (srun's filename
# patterns), appended so that a second step does not wipe the first one's lines.
TASK_LOG_PATTERN = rank_log_name(0).replace("0", "%t")
PATH_OPTIONS = ("chdir", "output", "error", "input")
IDENTITY_OPTIONS = ("uid", "gid")
CREDENTIAL = re.compile(r"(SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|ACCESS_KEY|PRIVATE_KEY)", re.I)
# srun(1)'s line for the tasks of a step that failed ("srun: error: node1: task 3: Exited with
# exit code 3"; several: "tasks 0-1: ..."), in the job's output.
SRUN_FAILED = re.compile(
    r"^srun: error: (?P<node>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>Exited with exit code "
    r"(?P<code>\d+)|Killed|Terminated|[^\n]*)",
    re.M,
)


@dataclass
class SbatchCall:
    """How the script is sent: sbatch's command-line options and the environment it runs in."""

    options: list[str]
    env: dict[str, str]
    tasks: int
    """The job's tasks (ranks): --ntasks, else --nodes times --ntasks-per-node."""
    per_node: int


@dataclass
class Directive:
    line: int
    option: str
    """Long name without dashes (`output`), short ones mapped where we check them."""
    value: str | None


@dataclass
class Script:
    directives: list[Directive] = field(default_factory=list)
    late: list[int] = field(default_factory=list)
    """Lines of #SBATCH after the first command: sbatch ignores them."""
    first_command: int = 0


def _refuse(line: int, message: str, field: str = "text") -> InvalidRequest:
    return InvalidRequest(f"line {line}: {message}", field=field)


def parse(text: str) -> Script:
    """The directives sbatch would read, with their lines."""
    if "\r\n" in text or "\r" in text:
        line = text[: text.find("\r")].count("\n") + 1
        raise _refuse(
            line,
            "the script has DOS line breaks (\\r\\n), which sbatch refuses: save it with Unix "
            "line ends (dos2unix, or your editor's LF setting)",
        )
    lines = text.split("\n")
    if not lines[0].startswith("#!"):
        raise _refuse(
            1,
            "an sbatch script starts with '#!' and its interpreter (e.g. #!/bin/bash), as "
            "sbatch requires",
        )
    script = Script()
    for number, raw in enumerate(lines[1:], start=2):
        stripped = raw.strip()
        if script.first_command:
            if stripped.startswith(DIRECTIVE):
                script.late.append(number)
            continue
        if not stripped:
            continue
        if not stripped.startswith("#"):
            script.first_command = number
            continue
        if raw.startswith(DIRECTIVE):
            script.directives += _options(raw[len(DIRECTIVE) :], number)
    return script


def _options(rest: str, line: int) -> list[Directive]:
    try:
        words = shlex.split(rest, comments=True)
    except ValueError as error:
        raise _refuse(line, f"cannot read the #SBATCH line: {error}") from None
    found: list[Directive] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            found.append(Directive(line, name, value if equals else None))
        elif word.startswith("-") and len(word) > 1:
            letter, attached = word[1], word[2:]
            given: str | None = attached or None
            if letter in SHORT_WITH_VALUE and not attached and index < len(words):
                given = words[index]
                index += 1
            found.append(Directive(line, SHORT_NAMES.get(letter, letter), given))
        else:
            raise _refuse(line, f"'{word}' is not an sbatch option")
    return found


def _forbid(line: int, rule: str, message: str) -> Forbidden:
    return Forbidden(f"line {line}: {message} (rule: {rule})", field=f"line {line}")


def police(script: Script, ctx: FileContext, workdir: str) -> None:
    """The admin's rules for a user's script (403 naming the rule)."""
    for item in script.directives:
        if item.option in IDENTITY_OPTIONS:
            raise _forbid(
                item.line,
                "no --uid/--gid",
                f"--{item.option} runs the job as someone else: jobs run as you",
            )
        if item.option in PATH_OPTIONS and item.value:
            path = _absolute(item.value, workdir)
            # Slurm's filename patterns (%j, %x...) name the file, its directory is fixed.
            if "%" in path.rsplit("/", 1)[-1]:
                path = path.rsplit("/", 1)[0] or "/"
            ctx.check_path(path, f"line {item.line} --{item.option}")
        if item.option == "export" and item.value:
            for name in re.split(r",", item.value):
                key = name.split("=", 1)[0]
                if CREDENTIAL.search(key):
                    raise _forbid(
                        item.line,
                        "no --export of credentials",
                        f"--export of {key} hands a credential to the job's environment: "
                        "let the job read it where it runs (its IAM role, a secret store)",
                    )


def _absolute(path: str, workdir: str) -> str:
    return path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"


def workdir_of(script: Script, default: str) -> str:
    for item in script.directives:
        if item.option == "chdir" and item.value:
            return _absolute(item.value, default)
    return default


def late_problem(script: Script, text: str) -> tuple[FileProblem, str] | None:
    """#SBATCH lines after the first command: sbatch ignores them. The fix moves them up."""
    if not script.late:
        return None
    lines = text.split("\n")
    moved = [lines[n - 1] for n in script.late]
    kept = [line for n, line in enumerate(lines, start=1) if n not in script.late]
    at = script.first_command - 1
    fixed = "\n".join(kept[:at] + moved + kept[at:])
    listed = ", ".join(str(n) for n in script.late)
    return (
        FileProblem(
            path=f"line {script.late[0]}",
            message=(
                f"line {listed}: #SBATCH after the first command (line {script.first_command}) "
                "is ignored by sbatch: the job would run without it"
            ),
            fix=f"move line {listed} above line {script.first_command}",
        ),
        fixed,
    )


def prepare_script(
    ctx: FileContext, workdir: str, test_only: Callable[[str, list[str]], str | None]
) -> PreparedFile:
    """The user's script checked and policed; `test_only(text, options)` asks sbatch
    --test-only (None, or sbatch's refusal)."""
    script = parse(ctx.text)
    problem = late_problem(script, ctx.text)
    text = ctx.text
    fixed = ""
    changes: list[FileChange] = []
    if problem is not None:
        fixed = problem[1]
        if ctx.fix:
            text = fixed
            script = parse(text)
            changes.append(
                FileChange(
                    path=problem[0].path,
                    action="changed",
                    value=problem[0].fix,
                    reason="fix accepted",
                )
            )
    workdir = workdir_of(script, workdir)
    police(script, ctx, workdir)
    options = []
    if not any(item.option == "chdir" for item in script.directives):
        options.append(f"--chdir={workdir}")
        changes.append(
            FileChange(
                path="sbatch command line",
                action="added",
                value=f"--chdir={workdir}",
                reason="the job runs in your partition (sbatch's current directory)",
            )
        )
    if not any(item.option == "output" for item in script.directives):
        output = f"{ctx.job_dir}/slurm-%j.out"
        options.append(f"--output={output}")
        changes.append(
            FileChange(
                path="sbatch command line",
                action="added",
                value=f"--output={output}",
                reason="its output kept with the job (tracked like ours)",
            )
        )
    env = {
        "SLURM_STDOUTMODE": f"{ctx.job_dir.rstrip('/')}/{TASK_LOG_PATTERN}",
        "SLURM_OPEN_MODE": "append",
    }
    changes += [
        FileChange(
            path="job environment",
            action="added",
            value=f"{key}={value}",
            reason="each task that srun starts in your script writes its own log (rank-N.log), "
            "as the ranks of our jobs do; an srun with its own --output keeps it",
        )
        for key, value in env.items()
    ]
    refusal = test_only(text, options)
    if refusal:
        raise InvalidRequest(f"sbatch --test-only refuses the script: {refusal}", field="text")
    nodes_count, per_node, tasks = _layout(script)
    name = next((d.value for d in script.directives if d.option == "job-name" and d.value), "")
    return PreparedFile(
        format="sbatch",
        language="shell",
        original=ctx.text,
        text=text,
        changes=changes,
        problems=[problem[0]] if problem else [],
        fixed=fixed,
        name=name or (ctx.filename.rsplit(".", 1)[0] if ctx.filename else "sbatch"),
        nodes=nodes_count,
        procs_per_node=per_node,
        command=[ctx.filename or "sbatch script"],
        payload=SbatchCall(options=options, env=env, tasks=tasks, per_node=per_node),
    )


def _value(script: Script, option: str) -> int | None:
    """The last whole-number value of an option (sbatch takes the last one given); a range
    (`--nodes=2-4`) by its minimum."""
    found = None
    for item in script.directives:
        if item.option == option and item.value:
            head = item.value.split("-")[0]
            if head.isdigit():
                found = int(head)
    return found


def _layout(script: Script) -> tuple[int, int, int]:
    """(nodes, tasks per node, tasks) as the directives ask them (1 when unsaid)."""
    nodes = max(1, _value(script, "nodes") or 1)
    per_node = _value(script, "ntasks-per-node")
    tasks = _value(script, "ntasks")
    if tasks is None:
        tasks = nodes * max(1, per_node or 1)
    return nodes, max(1, per_node or -(-tasks // nodes)), max(1, tasks)


def failed_task(output: str) -> str | None:
    """The task srun reported failed first in a job's output (its global rank), or None."""
    match = SRUN_FAILED.search(output)
    if match is None:
        return None
    tasks = match.group("tasks")
    what = (
        f"exit code {match.group('code')}" if match.group("code") else match.group("what").strip()
    )
    ranks = "ranks" if ("," in tasks or "-" in tasks) else "rank"
    return f"{ranks} {tasks} on {match.group('node')} failed first ({what})"


__all__ = ["SbatchCall", "failed_task", "parse", "police", "prepare_script"]
