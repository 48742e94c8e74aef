"""How the login-node setup runs programs: one small protocol, so that tests pass the real runner
with doubles on PATH and nothing else changes."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str = ""


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        tty: bool = False,
    ) -> Completed:
        """Run `argv` (never through a shell). `tty`: its stdin and stdout are a pseudo-terminal
        (what `unbuffer` or `script` give the Session Manager plugin), stderr merged."""
        ...


class ProcessRunner:
    """`Runner` with subprocess; a missing program answers 127 like a shell would."""

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        tty: bool = False,
    ) -> Completed:
        args = list(argv)
        environment = dict(env) if env is not None else None
        try:
            if tty:
                return self._run_tty(args, environment, timeout)
            done = subprocess.run(
                args,
                input=input,
                capture_output=True,
                text=True,
                env=environment,
                timeout=timeout,
                stdin=None if input is not None else subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError:
            return Completed(args, 127, "", f"{args[0]}: command not found")
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return Completed(args, 124, out, f"{args[0]} did not end within {timeout:g} s")
        return Completed(args, done.returncode, done.stdout, done.stderr)

    @staticmethod
    def _run_tty(args: list[str], env: dict[str, str] | None, timeout: float) -> Completed:
        """The program on a new pseudo-terminal: its stdin stays open (no EOF) and it writes to a
        terminal, as in an interactive `aws ssm start-session`."""
        master, slave = pty.openpty()
        try:
            process = subprocess.Popen(
                args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
            )
        finally:
            os.close(slave)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        code: int | None = None
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    process.kill()
                    process.wait()
                    code = 124
                    break
                ready, _, _ = select.select([master], [], [], min(left, 0.5))
                if ready:
                    try:
                        data = os.read(master, 65536)
                    except OSError:  # EIO: every writer closed the terminal
                        data = b""
                    if data:
                        chunks.append(data)
                        continue
                    code = process.wait()
                    break
                if process.poll() is not None:
                    # Read what is left after the program ended.
                    while select.select([master], [], [], 0.05)[0]:
                        try:
                            data = os.read(master, 65536)
                        except OSError:
                            break
                        if not data:
                            break
                        chunks.append(data)
                    code = process.returncode
                    break
        finally:
            os.close(master)
        return Completed(args, code, b"".join(chunks).decode("utf-8", "replace"))
