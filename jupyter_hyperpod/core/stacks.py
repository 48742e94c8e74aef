"""Python stacks of a job's ranks: py-spy `dump --json` of each rank's process, side by side.

A backend that can reach its ranks' processes has `dump_stack(job, rank) -> RankStack` (local:
directly, by the pid its supervisor recorded). This module runs py-spy, reads its JSON
(`py-spy dump -j`: a list of threads, each with `frames` innermost first: `name`, `filename`,
`line`), says what to add when py-spy is missing or may not attach, and marks the frames that
differ between ranks: the rank waiting somewhere else than the others (asleep before a
collective while they wait inside it) stands out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .models import RankStack, StackFrame, ThreadStack

DUMP_TIMEOUT_S = 20.0

PY_SPY_MISSING = (
    "py-spy is not installed where the ranks run: add it to the job's environment "
    "(pip install 'jupyter-hyperpod[training]' or pip install py-spy)"
)
PTRACE_DENIED = (
    "py-spy may not attach to the rank (ptrace is not permitted): run the ranks as the same user "
    "with kernel.yama.ptrace_scope at 0 or 1, or give the container the SYS_PTRACE capability "
    "(securityContext.capabilities.add: [SYS_PTRACE]); in Docker, --cap-add SYS_PTRACE"
)

# A probe run where the ranks are (a Slurm node through srun, a pod through exec), as a Python
# program given on the command line (`python3 -c`: nothing installed there but py-spy): it finds
# the job's rank processes by their environment (HYPERPOD_JOB_ID and RANK, which every rank of
# ours has; a Python process whose parent is not one of them), runs `py-spy dump --json` on each
# and prints one JSON line. argv: the job id, py-spy's timeout. Under srun it dumps only the
# ranks of its own node (SLURMD_NODENAME): Slurm nodes that share a machine (a test cluster)
# see each other's processes, and two py-spy attached to one process at once both fail.
PROBE = r"""
import json, os, shutil, subprocess, sys
job = sys.argv[1].encode()
here = os.environ.get("SLURMD_NODENAME", "").encode()
py_spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
if not os.access(py_spy, os.X_OK):
    py_spy = shutil.which("py-spy")
ranks = {}
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        with open(f"/proc/{name}/environ", "rb") as handle:
            env = dict(e.split(b"=", 1) for e in handle.read().split(b"\0") if b"=" in e)
        exe = os.path.basename(os.readlink(f"/proc/{name}/exe"))
        with open(f"/proc/{name}/stat", "rb") as handle:
            parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        continue
    if here and env.get(b"SLURMD_NODENAME", here) != here:
        continue
    if env.get(b"HYPERPOD_JOB_ID") == job and b"RANK" in env and exe.startswith("python"):
        ranks[int(name)] = (int(env[b"RANK"]), parent, env.get(b"SLURMD_NODENAME", b"").decode())
found = []
for pid, (rank, parent, node) in sorted(ranks.items()):
    if parent in ranks:
        continue  # a data loader worker, a subprocess: its rank's process is its parent
    if py_spy is None:
        found.append({"rank": rank, "pid": pid, "node": node, "code": 127, "out": "", "err": "no py-spy"})
        continue
    try:
        done = subprocess.run([py_spy, "dump", "--json", "--pid", str(pid)],
                              capture_output=True, text=True, timeout=float(sys.argv[2]))
        found.append({"rank": rank, "pid": pid, "node": node, "code": done.returncode,
                      "out": done.stdout, "err": done.stderr})
    except subprocess.TimeoutExpired:
        found.append({"rank": rank, "pid": pid, "node": node, "code": 124, "out": "",
                      "err": "py-spy did not answer"})
print(json.dumps(found))
"""


Run = Callable[[Sequence[str]], tuple[int, str, str]]


def run_here(argv: Sequence[str]) -> tuple[int, str, str]:
    """Run a command on this machine: (exit code, stdout, stderr); 127 when it is not there."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False
        )
    except FileNotFoundError as error:
        return 127, "", str(error)
    except subprocess.TimeoutExpired:
        return 124, "", f"py-spy did not answer within {DUMP_TIMEOUT_S:g} s"
    return done.returncode, done.stdout, done.stderr


def local_py_spy() -> str | None:
    """py-spy next to this interpreter (the venv with the training extra), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def dump_command(py_spy: str, pid: int) -> list[str]:
    return [py_spy, "dump", "--json", "--pid", str(pid)]


def read_dump(
    rank: int, node: str | None, pid: int | None, code: int, out: str, err: str
) -> RankStack:
    """A rank's stack from py-spy's answer, or why there is none and what to add."""
    if code == 0:
        try:
            threads = [_thread(item) for item in json.loads(out)]
        except (ValueError, TypeError, KeyError) as error:
            return RankStack(
                rank=rank, node=node, pid=pid, error=f"unreadable py-spy output: {error}"
            )
        return RankStack(rank=rank, node=node, pid=pid, threads=threads)
    text = (err or out).strip()
    lowered = text.lower()
    if code == 127 or ("not found" in lowered and "py-spy" in lowered):
        return RankStack(
            rank=rank, node=node, pid=pid, error=text or "no py-spy", fix=PY_SPY_MISSING
        )
    if "permission" in lowered or "ptrace" in lowered or "operation not permitted" in lowered:
        return RankStack(rank=rank, node=node, pid=pid, error=text, fix=PTRACE_DENIED)
    return RankStack(rank=rank, node=node, pid=pid, error=text or f"py-spy exited with {code}")


def _thread(item: dict) -> ThreadStack:  # type: ignore[type-arg]
    return ThreadStack(
        name=item.get("thread_name"),
        thread_id=int(item["thread_id"]),
        active=bool(item.get("active")),
        frames=[
            StackFrame(
                name=str(frame["name"]),
                filename=str(frame.get("short_filename") or frame["filename"]),
                line=int(frame.get("line") or 0),
            )
            for frame in item.get("frames", [])
        ],
    )


def mark_differences(ranks: list[RankStack]) -> list[RankStack]:
    """Mark each frame of each rank's main thread (its first) that not every other rank with a
    stack has at the same depth counted from the outermost frame."""
    stacked = [r for r in ranks if r.threads]
    if len(stacked) < 2:
        return ranks
    outermost = [
        [(f.name, f.filename, f.line) for f in reversed(r.threads[0].frames)] for r in stacked
    ]
    for rank, frames in zip(stacked, outermost, strict=True):
        main = rank.threads[0].frames
        for depth, key in enumerate(frames):
            same = all(len(other) > depth and other[depth] == key for other in outermost)
            main[len(main) - 1 - depth].differs = not same
    return ranks


def read_probe(stdout: str) -> dict[int, RankStack]:
    """The probe's JSON lines (one per node it ran on) as each rank's stack, by rank."""
    stacks: dict[int, RankStack] = {}
    for line in stdout.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        for item in found:
            rank = int(item["rank"])
            if rank in stacks and not stacks[rank].error:
                continue  # a rank seen twice: the first stack read is kept
            node = item.get("node") or None
            if item["code"] == 127:
                stacks[rank] = RankStack(
                    rank=rank, node=node, pid=item["pid"], error=item["err"], fix=PY_SPY_MISSING
                )
            else:
                stacks[rank] = read_dump(
                    rank, node, item["pid"], item["code"], item["out"], item["err"]
                )
    return stacks
