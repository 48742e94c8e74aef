"""The supervisor of one local job: `python -m jupyter_hyperpod.backends.local_runner JOB_DIR`.

It runs as the leader of its own process group, so that the job outlives a restart of the
Jupyter server and a cancel (SIGTERM to the group) reaches every rank and their children. It starts
`procs_per_node` ranks with the torch.distributed variables set as torchrun sets them, writes one
log per rank, stops the other ranks as soon as one fails, and records the outcome in status.json.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"
LAUNCH_FILE = "launch.json"
GRACE_SECONDS = 10.0


def write_status(job_dir: Path, status: dict[str, Any]) -> None:
    """Atomic replace, so readers never see half a file."""
    temporary = job_dir / f".{STATUS_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(status), encoding="utf-8")
    os.replace(temporary, job_dir / STATUS_FILE)


def read_status(job_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((job_dir / STATUS_FILE).read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def exit_code_of(returncode: int) -> int:
    """Shell convention: a rank killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def rank_environment(
    base: dict[str, str], rank: int, world: int, port: int, run_id: str
) -> dict[str, str]:
    env = dict(base)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        GROUP_RANK="0",
        NODE_RANK="0",
        ROLE_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        ROLE_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_RUN_ID=run_id,
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
        PYTHONUNBUFFERED="1",
    )
    return env


class Supervisor:
    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.launch = json.loads((job_dir / LAUNCH_FILE).read_text(encoding="utf-8"))
        self.ranks: list[subprocess.Popen[bytes]] = []
        self.cancelled = False
        prior = read_status(job_dir) or {}
        self.status: dict[str, Any] = {
            "state": "RUNNING",
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "gpus": prior.get("gpus", []),
        }

    def _on_term(self, signum: int, frame: Any) -> None:
        self.cancelled = True

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        world = int(self.launch["world_size"])
        port = free_port()
        base_env = {**os.environ, **self.launch["env"]}
        self.status.update(started=time.time(), master_port=port, ranks=[])
        for rank in range(world):
            log = open(self.job_dir / f"rank-{rank}.log", "ab", buffering=0)  # noqa: SIM115
            try:
                process = subprocess.Popen(
                    self.launch["argv"],
                    cwd=self.launch["workdir"],
                    env=rank_environment(base_env, rank, world, port, self.launch["job_id"]),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            except OSError as error:
                log.write(f"cannot start {self.launch['argv'][0]!r}: {error}\n".encode())
                log.close()
                self._stop_ranks()
                return self._finish("FAILED", 127, f"rank {rank} could not start: {error.strerror}")
            log.close()
            self.ranks.append(process)
            self.status["ranks"].append(
                {"rank": rank, "pid": process.pid, "state": "RUNNING", "exit_code": None}
            )
        write_status(self.job_dir, self.status)
        return self._watch()

    def _watch(self) -> int:
        while True:
            if self.cancelled:
                self._stop_ranks()
                return self._finish("CANCELLED", None, "cancelled by the user")
            running = 0
            for info, process in zip(self.status["ranks"], self.ranks, strict=True):
                code = process.poll()
                if code is None:
                    running += 1
                    continue
                if info["exit_code"] is None:
                    info["exit_code"] = exit_code_of(code)
                    info["state"] = "SUCCEEDED" if code == 0 else "FAILED"
                    info["ended"] = time.time()  # seen within one poll (0.1 s) of its exit
                    write_status(self.job_dir, self.status)
                    if code != 0:
                        self._stop_ranks()
                        reason = f"rank {info['rank']} exited with code {info['exit_code']}"
                        return self._finish("FAILED", info["exit_code"], reason)
            if running == 0:
                return self._finish("SUCCEEDED", 0, None)
            time.sleep(0.1)

    def _stop_ranks(self) -> None:
        alive = [p for p in self.ranks if p.poll() is None]
        for process in alive:
            process.terminate()
        deadline = time.monotonic() + GRACE_SECONDS
        for process in alive:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for info, process in zip(self.status["ranks"], self.ranks, strict=True):
            if info["exit_code"] is None:
                info["exit_code"] = exit_code_of(process.returncode)
                info["state"] = "CANCELLED" if self.cancelled else "STOPPED"
                info["ended"] = time.time()

    def _finish(self, state: str, exit_code: int | None, reason: str | None) -> int:
        _stop_stragglers()
        self.status.update(state=state, exit_code=exit_code, reason=reason, ended=time.time())
        write_status(self.job_dir, self.status)
        return 0


def _stop_stragglers() -> None:
    """Take down what the ranks left behind (daemonised children), as a batch scheduler does."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(os.getpgid(0), signal.SIGTERM)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str]) -> int:
    job_dir = Path(argv[1])
    supervisor = Supervisor(job_dir)
    try:
        code = supervisor.run()
    except Exception as error:  # record any crash: a job must never stay RUNNING forever
        supervisor._stop_ranks()
        supervisor._finish("FAILED", None, f"supervisor error: {error}")
        raise
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
