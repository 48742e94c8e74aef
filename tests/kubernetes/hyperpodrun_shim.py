"""A stand-in for `hyperpodrun` in the kubelet double's pods (test code only: NOT the HyperPod
elastic agent).

The real agent (PyPI hyperpod-elastic-agent) cannot be installed beside our torch (it requires
torch<2.12), so the kubelet double runs this in place of `hyperpodrun`. It takes hyperpodrun's
command line (torchrun's arguments plus the agent's own, hyperpod-elastic-agent README), drops
the agent-only options and runs torchrun with a static rendezvous.

With the real agent, the HyperPod training operator starts the workers by calling the agent's
server (port 8080) with the node's rank, the node count, the master address and port
(hyperpod-elastic-agent server/api_models.py `StartRequest`); how the operator picks them is not
public. Here the HyperPod operator double hands the same four values to the pod in the
`HYPERPOD_DOUBLE_START` environment variable (JSON), and this shim passes them to torchrun.
"""

from __future__ import annotations

import json
import os
import sys

# hyperpodrun's own options (README "HyperPod elastic agent arguments"): each takes a value
# except --inprocess-restart.
AGENT_OPTIONS = {
    "--shutdown-signal",
    "--shutdown-timeout",
    "--server-host",
    "--server-port",
    "--server-log-level",
    "--server-shutdown-timeout",
    "--pre-train-script",
    "--pre-train-args",
    "--post-train-script",
    "--post-train-args",
    "--inprocess-timeout",
}
AGENT_FLAGS = {"--inprocess-restart"}
# The agent forces its own rendezvous (run.py overrides rdzv_backend to "hyperpod").
RENDEZVOUS_OPTIONS = {"--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint"}


def torchrun_args(argv: list[str]) -> list[str]:
    kept: list[str] = []
    skip_next = False
    for index, arg in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        name = arg.split("=", 1)[0]
        if name in AGENT_FLAGS:
            continue
        if name in AGENT_OPTIONS or name in RENDEZVOUS_OPTIONS:
            skip_next = "=" not in arg
            continue
        if not arg.startswith("-"):
            return kept + argv[index:]  # the training script and its own arguments
        kept.append(arg)
    return kept


def main() -> None:
    start = json.loads(os.environ["HYPERPOD_DOUBLE_START"])
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--node-rank={start['rank']}",
        f"--master-addr={start['master_addr']}",
        f"--master-port={start['master_port']}",
        *torchrun_args(sys.argv[1:]),
    ]
    # The static rendezvous is the shim's, not the agent's: when rank 0's store ends before a
    # peer's agent has left, torch warns that the connection closed; the agent does not.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
