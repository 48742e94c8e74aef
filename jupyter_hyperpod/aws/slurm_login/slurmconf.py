"""The client `slurm.conf` of a login node: what the seed's lifecycle script writes (ClusterName,
one SlurmctldHost per controller, munge, ports 6817/6818, use_interactive_step), and the munge
socket when it is not the default one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.errors import InvalidRequest
from .controllers import Controller

MARKER = "# Written by jupyter-hyperpod (jupyter hyperpod connect --slurm)"
DEFAULT_SOCKET = "/run/munge/munge.socket.2"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ADDRESS = re.compile(r"^[0-9a-fA-F.:]{2,64}$")


def _checked(value: str, pattern: re.Pattern[str], what: str) -> str:
    """Values come from AWS, but a line break in one would add a line to the file."""
    if not pattern.match(value):
        raise InvalidRequest(f"{what} '{value[:64]}' cannot be written into slurm.conf")
    return value


def render(
    cluster_name: str,
    controllers: Sequence[Controller],
    *,
    munge_socket: str = DEFAULT_SOCKET,
    slurm_user: str = "slurm",
) -> str:
    if not controllers:
        raise InvalidRequest("no controller to write into slurm.conf")
    lines = [MARKER, f"ClusterName={_checked(cluster_name, NAME, 'cluster name').lower()}"]
    for controller in controllers:
        host = _checked(controller.hostname, NAME, "host name")
        lines.append(f"SlurmctldHost={host}({_checked(controller.ip, ADDRESS, 'address')})")
    lines += [
        "AuthType=auth/munge",
        "CryptoType=crypto/munge",
        f"SlurmUser={_checked(slurm_user, NAME, 'user')}",
        f"SlurmctldPort={SLURMCTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "LaunchParameters=use_interactive_step",
    ]
    if munge_socket != DEFAULT_SOCKET:
        if any(c in munge_socket for c in "\n,= "):
            raise InvalidRequest(f"munge socket '{munge_socket}' cannot be written into slurm.conf")
        lines.append(f"AuthInfo=socket={munge_socket}")
    return "\n".join(lines) + "\n"
