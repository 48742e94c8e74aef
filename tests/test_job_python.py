"""The jobs' interpreter: local jobs run with the server's own, Slurm jobs with `cluster_python`,
and `doctor` checks the one in use (issue: templates ran whatever `python3` was first on PATH)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from jupyter_hyperpod.core.diagnose import check_job_python

from .helpers import Api


def test_local_jobs_use_the_servers_interpreter() -> None:
    result = check_job_python(SimpleNamespace(cluster_python="python3"), "server")
    assert result.status == "pass" and sys.executable in result.detail


def test_a_cluster_python_without_the_training_module_is_a_warning(tmp_path: Path) -> None:
    bare = tmp_path / "python-without-torch"
    bare.write_text("#!/bin/sh\necho torch transformers peft\nexit 3\n")
    bare.chmod(0o755)
    result = check_job_python(SimpleNamespace(cluster_python=str(bare)), "cluster_python")
    assert result.status == "warn"
    assert "torch transformers peft" in result.detail and "pip install" in result.fix


def test_a_missing_cluster_python_fails_with_the_setting_to_change() -> None:
    result = check_job_python(SimpleNamespace(cluster_python="/nowhere/python9"), "cluster_python")
    assert result.status == "fail" and "cluster_python" in result.fix


def test_kubernetes_says_how_to_check_the_image() -> None:
    result = check_job_python(SimpleNamespace(cluster_python="python3"), "image")
    assert result.status == "skip" and "kubectl run" in result.fix


async def test_the_servers_doctor_reports_the_job_interpreter(api: Api, partition: Path) -> None:
    reply = await api.get("diagnose")
    assert reply.status == 200, reply.body
    checks = {c["name"]: c for c in reply.body["checks"]}
    assert checks["job interpreter"]["status"] == "pass", checks["job interpreter"]
    assert sys.executable in checks["job interpreter"]["detail"]
    # and a script job really runs with it
    (partition / "which.py").write_text("import sys; print(sys.executable)\n")
    job = await api.submit({"name": "which", "command": ["which.py"]})
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"})
    text = (await api.get(f"jobs/{job['id']}/logs", rank=0, tail=5)).body["text"]
    assert done["state"] == "SUCCEEDED" and sys.executable in text, text
