"""The sbatch script: #SBATCH header, quoting of every user string, launchers, HyperPod options."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.backends.slurm.rank_runs import read_rank_runs
from jupyter_hyperpod.backends.slurm.script import ScriptOptions, render_script
from jupyter_hyperpod.core.backend import Launch
from jupyter_hyperpod.core.errors import InvalidRequest
from jupyter_hyperpod.core.models import JobSpec
from jupyter_hyperpod.core.settings import HyperPodSettings

EVIL = "$(touch /tmp/hyperpod-pwned) `id` ; rm -rf / 'quoted' \"double\" \\back"


def launch(spec: JobSpec, job_dir: str = "/fsx/shared/.hyperpod/jobs/j-1") -> Launch:
    return Launch(
        job_id="j-1",
        spec=spec,
        user="alice",
        command=list(spec.command),
        workdir="/fsx/shared/my project",
        job_dir=job_dir,
        job_dir_local=Path(job_dir),
        env={**spec.env, "HYPERPOD_JOB_ID": "j-1"},
    )


def header(text: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")
    ]


def test_header_says_what_a_person_would_write() -> None:
    spec = JobSpec(
        name="fine-tune",
        command=["train.py", "--epochs", "3"],
        nodes=2,
        procs_per_node=4,
        gpus_per_node=4,
        queue="gpu",
        time_limit_minutes=90,
        launcher="plain",
    )
    text, warnings = render_script(launch(spec), ScriptOptions(extra_sbatch=["--account=ml"]))
    assert header(text) == [
        "--job-name=fine-tune",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--gpus-per-node=4",
        "--partition=gpu",
        "--time=90",
        "--chdir=/fsx/shared/.hyperpod/jobs/j-1",
        "--output=/fsx/shared/.hyperpod/jobs/j-1/slurm-%j.out",
        "--error=/fsx/shared/.hyperpod/jobs/j-1/slurm-%j.out",
        "--account=ml",
    ]
    assert warnings == []
    assert "cd '/fsx/shared/my project' || exit 1" in text
    assert "export HYPERPOD_JOB_ID=j-1" in text
    assert (
        'srun --kill-on-bad-exit=1 \\\n    bash -c "$RANK_SHELL" rank \\\n'
        "    python3 train.py --epochs 3" in text
    )
    assert "--auto-resume" not in text


def test_torchrun_runs_once_per_node_with_slurms_rendezvous() -> None:
    spec = JobSpec(
        name="ddp", command=["train.py"], nodes=2, procs_per_node=2, gpus_per_node=2, max_retries=2
    )
    text, _ = render_script(launch(spec), ScriptOptions(gpu_option="gres", partition="dev"))
    assert "--ntasks-per-node=1" in header(text) and "--cpus-per-task=2" in header(
        text
    )  # 1 per rank
    assert "--gres=gpu:2" in header(text) and "--partition=dev" in header(text)
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in text
    assert "MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))" in text
    assert 'bash -c \'exec "$0" --node-rank="$SLURM_NODEID" "$@"\'' in text
    assert "torchrun --nnodes=2 --nproc-per-node=2 --max-restarts=2" in text
    assert '--master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT" --no-python' in text


def test_hyperpod_nodes_get_auto_resume(tmp_path: Path) -> None:
    marker = tmp_path / "sagemaker_cluster"
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user="alice")
    backend = SlurmOrchestrator(settings=settings, hyperpod_marker=str(marker))
    spec = JobSpec(name="a", command=["run.sh"], auto_resume=True)
    rendered = backend.render(launch(spec))
    assert "--auto-resume" not in rendered.text
    assert any("HyperPod" in warning for warning in rendered.warnings)
    marker.mkdir()
    rendered = backend.render(launch(spec))
    assert "srun --kill-on-bad-exit=1 --auto-resume=1" in rendered.text
    assert rendered.format == "sbatch" and rendered.language == "shell"
    backend.auto_resume = False
    assert "--auto-resume=1" in backend.render(launch(spec)).text  # the spec asked for it
    assert (
        "--auto-resume"
        not in backend.render(launch(spec.model_copy(update={"auto_resume": False}))).text
    )


def test_bad_sbatch_values_are_refused() -> None:
    spec = JobSpec(name="a", command=["x"])
    with pytest.raises(InvalidRequest):
        render_script(launch(spec), ScriptOptions(extra_sbatch=["account=ml"]))
    with pytest.raises(InvalidRequest):
        render_script(
            launch(spec.model_copy(update={"queue": "gpu\n#SBATCH --uid=0"})), ScriptOptions()
        )
    text, _ = render_script(launch(spec, job_dir="/fsx/a b/100%/j-1"), ScriptOptions())
    assert '--output="/fsx/a b/100%%/j-1/slurm-%j.out"' in header(text)
    assert '--chdir="/fsx/a b/100%/j-1"' in header(text)


def fake_tools(bin_dir: Path, record: Path) -> None:
    """srun and scontrol that record what they were given (srun then runs each rank's shell)."""
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, subprocess, sys\n"
        "args = sys.argv[1:]\n"
        "opts = [a for a in args if a.startswith('--')][:2]\n"
        "program = args[len(opts):]\n"
        f"line = json.dumps({{'srun': opts, 'program': program}})\n"
        f"open({str(record)!r}, 'a').write(line + '\\n')\n"
        "for rank in range(2):\n"
        "    env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),\n"
        "               SLURM_NTASKS='2', SLURM_NODEID='0')\n"
        "    subprocess.run(program, env=env, check=False)\n"
    )
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node7\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755 | stat.S_IXUSR)


def test_every_user_string_reaches_the_program_unchanged(tmp_path: Path) -> None:
    """Run the rendered script with stand-in srun/scontrol: arguments and env arrive verbatim."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    record = tmp_path / "record.jsonl"
    fake_tools(tmp_path / "bin", record)
    probe = workdir / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'EVIL']\n"
        "seen = {'argv': sys.argv[1:], 'cwd': os.getcwd()}\n"
        "seen.update({k: os.environ.get(k) for k in keys})\n"
        "print(json.dumps(seen))\n"
    )
    spec = JobSpec(
        name="quote",
        command=["probe.py", EVIL, "two words"],
        procs_per_node=2,
        launcher="plain",
        env={"EVIL": EVIL},
    )
    the_launch = launch(spec, job_dir=str(job_dir))
    the_launch.workdir = str(workdir)
    text, _ = render_script(the_launch, ScriptOptions(python="python3"))
    script = job_dir / "job.sbatch"
    script.write_text(text)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node7",
        "SLURM_JOB_NUM_NODES": "1",
    }
    started = time.time()
    done = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not Path("/tmp/hyperpod-pwned").exists()
    rank0 = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    rank1 = json.loads((job_dir / "rank-1.log").read_text())
    for rank, seen in enumerate((rank0, rank1)):
        assert seen["argv"] == [EVIL, "two words"]
        assert seen["EVIL"] == EVIL
        assert seen["cwd"] == str(workdir)
        assert (seen["RANK"], seen["LOCAL_RANK"], seen["WORLD_SIZE"]) == (str(rank), str(rank), "2")
        assert (seen["MASTER_ADDR"], seen["MASTER_PORT"]) == ("node7", str(20000 + 42))
    assert (job_dir / "exit-code").read_text().strip() == "0"
    assert json.loads(record.read_text())["srun"] == ["--kill-on-bad-exit=1"]
    # Each rank's own run (rank_runs.py): one start, then exit code 0, within this test.
    runs = read_rank_runs(str(job_dir), world_size=2)
    assert sorted(runs) == [0, 1]
    for run in runs.values():
        end = run.ends[0]
        assert len(run.starts) == 1 and end is not None and end.code == 0
        assert started <= run.starts[0] <= end.ended <= time.time()


def test_configuration_reaches_the_script(tmp_path: Path) -> None:
    """`c.SlurmOrchestrator.*` in the server's config: default partition, extra #SBATCH lines."""
    from traitlets.config import Config

    config = Config()
    config.SlurmOrchestrator.partition = "p5"
    config.SlurmOrchestrator.sbatch_extra_args = ["--account=ml", "--exclusive"]
    config.SlurmOrchestrator.gpu_option = "gres"
    config.SlurmOrchestrator.torchrun = "/opt/conda/bin/torchrun"
    config.SlurmOrchestrator.cpus_per_rank = 4
    settings = HyperPodSettings(
        config=config,
        shared_fs_root=str(tmp_path),
        user="alice",
        cluster_python="/opt/conda/bin/python",
    )
    backend = SlurmOrchestrator(settings=settings)
    spec = JobSpec(name="a", command=["t.py"], nodes=2, procs_per_node=8, gpus_per_node=8)
    text = backend.render(launch(spec)).text
    wanted = {"--partition=p5", "--account=ml", "--exclusive", "--gres=gpu:8", "--cpus-per-task=32"}
    assert wanted <= set(header(text))
    plain = backend.render(launch(spec.model_copy(update={"launcher": "plain"}))).text
    assert {"--ntasks-per-node=8", "--cpus-per-task=4"} <= set(header(plain))
    assert "/opt/conda/bin/torchrun --nnodes=2" in text and "/opt/conda/bin/python t.py" in text


def test_excluded_nodes_are_an_exclude_option() -> None:
    spec = JobSpec(name="again", command=["train.py"], nodes=2, exclude_nodes=["node-3", "node-7"])
    text, _ = render_script(launch(spec), ScriptOptions())
    assert "--exclude=node-3,node-7" in header(text)
