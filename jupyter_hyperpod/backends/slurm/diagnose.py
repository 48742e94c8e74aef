"""The Slurm backend's login-node checks (`SlurmOrchestrator.diagnose`): the client commands,
munge, slurmctld reachable and answering, and the partition jobs go to."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.diagnose import COMMAND_TIMEOUT, CONNECT_TIMEOUT, Check, check, guard
from ...core.errors import HyperPodError
from .commands import parse_controllers

if TYPE_CHECKING:
    from .backend import SlurmOrchestrator

SLURM_COMMANDS = ("sbatch", "sinfo", "squeue", "scancel", "scontrol")
MUNGE_SOCKETS = ("/run/munge/munge.socket.2", "/var/run/munge/munge.socket.2")


def slurm_checks(orchestrator: SlurmOrchestrator) -> list[Check]:
    """The client commands, munge, slurmctld reachable and answering, the partition."""
    commands = orchestrator.commands
    checks: list[Check] = []
    missing = [name for name in SLURM_COMMANDS if not _found(commands.executable(name))]
    if missing:
        checks.append(
            check(
                "Slurm commands",
                "fail",
                f"not found: {', '.join(missing)}",
                "install the Slurm client matching the cluster (apt-get install slurm-client) "
                "or set c.SlurmOrchestrator.bin_dir",
            )
        )
        return checks
    checks.append(
        check(
            "Slurm commands",
            "pass",
            ", ".join(SLURM_COMMANDS) + f" in {Path(commands.executable('sbatch')).parent}",
        )
    )
    checks.extend(guard("munge", check_munge))
    try:
        text = commands.run(
            "scontrol", ["show", "config"], timeout=COMMAND_TIMEOUT, probe=False
        ).stdout
    except HyperPodError as error:
        checks.append(
            check(
                "Slurm controller",
                "fail",
                error.message,
                "check slurm.conf ($SLURM_CONF) matches the cluster and slurmctld runs",
            )
        )
        return checks
    controllers = parse_controllers(text)
    reachable, unreachable = [], []
    for controller in controllers:
        try:
            with socket.create_connection(
                (controller.host, controller.port), timeout=CONNECT_TIMEOUT
            ):
                reachable.append(f"{controller.host}:{controller.port}")
        except OSError as error:
            unreachable.append(f"{controller.host}:{controller.port} ({error.strerror or error})")
    if controllers and not reachable:
        checks.append(
            check(
                "Slurm controller",
                "fail",
                f"cannot connect to {', '.join(unreachable)}",
                "start slurmctld, or open its port from this machine (security group / firewall)",
            )
        )
        return checks
    try:
        done = commands.run("sinfo", ["-h", "-o", "%P %a"], timeout=COMMAND_TIMEOUT, probe=False)
    except HyperPodError as error:
        checks.append(
            check(
                "Slurm controller",
                "fail",
                error.message,
                "check that slurmctld runs and munge keys match",
            )
        )
        return checks
    checks.append(
        check(
            "Slurm controller",
            "pass",
            "slurmctld at " + (", ".join(reachable) or "(default)") + " answers sinfo",
        )
    )
    partitions = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    names = [p.rstrip("*") for p in partitions]
    default = next((p.rstrip("*") for p in partitions if p.endswith("*")), None)
    wanted = orchestrator.partition
    if wanted and wanted not in names:
        checks.append(
            check(
                "Slurm partition",
                "fail",
                f"'{wanted}' not in {', '.join(names) or 'no partitions'}",
                "set c.SlurmOrchestrator.partition to one of the listed partitions",
            )
        )
    elif not names:
        checks.append(
            check(
                "Slurm partition",
                "fail",
                "sinfo lists no partition",
                "ask the admin to define a partition",
            )
        )
    else:
        chosen = wanted or default
        checks.append(
            check(
                "Slurm partition",
                "pass" if chosen else "warn",
                f"jobs go to '{chosen}'"
                if chosen
                else f"no default partition among {', '.join(names)}",
                "" if chosen else "set c.SlurmOrchestrator.partition",
            )
        )
    return checks


def _found(executable: str) -> bool:
    return bool(shutil.which(executable)) or (
        os.path.isfile(executable) and os.access(executable, os.X_OK)
    )


def check_munge() -> Check:
    fix = "start munged with the cluster's /etc/munge/munge.key (systemctl start munge)"
    munge, unmunge = shutil.which("munge"), shutil.which("unmunge")
    if munge and unmunge:
        try:
            credential = subprocess.run(
                [munge, "-n"], capture_output=True, timeout=COMMAND_TIMEOUT, check=False
            )
            if credential.returncode != 0:
                return check(
                    "munge",
                    "fail",
                    (credential.stderr.decode(errors="replace").strip() or "munge -n failed"),
                    fix,
                )
            decoded = subprocess.run(
                [unmunge],
                input=credential.stdout,
                capture_output=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return check("munge", "fail", "munge did not answer in time", fix)
        if decoded.returncode != 0:
            return check(
                "munge",
                "fail",
                decoded.stderr.decode(errors="replace").strip() or "unmunge failed",
                fix,
            )
        return check("munge", "pass", "munged encodes and decodes credentials")
    sockets = [path for path in MUNGE_SOCKETS if os.path.exists(path)]
    if sockets:
        return check(
            "munge", "pass", f"munged socket {sockets[0]} (munge tools not installed to test it)"
        )
    return check(
        "munge",
        "fail",
        "no munged socket and no munge tools",
        "install munge (apt-get install munge) and " + fix,
    )
