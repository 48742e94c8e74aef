"""Python stacks of a Slurm job's ranks: one probe per node of the allocation, run inside it with
`srun --overlap --jobid` (srun(1): "--overlap: Allow steps to overlap each other on the same
resources", so it runs next to the job's own step, not after it). The probe is a small Python
program passed as an argument (`python3 -c`, nothing installed on the nodes but py-spy): it finds
the job's rank processes on its node by their environment (HYPERPOD_JOB_ID and RANK, which the
script gives every rank; the Python process whose parent is not one of them), runs
`py-spy dump --json` on each and prints one JSON line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...core.models import RankStack
from ...core.stacks import DUMP_TIMEOUT_S, PY_SPY_MISSING, read_dump

if TYPE_CHECKING:
    from ..base import StoredJob
    from .backend import SlurmOrchestrator

PROBE = r"""
import json, os, shutil, subprocess, sys
job = sys.argv[1].encode()
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


def dump_stacks(backend: SlurmOrchestrator, job: StoredJob) -> dict[int, RankStack]:
    """Every rank's stack that a probe found, by rank (one srun step over the job's nodes)."""
    nodes = max(1, int(job.spec.nodes))
    done = backend.commands.run(
        "srun",
        [
            "--overlap",
            f"--jobid={job.backend_id}",
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            "--quiet",
            backend.settings.cluster_python,
            "-c",
            PROBE,
            job.id,
            f"{DUMP_TIMEOUT_S:g}",
        ],
        timeout=DUMP_TIMEOUT_S * 3,
        ok_codes=(0,),
    )
    stacks: dict[int, RankStack] = {}
    for line in done.stdout.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        for item in found:
            rank = int(item["rank"])
            if rank in stacks:
                continue  # nodes that share a machine (a test cluster) see each other's ranks
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
