"""Snapshots at submit (#24 item 1), on real files and a real git: what is copied, referenced,
deduplicated, refused and removed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from jupyter_hyperpod.core.errors import InvalidRequest
from jupyter_hyperpod.core.freeze import FreezeCache, run_freeze
from jupyter_hyperpod.core.partition import Partition
from jupyter_hyperpod.core.snapshot import Snapshotter, run_from_snapshot

MIB = 1 << 20


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@e", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def snapshotter(root: Path, **limits: int) -> Snapshotter:
    partition = Partition(root)
    partition.ensure()
    return Snapshotter(
        partition,
        max_bytes=limits.get("max_bytes", 10 * MIB),
        reference_bytes=limits.get("reference_bytes", 4 * MIB),
        freeze=FreezeCache(lambda argv: "pkg==1.0\n"),
    )


def project(root: Path) -> Path:
    work = root / "proj"
    (work / "src").mkdir(parents=True)
    (work / "train.py").write_text("print('v1')\n")
    (work / "src" / "lib.py").write_text("X = 1\n")
    (work / "run.sh").write_text("echo hi\n")
    (work / "run.sh").chmod(0o755)
    return work


def test_git_workdir_keeps_commit_diff_and_untracked_files(tmp_path: Path) -> None:
    snap = snapshotter(tmp_path)
    work = project(tmp_path)
    (work / ".gitignore").write_text("outputs/\n")
    git(work, "init", "-q")
    git(work, "add", ".")
    git(work, "commit", "-qm", "first")
    commit = git(work, "rev-parse", "HEAD").strip()
    (work / "train.py").write_text("print('v2')\n")  # uncommitted
    (work / "notes.py").write_text("N = 1\n")  # untracked, not ignored
    (work / "outputs").mkdir()
    (work / "outputs" / "ckpt.bin").write_bytes(b"x" * 100)  # ignored

    shot = snap.take("job-1", work.resolve(), spec={"name": "job"}, python=sys.executable)

    assert shot.commit == commit and shot.dirty
    tree = tmp_path / shot.tree
    assert (tree / "train.py").read_text() == "print('v2')\n"
    assert (tree / "notes.py").exists() and (tree / "src" / "lib.py").exists()
    assert os.access(tree / "run.sh", os.X_OK)
    assert (tree / "outputs").is_symlink()  # ignored: the live directory, not a copy
    assert shot.files == 5  # .gitignore, notes.py, run.sh, src/lib.py, train.py
    assert shot.bytes == sum((work / p).stat().st_size for p in snap.manifest("job-1")["files"])
    assert shot.diff_sha256 and "+print('v2')" in snap.text(shot.diff_sha256)
    assert shot.freeze_sha256 and snap.text(shot.freeze_sha256) == "pkg==1.0\n"

    # An edit after submit (the job PENDING) changes nothing the job runs.
    (work / "train.py").write_text("print('v3')\n")
    (work / "src" / "lib.py").unlink()
    assert (tree / "train.py").read_text() == "print('v2')\n"
    assert (tree / "src" / "lib.py").read_text() == "X = 1\n"


def test_large_model_directory_is_referenced_not_copied(tmp_path: Path) -> None:
    snap = snapshotter(tmp_path)
    work = project(tmp_path)
    model = work / "models" / "base"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    with (model / "model.safetensors").open("wb") as handle:
        handle.truncate(30 * (1 << 30))  # sparse: 30 GiB that cost nothing
    shot = snap.take("job-1", work.resolve(), spec={})
    assert [ref.path for ref in shot.referenced] == ["proj/models/base"]
    assert shot.referenced[0].size == 30 * (1 << 30) + 2
    assert shot.bytes < MIB
    tree = tmp_path / shot.tree
    assert (tree / "models" / "base").is_symlink()
    assert (tree / "models" / "base" / "config.json").read_text() == "{}"


def test_over_the_limit_is_refused_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    snap = snapshotter(tmp_path, max_bytes=MIB, reference_bytes=8 * MIB)
    work = project(tmp_path)
    (work / "blob.bin").write_bytes(b"y" * (2 * MIB))
    with pytest.raises(InvalidRequest) as error:
        snap.take("job-1", work.resolve(), spec={})
    message = error.value.message
    assert "over the limit of 1.0 MiB" in message and "blob.bin (2.0 MiB)" in message
    assert error.value.status == 400
    assert not snap.root.exists() or not any(snap.root.rglob("*"))


def test_objects_are_shared_and_removed_with_the_last_snapshot(tmp_path: Path) -> None:
    snap = snapshotter(tmp_path)
    work = project(tmp_path).resolve()
    snap.take("job-1", work, spec={})
    objects = sorted(p.name for p in (snap.root / "objects").rglob("*") if p.is_file())
    snap.take("job-2", work, spec={})
    assert sorted(p.name for p in (snap.root / "objects").rglob("*") if p.is_file()) == objects
    assert snap.remove("job-1") == 0
    assert (snap.tree("job-2") / "train.py").read_text() == "print('v1')\n"
    assert snap.remove("job-2") == len(objects) == 3
    assert not (snap.root / "job-2").exists()


def test_config_is_resolved_with_env_and_overrides(tmp_path: Path) -> None:
    snap = snapshotter(tmp_path)
    work = project(tmp_path)
    (work / "args.yaml").write_text(
        'mlflow_uri: "${MLFLOW_ARN}"\noutput_dir: "${OUT:-./out}"\nlearning_rate: 1e-4\n'
    )
    command = ["python", "-m", "x", "train", "--config", "args.yaml", "--set", "learning_rate=2e-4"]
    shot = snap.take(
        "job-1", work.resolve(), spec={}, command=command, env={"MLFLOW_ARN": "arn:aws:x"}
    )
    assert shot.configs == ["args.yaml"]
    text = snap.text(snap.manifest("job-1")["configs"]["args.yaml"])
    assert "mlflow_uri: arn:aws:x" in text and "output_dir: ./out" in text
    assert "learning_rate: 2e-4" in text  # --set wins (coerced by the training module)


def test_pip_freeze_runs_once_per_interpreter_and_mtime(tmp_path: Path) -> None:
    calls: list[Sequence[str]] = []

    def counted(argv: Sequence[str]) -> str:
        calls.append(argv)
        return run_freeze(argv)

    cache = FreezeCache(counted)
    first = cache.freeze(sys.executable)
    # This venv's packages (the project's editable install), not its base interpreter's.
    # pip writes the name "jupyter-hyperpod" for a checkout without a remote and
    # "#egg=jupyter_hyperpod" for a clone (CI's), so both spellings count.
    assert first is not None and re.search(r"jupyter[-_]hyperpod", first), first[:500]
    assert calls[0][0] == os.path.abspath(sys.executable)
    assert cache.freeze(sys.executable) == first and len(calls) == 1
    assert cache.freeze("no-such-python-here") is None


def test_an_install_into_the_environment_runs_pip_freeze_again(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    calls: list[Sequence[str]] = []
    cache = FreezeCache(lambda argv: calls.append(argv) or f"pkg=={len(calls)}\n")
    python = str(venv / "bin" / "python")
    assert cache.freeze(python) == "pkg==1\n" and cache.freeze(python) == "pkg==1\n"
    (site / "newpkg-1.0.dist-info").mkdir()  # what pip install does to site-packages
    os.utime(site, ns=(site.stat().st_mtime_ns + 10**9,) * 2)
    assert cache.freeze(python) == "pkg==2\n"
    assert [argv[0] for argv in calls] == [python, python]  # the venv's, not the base's


def test_the_program_and_its_code_and_config_arguments_run_from_the_tree(tmp_path: Path) -> None:
    work = tmp_path / "fsx" / "project"
    (work / "conf").mkdir(parents=True)
    (work / "train.py").write_text("print(1)\n")
    (work / "run").write_text("#!/bin/sh\n")
    (work / "conf" / "args.yaml").write_text("lr: 1\n")
    (work / "results.json").write_text("{}")  # the last run's output: an argument, not code
    snaps = snapshotter(tmp_path / "fsx", reference_bytes=4 * MIB)
    snap = snaps.take("j1", work, spec={}, command=["train.py"])
    tree = tmp_path / "fsx" / snap.tree
    shown = "/cluster/fsx/" + snap.tree

    argv = run_from_snapshot(
        ["train.py", "--config", "conf/args.yaml", "--out=results.json", "./conf/args.yaml"],
        tree,
        shown,
    )
    assert argv == [
        f"{shown}/train.py",
        "--config",
        f"{shown}/conf/args.yaml",
        "--out=results.json",
        f"{shown}/conf/args.yaml",
    ]
    assert run_from_snapshot(["run", "--config=conf/args.yaml"], tree, shown) == [
        f"{shown}/run",
        f"--config={shown}/conf/args.yaml",
    ]
    # Nothing outside the tree, absolute, missing, or reached through a link to a live entry.
    (work / "left_out.py").write_text("")
    (tree / "left_out.py").symlink_to(work / "left_out.py")  # as take links a left-out entry
    outside = ["../x.py", "/abs/train.py", "missing.py", "-m", "pkg.mod", "left_out.py"]
    assert run_from_snapshot(["python", *outside], tree, shown) == ["python", *outside]


def test_an_unchanged_file_is_not_read_again_and_a_rewrite_is(tmp_path: Path) -> None:
    work = tmp_path / "fsx" / "w"
    work.mkdir(parents=True)
    old = work / "old.py"
    old.write_text("print('a')\n")
    os.utime(old, (1_700_000_000, 1_700_000_000))  # long untouched: its stat is trusted
    fresh = work / "fresh.py"
    fresh.write_text("print('a')\n")
    snaps = snapshotter(tmp_path / "fsx")
    snaps.take("j1", work, spec={})
    reads: list[str] = []
    opened = Path.open

    def counting(self: Path, *args: object, **kwargs: object) -> object:
        reads.append(self.name)
        return opened(self, *args, **kwargs)  # type: ignore[call-overload]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "open", counting)
        snaps.take("j2", work, spec={})
    assert "old.py" not in reads and "fresh.py" in reads  # a just-written file is read again
    fresh.write_text("print('b')\n")  # same size, maybe the same mtime tick
    snaps.take("j3", work, spec={})
    assert (snaps.tree("j3") / "fresh.py").read_text() == "print('b')\n"
