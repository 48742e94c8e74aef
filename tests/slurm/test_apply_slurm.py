"""Bring your own sbatch script (`POST jobs/apply` on the real Slurm test cluster): directives
read as sbatch reads them, checked with `sbatch --test-only`, policed, tracked; a failed task is
named from srun's own report; hostile scripts refused with nothing queued."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from ..helpers import Api

pytestmark = pytest.mark.slurm

RANKS = textwrap.dedent(
    """\
    #!/bin/bash
    #SBATCH --nodes=2 --ntasks-per-node=2
    #SBATCH --job-name=ranks  # a comment after the options
    #SBATCH --time=5
    srun bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME";
      if [ "$SLURM_PROCID" = 3 ]; then exit 3; fi'
    """
)


def queued(name: str) -> list[str]:
    done = subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True, text=True, check=False
    )
    return done.stdout.split()


async def test_script_runs_and_names_its_failed_rank(api: Api, partition: Path) -> None:
    preview = await api.post(
        "jobs/apply", {"text": RANKS, "filename": "ranks.sbatch", "dry_run": True}
    )
    assert preview.status == 200, preview.body
    assert preview.body["text"] == RANKS  # sent unchanged
    values = {c["value"] for c in preview.body["changes"]}
    assert f"--chdir={partition}" in values  # where sbatch would have run it, shown

    reply = await api.post("jobs/apply", {"text": RANKS, "filename": "ranks.sbatch"})
    assert reply.status == 201, reply.body
    job = reply.body["job"]
    assert job["backend_id"].isdigit()
    final = await api.wait_for(job["id"], {"FAILED", "SUCCEEDED"}, timeout=120)
    assert final["state"] == "FAILED"
    assert "rank 3 on node" in final["state_reason"], final
    assert "exit code 3" in final["state_reason"]
    # Per-rank logs, as our own jobs have: each task srun started in the script has its own.
    job_dir = partition / ".hyperpod" / "jobs" / job["id"]
    sent = {c["value"] for c in reply.body["changes"]}
    assert f"SLURM_STDOUTMODE={job_dir}/rank-%t.log" in sent  # shown as a change
    ranks = final["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert {r["node"] for r in ranks[:2]} != {r["node"] for r in ranks[2:]}  # two per node
    assert [r["log"] for r in ranks] == [f"{job_dir}/rank-{n}.log" for n in range(4)]
    for rank in range(4):
        log = (await api.get(f"jobs/{job['id']}/logs", rank=rank, tail=50)).body["text"]
        assert f"task {rank} of 4" in log, (rank, log)
        assert all(f"task {other} of 4" not in log for other in range(4) if other != rank)
    # srun's own report stays in the script's output, which named the failed rank above.
    assert "task 3: Exited with exit code 3" in next(job_dir.glob("slurm-*.out")).read_text()
    stored = partition / final["spec"]["params"]["applied_file"]
    assert stored.read_text() == RANKS


def script(*directives: str, body: str = "srun true\n") -> str:
    return "#!/bin/bash\n#SBATCH --job-name=evil\n" + "".join(f"{d}\n" for d in directives) + body


HOSTILE = [
    ("uid", script("#SBATCH --uid=0"), 403, "rule: no --uid/--gid"),
    ("gid", script("#SBATCH --gid=0"), 403, "rule: no --uid/--gid"),
    ("chdir outside", script("#SBATCH --chdir=/tmp"), 403, "outside your partition"),
    ("output outside", script("#SBATCH -o /etc/slurm-%j.out"), 403, "outside your partition"),
    ("error above", script("#SBATCH --error=../../x.err"), 403, "rule: paths"),
    (
        "credentials",
        script("#SBATCH --export=ALL,AWS_SECRET_ACCESS_KEY=abc"),
        403,
        "rule: no --export of credentials",
    ),
    ("CRLF", script("#SBATCH --nodes=1").replace("\n", "\r\n"), 400, "DOS line breaks"),
    ("no shebang", "srun true\n", 400, "starts with '#!'"),
    ("bad option", script("#SBATCH --nodes=2 bogus"), 400, "'bogus' is not an sbatch option"),
    ("test-only refuses", script("#SBATCH --partition=nosuch"), 400, "sbatch --test-only"),
]


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [pytest.param(text, status, message, id=name) for name, text, status, message in HOSTILE],
)
async def test_hostile_scripts_refused_and_nothing_queued(
    api: Api, partition: Path, text: str, status: int, message: str
) -> None:
    for dry_run in (True, False):
        reply = await api.post(
            "jobs/apply", {"text": text, "filename": "evil.sbatch", "dry_run": dry_run}
        )
        assert reply.status == status, reply.body
        assert message in reply.body["error"]["message"], reply.body
    assert queued("evil") == []
    assert (await api.get("jobs")).body["total"] == 0


async def test_late_directive_reported_fixed_and_then_policed(api: Api, partition: Path) -> None:
    """#SBATCH after the first command is ignored by sbatch: reported with its fix (moved up),
    refused without it; moved up, a hidden --uid is refused like any other."""
    late = script(body="srun true\n#SBATCH --time=1\n")
    preview = await api.post("jobs/apply", {"text": late, "dry_run": True})
    assert preview.status == 200, preview.body
    assert (
        "line 4: #SBATCH after the first command (line 3)"
        in (preview.body["problems"][0]["message"])
    )
    assert "+#SBATCH --time=1" in preview.body["fix_diff"]
    refused = await api.post("jobs/apply", {"text": late})
    assert refused.status == 400 and "is ignored by sbatch" in refused.body["error"]["message"]
    assert queued("evil") == []
    text = script(body="srun true\n#SBATCH --uid=0\n")
    preview = await api.post("jobs/apply", {"text": text, "dry_run": True, "fix": True})
    assert preview.status == 403, preview.body
    assert "rule: no --uid/--gid" in preview.body["error"]["message"]
