"""core/compare.py on real snapshots (a real Snapshotter on real files): the
packages that differ between two interpreters' pip freeze, files too large or binary to show,
an executable's diff, a job without a snapshot, metrics that cannot be read, durations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jupyter_hyperpod.core import compare as compare_module
from jupyter_hyperpod.core.compare import JobComparer, freeze_packages
from jupyter_hyperpod.core.errors import InvalidRequest, NotConnected, NotFound
from jupyter_hyperpod.core.freeze import FreezeCache
from jupyter_hyperpod.core.models import (
    Job,
    JobMetrics,
    JobSnapshot,
    JobSpec,
    JobState,
    MetricPoint,
)
from jupyter_hyperpod.core.partition import Partition
from jupyter_hyperpod.core.snapshot import Snapshotter

FREEZE_A = "torch==2.1.0\nnumpy==1.26.0\nold-pkg==1.0\n-e git+https://x/y.git@abc#egg=mylib\n"
FREEZE_B = (
    "torch==2.2.0\nNumPy==1.26.0\nnew_pkg @ file:///wheels/new_pkg-0.1-py3-none-any.whl\n"
    "-e git+https://x/y.git@def#egg=mylib\n"
)


def snapshotter(partition: Partition, freeze: str) -> Snapshotter:
    return Snapshotter(
        partition,
        max_bytes=8 << 20,
        reference_bytes=4 << 20,
        freeze=FreezeCache(lambda argv: freeze),
    )


def record(job_id: str, snapshot: JobSnapshot | None, **fields: object) -> Job:
    spec = JobSpec(name="t", command=["train.py"], workdir="proj", **fields.pop("spec", {}))  # type: ignore[arg-type]
    values: dict[str, object] = {
        "id": job_id,
        "name": "t",
        "user": "alice",
        "orchestrator": "local",
        "state": JobState.SUCCEEDED,
        "created": 100.0,
        "started": 110.0,
        "ended": 150.0,
        "exit_code": 0,
        "spec": spec,
        "snapshot": snapshot,
        **fields,
    }
    return Job.model_validate(values)


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, Job]:
    partition = Partition(tmp_path / "part")
    partition.ensure()
    work = partition.root / "proj"
    work.mkdir()
    (work / "run.sh").write_text("echo one\n")
    (work / "run.sh").chmod(0o755)
    (work / "big.txt").write_text("x" * (300 * 1024))
    (work / "blob.bin").write_bytes(b"\0\1old")
    (work / "gone.py").write_text("print('removed in b')\n")
    a = snapshotter(partition, FREEZE_A).take("a-1", work, spec={}, python="sh")
    (work / "run.sh").write_text("echo two\n")
    (work / "big.txt").write_text("y" * (300 * 1024))
    (work / "blob.bin").write_bytes(b"\0\1new")
    (work / "gone.py").unlink()
    (work / "new.py").write_text("print('added in b')\n")
    b = snapshotter(partition, FREEZE_B).take("b-2", work, spec={}, python="sh")
    return {
        "a-1": record("a-1", a),
        "b-2": record("b-2", b, spec={"nodes": 2, "env": {"LR": "2e-4"}}),
        "old-3": record("old-3", None, state=JobState.RUNNING, ended=None, exit_code=None),
    }


def comparer(jobs: dict[str, Job], tmp_path: Path) -> JobComparer:
    def job(job_id: str) -> Job:
        if job_id not in jobs:
            raise NotFound(f"no job '{job_id}' on this cluster", field="id")
        return jobs[job_id]

    def metrics(job_id: str) -> JobMetrics:
        if job_id == "b-2":
            raise NotConnected("job 'b-2' belongs to the slurm cluster 'other'", field="id")
        points = [MetricPoint(step=s, value=v, timestamp=1.0) for s, v in ((1, 2.0), (3, 0.5))]
        return JobMetrics(metrics={"loss": points})

    snapshots = snapshotter(Partition(tmp_path / "part"), "")
    return JobComparer(job, metrics, snapshots, clock=lambda: 170.0)


def test_freeze_lines_by_normalized_name() -> None:
    found = freeze_packages(FREEZE_B + "# a comment\n\nplain-name\n")
    assert found["numpy"] == ("NumPy", "1.26.0")
    assert found["new-pkg"][1].startswith("file:///wheels/")
    assert found["mylib"] == ("mylib", "-e git+https://x/y.git@def#egg=mylib")
    assert found["plain-name"] == ("plain-name", "plain-name")


def test_the_diff_of_two_snapshots(jobs: dict[str, Job], tmp_path: Path) -> None:
    diff = comparer(jobs, tmp_path).diff("a-1", "b-2")
    assert [(c.field, c.a, c.b) for c in diff.spec] == [
        ("env.LR", None, "2e-4"),
        ("nodes", 1, 2),
    ]
    files = {f.path: f for f in diff.code.files}
    assert {p: f.status for p, f in files.items()} == {
        "big.txt": "changed",
        "blob.bin": "changed",
        "gone.py": "removed",
        "new.py": "added",
        "run.sh": "changed",
    }
    assert files["big.txt"].diff is None and "over 256 KiB" in (files["big.txt"].note or "")
    assert files["blob.bin"].diff is None and files["blob.bin"].note == "binary"
    assert "-echo one\n+echo two\n" in (files["run.sh"].diff or "")  # an executable's object
    assert "+print('added in b')" in (files["new.py"].diff or "")
    assert "-print('removed in b')" in (files["gone.py"].diff or "")
    assert diff.code.a and diff.code.a.commit is None and diff.code.a.dirty is False

    environment = diff.environment
    assert environment.same is False and environment.a_sha256 != environment.b_sha256
    assert [(p.name, p.status, p.a, p.b) for p in environment.packages] == [
        (
            "mylib",
            "changed",
            "-e git+https://x/y.git@abc#egg=mylib",
            "-e git+https://x/y.git@def#egg=mylib",
        ),
        ("new_pkg", "added", None, "file:///wheels/new_pkg-0.1-py3-none-any.whl"),
        ("old-pkg", "removed", "1.0", None),
        ("torch", "changed", "2.1.0", "2.2.0"),
    ]
    assert diff.notes == []


def test_a_job_without_a_snapshot_compares_on_its_spec(
    jobs: dict[str, Job], tmp_path: Path
) -> None:
    compare = comparer(jobs, tmp_path)
    diff = compare.diff("a-1", "old-3")
    assert diff.spec == [] and diff.configs == [] and diff.code.files == []
    assert diff.code.a is not None and diff.code.b is None
    assert diff.environment.same is False and diff.environment.b_sha256 is None
    assert diff.notes == [
        "job old-3 has no snapshot (it was submitted before snapshots): its code, configs and "
        "environment are not compared"
    ]
    with pytest.raises(NotFound, match="no-such"):
        compare.diff("a-1", "no-such")


def test_compare_side_by_side(jobs: dict[str, Job], tmp_path: Path) -> None:
    found = comparer(jobs, tmp_path).compare(["a-1", "b-2", " old-3 ", ""])
    assert [j.id for j in found.jobs] == ["a-1", "b-2", "old-3"]
    assert found.differing == ["env.LR", "nodes"]
    assert [j.values for j in found.jobs] == [
        {"env.LR": None, "nodes": 1},
        {"env.LR": "2e-4", "nodes": 2},
        {"env.LR": None, "nodes": 1},
    ]
    a, b, old = found.jobs
    assert a.final_metrics["loss"].step == 3 and a.final_metrics["loss"].value == 0.5
    assert b.final_metrics == {} and "slurm cluster 'other'" in (b.metrics_message or "")
    assert (a.duration, old.duration) == (40.0, 60.0)  # running: until now (the clock)
    assert found.metrics == ["loss"]
    assert found.notes == [
        "job old-3 has no snapshot (it was submitted before snapshots): its config values are "
        "not compared"
    ]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["a-1"], "needs 2 to 10 job ids (got 1)"),
        ([f"j-{i}" for i in range(11)], "at most 10 jobs at once (got 11)"),
        (["a-1", "a-1"], "job ids named twice: a-1"),
    ],
)
def test_compare_refuses_bad_id_lists(
    jobs: dict[str, Job], tmp_path: Path, ids: list[str], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=re.escape(message)) as caught:
        comparer(jobs, tmp_path).compare(ids)
    assert caught.value.field == "ids"


def test_the_text_a_person_reads(jobs: dict[str, Job], tmp_path: Path) -> None:
    from jupyter_hyperpod.cli.compare_verb import comparison_table, diff_text

    compare = comparer(jobs, tmp_path)
    lines = diff_text(compare.diff("a-1", "b-2")).splitlines()
    assert lines[:4] == ["diff a-1 b-2", "", "spec:", '  env.LR: (absent) -> "2e-4"']
    assert "  3 changed, 1 added, 1 removed, 0 the same" in lines
    assert "  changed blob.bin (binary)" in lines and "    +echo two" in lines
    assert "environment: 4 packages differ" in lines
    assert "  ~ torch 2.1.0 -> 2.2.0" in lines and "  - old-pkg 1.0" in lines
    assert "  + new_pkg file:///wheels/new_pkg-0.1-py3-none-any.whl" in lines
    assert "notes:" in diff_text(compare.diff("a-1", "old-3"))

    table = comparison_table(compare.compare(["a-1", "b-2", "old-3"])).text(width=200)
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:] if line.strip()}
    assert rows["state"] == ["SUCCEEDED", "SUCCEEDED", "RUNNING"]
    assert rows["duration"] == ["40s", "40s", "1m00s"]
    assert rows["nodes"] == ["1", "2", "1"]
    assert rows["loss"] == ["0.5", "(step", "3)", "0.5", "(step", "3)"]
    assert "no metrics for b-2" in table


def test_many_changed_files_are_counted_past_the_cap(
    jobs: dict[str, Job], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compare_module, "MAX_FILE_CHANGES", 2)
    diff = comparer(jobs, tmp_path).diff("a-1", "b-2")
    assert [f.path for f in diff.code.files] == ["big.txt", "blob.bin"]
    assert "3 more files differ than the 2 listed" in diff.notes


def test_a_manifest_edited_by_hand_is_no_error(jobs: dict[str, Job], tmp_path: Path) -> None:
    manifest = tmp_path / "part" / ".hyperpod" / "snapshots" / "b-2" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["files"]["evil.py"] = {"sha256": "../../../etc/passwd", "size": 10, "x": False}
    data["files"]["odd.py"] = {"sha256": "ab", "size": "big"}
    manifest.write_text(json.dumps(data))
    diff = comparer(jobs, tmp_path).diff("a-1", "b-2")
    evil = next(f for f in diff.code.files if f.path == "evil.py")
    assert evil.diff is None and evil.note == "its stored copy cannot be read"
    assert "odd.py" not in {f.path for f in diff.code.files}

    data["configs"] = {"config.yaml": "../../secret"}
    manifest.write_text(json.dumps(data))
    diff = comparer(jobs, tmp_path).diff("a-1", "b-2")
    assert diff.code.files == [] and diff.notes == [
        "job b-2 has no snapshot (its snapshot was removed or cannot be read): its code, "
        "configs and environment are not compared"
    ]
