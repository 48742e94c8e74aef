"""What a job writes is the IDE user's: pods run as the partition's owner (securityContext), and on
the local backend in `user` mode, a partition made by `admin partitions create` holds a job's
file that its user's IDE reads and writes and another user cannot open."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.admin.owner import pod_security_context
from jupyter_hyperpod.admin.partitions import PartitionAdmin
from jupyter_hyperpod.backends.kubernetes.manifest import ManifestOptions, build_manifest

from ..kubernetes.conftest import IMAGE, make_launch

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown and setuid need root")
ALICE = (200001, 1001)  # Studio's remapped sagemaker-user
BOB = (200002, 1001)


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template spec in a PyTorchJob or HyperPodPyTorchJob."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "containers" in value:
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(manifest)
    return found


@pytest.mark.parametrize("kind", ["PyTorchJob", "HyperPodPyTorchJob"])
def test_pods_run_as_the_owner_of_the_partition(tmp_path: Path, kind: str) -> None:
    launch = make_launch(tmp_path, nodes=2)
    partition = tmp_path / "Data-Scientist"
    os.chown(partition, *ALICE)
    options = ManifestOptions(
        namespace="default", kind=kind, image=IMAGE, pvc_name="fsx-claim", fs_mount="/data"
    )
    assert all("securityContext" not in pod for pod in pod_specs(build_manifest(launch, options)))
    options.run_as_partition_owner = True
    pods = pod_specs(build_manifest(launch, options))
    assert pods and all(
        pod["securityContext"] == {"runAsUser": 200001, "runAsGroup": 1001, "fsGroup": 1001}
        for pod in pods
    )
    os.chown(partition, 0, 0)  # a root-owned partition never pins pods to uid 0
    assert pod_security_context(launch.job_dir_local) is None
    assert all("securityContext" not in pod for pod in pod_specs(build_manifest(launch, options)))


@pytest.fixture
def world() -> Iterator[Path]:
    """A file system root other uids can reach (pytest's tmp_path is root's only)."""
    base = Path(tempfile.mkdtemp(prefix="hyperpod-run-as-"))
    os.chmod(base, 0o755)
    for name, (uid, gid) in {"home-alice": ALICE, "home-bob": BOB}.items():
        (base / name).mkdir()
        os.chown(base / name, uid, gid)
    (base / "fsx").mkdir()
    os.chmod(base / "fsx", 0o755)
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


def interpreter() -> tuple[str, str]:
    """A Python other uids can run (the venv's may live under root's home) and the path to this
    environment's packages."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/bin:/usr/local/bin")
    packages = sysconfig.get_paths()["purelib"]
    return system or sys.executable, os.pathsep.join([os.getcwd(), packages])


def as_user(user: tuple[int, int], home: Path, code: str) -> subprocess.CompletedProcess[str]:
    python, path = interpreter()
    return subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        user=user[0],
        group=user[1],
        extra_groups=[],
        env={"HOME": str(home), "PATH": os.environ["PATH"], "PYTHONPATH": path},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_jobs_file_is_the_ide_users_and_no_one_elses(world: Path) -> None:
    fs = world / "fsx"
    admin = PartitionAdmin(fs)
    states = admin.inspect(["alice", "bob"])
    admin.apply(admin.plan(states, repair=False), states)
    os.chown(fs / "bob", *BOB)  # bob's own owner (the profile's POSIX user, say)

    # alice's server (local backend, `user` partition) runs as alice, as on Studio; her job writes.
    submit = f"""
        import json, time
        from traitlets.config import Config
        from jupyter_hyperpod.core.service import HyperPodService
        from jupyter_hyperpod.core.settings import HyperPodSettings

        settings = HyperPodSettings(config=Config({{"HyperPodSettings": {{
            "orchestrator": "local", "shared_fs_root": {str(fs)!r}, "partition": "user",
            "user": "alice", "job_store": {str(world / "home-alice" / "jobs.sqlite")!r},
        }}}}))
        service = HyperPodService(settings)
        (service.partition.root / "write.py").write_text(
            "open('result.txt', 'w').write('written by the job\\\\n')\\n"
        )
        job = service.submit({{"name": "writer", "command": ["write.py"]}})
        for _ in range(600):
            job = service.job(job.id)
            if job.state.finished:
                break
            time.sleep(0.1)
        print(json.dumps({{"state": job.state.value, "partition": str(service.partition.root)}}))
        service.close()
    """
    done = as_user(ALICE, world / "home-alice", submit)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == {"state": "SUCCEEDED", "partition": str(fs / "alice")}
    result = fs / "alice" / "result.txt"
    assert (result.stat().st_uid, result.stat().st_gid) == ALICE

    # alice's IDE (another process, same uid) reads and appends to it.
    ide = as_user(
        ALICE,
        world / "home-alice",
        f"p = {str(result)!r}\nprint(open(p).read(), end='')\nopen(p, 'a').write('edited\\n')",
    )
    assert ide.returncode == 0 and ide.stdout == "written by the job\n", ide.stderr
    assert result.read_text() == "written by the job\nedited\n"

    # bob cannot even list alice's partition (0700), nor she his.
    peek = as_user(BOB, world / "home-bob", f"open({str(result)!r}).read()")
    assert peek.returncode != 0 and "PermissionError" in peek.stderr
    peek = as_user(ALICE, world / "home-alice", f"import os; os.listdir({str(fs / 'bob')!r})")
    assert peek.returncode != 0 and "PermissionError" in peek.stderr
