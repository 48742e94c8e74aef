"""The rank a failed job failed on is decided once, by the server (`Job.failed_rank`), from the
ranks' facts: the cases the panel used to decide itself (src/__tests__/diagnosis.spec.tsx)."""

from __future__ import annotations

from typing import Any

from jupyter_hyperpod.core.models import Job, JobSpec, JobState, RankFault, RankInfo


def job(ranks: list[RankInfo], state: JobState = JobState.FAILED, **extra: Any) -> Job:
    return Job(
        id="train-1",
        name="train",
        user="u",
        orchestrator="local",
        state=state,
        created=0,
        ranks=ranks,
        spec=JobSpec(name="train", command=["t.py"], procs_per_node=max(1, len(ranks))),
        **extra,
    )


def rank(number: int, **fields: Any) -> RankInfo:
    return RankInfo(rank=number, **fields)


def test_a_rank_that_failed_on_its_own_over_one_stopped_after_it() -> None:
    assert job([rank(0, exit_code=-15), rank(1, exit_code=3)]).failed_rank == 1
    assert (
        job(
            [
                rank(0, exit_code=143, state="FAILED"),
                rank(1, exit_code=2, state="FAILED"),
                rank(2, exit_code=1, state="FAILED"),
            ]
        ).failed_rank
        == 1
    )
    assert job([rank(0), rank(1, exit_code=-9)]).failed_rank == 1


def test_the_failed_rank_that_ended_first_where_the_backend_knows_when() -> None:
    # The reason names rank 2 (the launcher saw it first in its poll), but rank 1 ended first:
    # the reason's words are never read.
    ranks = [rank(0, exit_code=143, ended=10.2), rank(1, exit_code=3, ended=10.0)]
    ranks.append(rank(2, exit_code=1, ended=10.1))
    assert job(ranks, state_reason="rank 2 exited with code 1").failed_rank == 1
    # A tie goes to the rank that failed on its own, not one the launcher stopped.
    assert job([rank(0, exit_code=-15, ended=5), rank(1, exit_code=2, ended=5)]).failed_rank == 1


def test_slurm_ranks_that_srun_killed_have_no_end() -> None:
    # tests/slurm/test_rank_ends.py's job: rank 2 failed, torchrun stopped rank 3 after it,
    # srun's --kill-on-bad-exit killed ranks 0 and 1 (no record).
    ranks = [
        rank(0, state="FAILED"),
        rank(1, state="FAILED"),
        rank(2, state="FAILED", exit_code=3, ended=98.8),
        rank(3, state="FAILED", exit_code=143, ended=98.9),
    ]
    assert job(ranks, state_reason="FAILED (NonZeroExitCode)").failed_rank == 2


def test_the_rank_the_orchestrator_recorded_the_final_fault_on() -> None:
    def fault(restart: int | None) -> RankFault:
        return RankFault(restart=restart, restart_type="JLR", pod="train-pods-1", node="i-0abc")

    ranks = [
        rank(0, exit_code=1, ended=1),
        rank(1, exit_code=1, ended=2, faults=[fault(1), fault(None)]),
    ]
    assert job(ranks).failed_rank == 1


def test_none_unless_failed_or_when_no_rank_is_to_blame() -> None:
    assert job([rank(0, exit_code=1)], state=JobState.SUCCEEDED).failed_rank is None
    assert job([rank(0, exit_code=143)], state=JobState.CANCELLED).failed_rank is None
    assert job([]).failed_rank is None
    assert job([rank(0, exit_code=0), rank(1, exit_code=0)]).failed_rank is None


def test_it_travels_with_the_job_and_is_not_taken_from_input() -> None:
    shown = job([rank(0, exit_code=0), rank(1, exit_code=3)])
    data = shown.model_dump(mode="json")
    assert data["failed_rank"] == 1
    data["failed_rank"] = 0  # a stored or sent value is recomputed, never trusted
    assert Job.model_validate(data).failed_rank == 1


RANK_ONE_FAILS = (
    "import os, sys, time\nif os.environ['RANK'] == '1':\n    sys.exit(3)\ntime.sleep(60)\n"
)


async def test_the_server_names_the_rank_a_real_job_failed_on(api: Any, partition: Any) -> None:
    """Rank 1 fails, the local runner stops rank 0 after it: GET jobs/{id} blames rank 1."""
    from .test_contract import check

    (partition / "fail.py").write_text(RANK_ONE_FAILS)
    job_ = await api.submit(
        {"name": "fail", "command": ["fail.py"], "procs_per_node": 2, "launcher": "plain"}
    )
    done = await api.wait_for(job_["id"], {"FAILED", "SUCCEEDED"})
    assert done["state"] == "FAILED" and done["failed_rank"] == 1, done
    check("/jobs/{job_id}", "GET", 200, done)
