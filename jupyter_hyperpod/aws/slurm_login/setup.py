"""`connect --slurm`: the steps that make this machine a login node of a HyperPod Slurm cluster.
Each failure names its step and how to fix it; where root is needed and this process has none
(not root, no passwordless sudo), the one command to run with sudo."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import AwsDenied, Forbidden, HyperPodError
from . import slurmconf
from .controllers import SlurmCluster, find_controllers
from .node import LoginPaths, Node, missing_clients_error
from .runner import Runner
from .ssm import SessionManager, fetch_controller_facts


class StepFailed(Exception):
    """Carries the step's name; raised as the original error's type (its HTTP status)."""


def step_error(step: str, error: HyperPodError, fix: str = "") -> HyperPodError:
    message = f"step '{step}' failed: {error.message}"
    if fix:
        message += f" Fix: {fix}"
    kind = type(error)
    if kind is Forbidden and any(w in error.message for w in ("AWS denied", "AWS credentials")):
        kind = AwsDenied  # AWS refused (not Jupyter, nor this machine's root)
    failed = kind(message, field=error.field)
    failed.step = step  # type: ignore[attr-defined]
    return failed


def privilege(runner: Runner, euid: int | None = None) -> list[str] | None:
    """How to run a command as root: [] when root, `sudo -n` when it needs no password."""
    if (os.geteuid() if euid is None else euid) == 0:
        return []
    done = runner.run(["sudo", "-n", "true"], timeout=15)
    return ["sudo", "-n"] if done.returncode == 0 else None


def rerun_command(
    cluster: str,
    *,
    region: str | None,
    profile: str | None = None,
    controller_group: str | None = None,
    paths: LoginPaths | None = None,
) -> str:
    """The one command that does the setup as root (then connect again, as yourself)."""
    argv = [sys.executable, "-m", "jupyter_hyperpod.aws", "slurm-login", cluster]
    for option, value in (
        ("--region", region),
        ("--profile", profile),
        ("--controller-group", controller_group),
    ):
        if value:
            argv += [option, value]
    if paths is not None and paths.conf != LoginPaths().conf:
        argv += ["--slurm-conf", paths.conf]
    return "sudo -E " + shlex.join(argv)


@dataclass
class Report:
    steps: list[dict[str, str]] = field(default_factory=list)

    def done(self, step: str, detail: str) -> None:
        self.steps.append({"step": step, "status": "done", "detail": detail})


def _hosts(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("SlurmctldHost=")]


def already_connected(node: Node, cluster: SlurmCluster, report: Report) -> bool:
    """slurm.conf is ours, names these controllers, and munge and sinfo work: nothing to do."""
    try:
        text = Path(node.paths.conf).read_text(encoding="utf-8")
    except OSError:
        return False
    expected = _hosts(slurmconf.render(cluster.name or "x", cluster.controllers))
    if not text.startswith(slurmconf.MARKER) or _hosts(text) != expected:
        return False
    try:
        munge = node.check_munge()
        sinfo = node.check_sinfo()
    except HyperPodError:
        return False
    report.done("login node", f"already set up ({node.paths.conf}): {munge}; {sinfo}")
    return True


def connect_slurm(
    cluster: str,
    *,
    sagemaker: Any,
    ssm: SessionManager,
    runner: Runner,
    region: str | None,
    profile: str | None = None,
    controller_group: str | None = None,
    paths: LoginPaths | None = None,
    attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
    euid: int | None = None,
) -> dict[str, Any]:
    """Make this machine a login node of `cluster`; what each step did, or the failing step."""
    paths = paths or LoginPaths()
    report = Report()
    node = Node(runner, paths)
    sudo = rerun_command(
        cluster, region=region, profile=profile, controller_group=controller_group, paths=paths
    )

    missing = node.missing_clients()
    if missing:
        raise step_error("slurm client", missing_clients_error(missing))
    report.done("slurm client", "sinfo, sbatch, munge and munged are installed")

    try:
        found = find_controllers(sagemaker, cluster, group=controller_group)
    except HyperPodError as exc:
        raise step_error(
            "controllers",
            exc,
            "add the IAM action it names to this role's policy"
            if isinstance(exc, Forbidden)
            else "",
        ) from exc
    report.done(
        "controllers",
        ", ".join(f"{c.hostname} ({c.ip}, {c.instance_id}, {c.status})" for c in found.controllers),
    )
    result: dict[str, Any] = {
        "hyperpod_cluster": found.name,
        "hyperpod_cluster_arn": found.arn,
        "controllers": [
            {"instance_id": c.instance_id, "host": c.hostname, "ip": c.ip, "status": c.status}
            for c in found.controllers
        ],
        "slurm_conf": paths.conf,
        "steps": report.steps,
        "root_command": sudo,
    }

    if already_connected(node, found, report):
        result["cluster_name"] = found.name
        return result

    as_root = privilege(runner, euid)
    if as_root is None:
        raise step_error(
            "root",
            Forbidden(
                "writing slurm.conf and the munge key and starting munged need root, and this "
                "process is not root and has no passwordless sudo"
            ),
            f"run once: {sudo}   then connect again",
        )
    node.as_root = as_root
    report.done("root", "running as root" if not as_root else "through sudo -n")

    primary = found.controllers[0]
    target = primary.ssm_target(found.cluster_id)
    try:
        facts, sessions = fetch_controller_facts(ssm, target, attempts=attempts, sleep=sleep)
    except HyperPodError as exc:
        fix = ""
        if isinstance(exc, Forbidden) and "ssm:" in exc.message:
            fix = (
                "allow ssm:StartSession on arn:aws:sagemaker:<region>:<account>:cluster/"
                f"{found.cluster_id} (and ssm:TerminateSession) for this role"
            )
        raise step_error("munge key", exc, fix) from exc
    result["ssm_sessions"] = sessions
    report.done(
        "munge key",
        f"{len(facts.key)} bytes from {primary.instance_id} over SSM ({target}), sha256 checked "
        f"on both ends, in {sessions} session(s)",
    )

    name = facts.cluster_name or found.name
    result["cluster_name"] = name
    try:
        text = slurmconf.render(
            name, found.controllers, munge_socket=paths.munge_socket, slurm_user=paths.slurm_user
        )
        node.install_file(text.encode(), paths.conf)
    except HyperPodError as exc:
        raise step_error("slurm.conf", exc) from exc
    report.done(
        "slurm.conf",
        f"{paths.conf}: ClusterName={name.lower()}, {len(found.controllers)} SlurmctldHost",
    )

    try:
        node.stop_munged()  # ids change under a running munged otherwise
        munge_ids = node.align(paths.munge_user, facts.munge_uid, facts.munge_gid)
        slurm_ids = node.align(paths.slurm_user, facts.slurm_uid, facts.slurm_gid)
    except HyperPodError as exc:
        raise step_error("munge and slurm ids", exc) from exc
    report.done("munge and slurm ids", f"{munge_ids}; {slurm_ids}")

    try:
        node.install_key(facts.key)
    except HyperPodError as exc:
        raise step_error("install key", exc) from exc
    report.done("install key", f"{paths.munge_key}, owner {paths.munge_user}, mode 0400")

    try:
        started = node.start_munged()
        report.done("munged", f"{started} ({paths.munge_socket})")
        report.done("munge check", node.check_munge())
    except HyperPodError as exc:
        raise step_error(
            "munged",
            exc,
            f"read {paths.munge_log}; munged refuses a key or directory others can write",
        ) from exc
    try:
        report.done("sinfo", node.check_sinfo())
    except HyperPodError as exc:
        raise step_error("sinfo", exc) from exc
    return result
