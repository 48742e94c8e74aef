"""Running Slurm's client commands: argument lists only, time limits, and one error mapping.

Every command goes through `SlurmCommands.run`, which turns "slurmctld cannot be reached" into
`BackendUnavailable` (HTTP 503) and any other refusal into `BackendError` (502). When the
controller is down, Slurm's clients retry for MessageTimeout (10-20 s per call); once we know the
controller's address (from the clients' slurm.conf until `scontrol show config` answers), a
command that has not answered within `STALL_SECONDS` makes us probe it (a TCP connect) so that an
outage answers within that time. One thread (watch.py) keeps these times for every command, so
that each command waits for its exit without a timeout. Only a stalled command probes: slurmctld
logs every connection that sends nothing ("Zero Bytes were transmitted or received") as an error,
and a probe before every command filled its log and sat beside every submit.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import BackendError, BackendUnavailable
from .standby import Standby
from .watch import CommandWatch, Watched

log = logging.getLogger(__name__)

CONFIG_TTL = 60.0
"""Seconds one `scontrol show config` answers (the cluster's name, accounting, controllers)."""

STALL_SECONDS = 1.0
"""How long a command runs before we probe the controller: a healthy one answers in milliseconds
(the queue of a large cluster in a second or so, and each probe is a line in slurmctld's log); a
down one makes the clients retry for MessageTimeout."""

UNREACHABLE = re.compile(
    r"unable to contact slurm controller|socket timed out|zero bytes were transmitted"
    r"|connection refused|communication connection failure|could not establish a configuration"
    r"|backup controller in standby|slurmctld.*not responding|transport endpoint is not connected",
    re.IGNORECASE,
)
"""Messages of Slurm's clients that mean the controller is away, not that it refused."""

DROPPED_ENV = re.compile(r"^(JPY_|JUPYTERHUB_API_TOKEN$|JUPYTER_TOKEN$|SLURM_(?!CONF$))")
"""Server variables never handed to Slurm's clients: sbatch copies its environment into the job,
which must not get the server's tokens, nor SLURM_* of an allocation the server may run in."""


@dataclass(frozen=True)
class Controller:
    host: str
    port: int


class SlurmCommands:
    """Runs sinfo/squeue/sacct/scontrol/sbatch/scancel with a time limit each, and knows where
    slurmctld is (`scontrol show config`, read once a `config_ttl`) to probe it when a command
    stalls."""

    def __init__(
        self,
        *,
        bin_dir: str = "",
        timeout: float = 30.0,
        probe_timeout: float = 1.0,
        fast_fail: bool = True,
        config_ttl: float = CONFIG_TTL,
        stall_seconds: float = STALL_SECONDS,
        watch: CommandWatch | None = None,
        slurm_conf: str | None = None,
        standby_seconds: float = 0.0,
    ) -> None:
        self.bin_dir = bin_dir
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self.fast_fail = fast_fail
        """Probe slurmctld's port when a command stalls, once its address is known."""
        self.config_ttl = config_ttl
        self.stall_seconds = stall_seconds
        self.slurm_conf = slurm_conf
        """The slurm.conf whose controllers are probed before slurmctld first answers (None:
        `SLURM_CONF`, else where the clients were built to look: `default_conf_path`)."""
        self.watch = watch or CommandWatch()
        """Ends the commands that stall or run past their time limit (watch.py says why a thread
        and not `communicate(timeout=...)`)."""
        self.controllers: list[Controller] = []
        """The slurmctld addresses probed when a command stalls; empty: never probe."""
        self.known_controllers: list[Controller] = []
        """The addresses the last `scontrol show config` named (probed or not)."""
        self._config: dict[str, str] = {}
        self._config_at = 0.0
        self._probe_off = False
        self._config_lock = threading.Lock()
        self._lock = threading.Lock()
        self.calls = 0
        """How many commands ran (tests check that polling is batched)."""
        self.history: list[list[str]] = []
        """The last commands run, newest last (bounded)."""
        self._found: dict[tuple[str, str], str] = {}
        self.standby = Standby(
            start=lambda argv, env: self._start(argv[0], argv, env, stdin=subprocess.PIPE),
            watch=self.watch,
            max_age=standby_seconds,
            conf_path=self.conf_path,
        )
        """A command that reads its input (sbatch's script) started ahead of the next run of
        it, for at most `standby_seconds` (0: never; standby.py)."""

    def executable(self, name: str) -> str:
        """Where `name` is: in bin_dir, else found on PATH once per PATH (a search of PATH took
        5% of a submit's time in the server's process)."""
        if self.bin_dir:
            return os.path.join(self.bin_dir, name)
        key = (name, os.environ.get("PATH", ""))
        found = self._found.get(key)
        if found is None:
            found = shutil.which(name)
            if found is None:
                return name  # not installed (yet): looked for again next time
            self._found[key] = found
        return found

    def environment(self) -> dict[str, str]:
        return {key: value for key, value in os.environ.items() if not DROPPED_ENV.match(key)}

    def run(
        self,
        name: str,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        ok_codes: Sequence[int] = (0,),
        probe: bool = True,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `name args...`; returns the finished process when its exit code is in ok_codes.
        `probe`: if it has not answered within `stall_seconds`, fail at once when no controller
        accepts a connection (the client would retry for MessageTimeout). `input`: its standard
        input (sbatch's script), sent to the standby started ahead for it when there is one."""
        (done,) = self.run_each(
            name, [args], timeout=timeout, ok_codes=ok_codes, probe=probe, env=env, input=input
        )
        return done

    def run_each(
        self,
        name: str,
        arg_lists: Sequence[Sequence[str]],
        *,
        timeout: float | None = None,
        ok_codes: Sequence[int] = (0,),
        probe: bool = True,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> list[subprocess.CompletedProcess[str]]:
        """`name` once per argument list, the processes running side by side (a client takes a
        few ms to start, most of it waiting); the first failure is raised once all have ended.
        `input`: the standard input of each."""
        limit = timeout or self.timeout
        environment = dict(env) if env is not None else self.environment()
        stdin = subprocess.DEVNULL if input is None else subprocess.PIPE
        running: list[tuple[list[str], subprocess.Popen[str], Watched]] = []
        try:
            for args in arg_lists:
                argv = [self.executable(name), *args]
                with self._lock:
                    self.calls += 1
                    self.history = [*self.history[-49:], [name, *args]]
                process = self.standby.take(argv, environment) if input is not None else None
                if process is None:
                    process = self._start(name, argv, environment, stdin=stdin)
                running.append((argv, process, self._watch(process, name, limit, probe=probe)))
        except BaseException:
            for _, process, watched in running:
                watched.finish()
                process.kill()
                process.communicate()
            raise
        finished: list[subprocess.CompletedProcess[str]] = []
        failure: BaseException | None = None
        for argv, process, watched in running:
            try:
                stdout, stderr = self._wait(process, watched, input)
            except BaseException as error:
                failure = failure or error
                continue
            finished.append(subprocess.CompletedProcess(argv, process.returncode, stdout, stderr))
        if input is not None and len(running) == 1:
            self.standby.refill(running[0][0], environment)
        if failure is not None:
            raise failure
        for done in finished:
            if done.returncode not in ok_codes:
                raise command_error(name, done.returncode, done.stderr or done.stdout)
        return finished

    @staticmethod
    def _start(
        name: str, argv: list[str], env: dict[str, str], *, stdin: int = subprocess.DEVNULL
    ) -> subprocess.Popen[str]:
        try:
            return subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        except FileNotFoundError:
            raise BackendUnavailable(
                f"the Slurm command '{name}' is not installed here: is this a Slurm login node?"
            ) from None

    def _watch(
        self, process: subprocess.Popen[str], name: str, limit: float, *, probe: bool
    ) -> Watched:
        """Have the watch kill `process` when the controller is found down while it stalls, or
        when it runs past `limit`."""
        return self.watch.watch(
            process,
            limit=limit,
            limit_message=(
                f"Slurm did not answer '{name}' within {limit:g} s: slurmctld may be down or busy"
            ),
            stall=self.stall_seconds if probe and self.controllers else None,
            on_stall=self._unreachable,
        )

    @staticmethod
    def _wait(
        process: subprocess.Popen[str], watched: Watched, input: str | None = None
    ) -> tuple[str, str]:
        """The command's output once it exits (reaped, also when interrupted); 503 when the watch
        stopped it."""
        with process:
            try:
                output = process.communicate(input)
            except BaseException:
                process.kill()
                process.communicate()
                raise
            finally:
                watched.finish()
        if watched.stopped_because is not None:
            raise BackendUnavailable(watched.stopped_because)
        return output

    def _unreachable(self) -> str | None:
        """Why a stalled command should stop: no controller accepts a connection (else None)."""
        try:
            self.check_reachable()
        except BackendUnavailable as error:
            return error.message
        return None

    # -- the controller ----------------------------------------------------------------------------
    def config(self, *, force: bool = False) -> dict[str, str]:
        """`scontrol show config`, cached `config_ttl`; also tells the fast-fail probe where to
        look."""
        with self._config_lock:
            fresh = time.monotonic() - self._config_at < self.config_ttl
            if self._config and fresh and not force:
                return self._config
        if not self._config and not self.controllers and self.fast_fail and not self._probe_off:
            # Until slurmctld first answers, the addresses in the clients' own slurm.conf are
            # probed when a command stalls: a server started during an outage answers 503 in
            # about STALL_SECONDS instead of after the clients' MessageTimeout.
            self.controllers = self._conf_controllers()
        text = self.run("scontrol", ["show", "config"]).stdout
        config = parse_key_values(text)
        with self._config_lock:
            self._config, self._config_at = config, time.monotonic()
            self.known_controllers = parse_controllers(text)
        if self.fast_fail and not self._probe_off and self.controllers != self.known_controllers:
            self._arm_probe()
        return config

    @property
    def last_config(self) -> dict[str, str]:
        """The last `scontrol show config` read, without asking again (empty before the first)."""
        return self._config

    def _conf_controllers(self) -> list[Controller]:
        """The controllers named by the slurm.conf Slurm's clients read here; none when there
        is no such file (a configless client)."""
        try:
            with open(self.conf_path(), encoding="utf-8", errors="replace") as conf:
                return controllers_in_conf(conf.read())
        except OSError:
            return []

    def conf_path(self) -> str:
        """The slurm.conf Slurm's clients read here: `SLURM_CONF`, else where they were built to
        look (it may not exist: a configless client)."""
        if self.slurm_conf is not None:
            return self.slurm_conf
        return os.environ.get("SLURM_CONF") or default_conf_path(self.executable("scontrol"))

    def close(self) -> None:
        """Stop the standby (it has submitted nothing)."""
        self.standby.close()

    def know_controller(self) -> None:
        """Learn the controller's address once, so that later outages fail fast."""
        if not self._config:
            self.config()

    def _arm_probe(self) -> None:
        """Probe the controller before commands, unless its address does not answer from here
        while Slurm's clients reach it (another route, DNS SRV...): then never probe."""
        self.controllers = self.known_controllers
        try:
            self.check_reachable()
        except BackendUnavailable as error:
            log.warning("not probing slurmctld before commands: %s", error.message)
            self.controllers = []
            self._probe_off = True

    def check_reachable(self) -> None:
        """Fail fast when every known controller refuses connections (slurmctld is down). Each
        probe is an error line in slurmctld's log: only when a command stalls, or once when the
        address is learnt."""
        if not self.controllers:
            return
        errors = []
        for controller in self.controllers:
            try:
                with socket.create_connection(
                    (controller.host, controller.port), timeout=self.probe_timeout
                ):
                    return
            except OSError as error:
                errors.append(f"{controller.host}:{controller.port} ({error.strerror or error})")
        raise BackendUnavailable(
            f"cannot connect to slurmctld at {', '.join(errors)}; it may be restarting, "
            "and this page recovers by itself when it is back"
        )


def command_error(name: str, code: int, output: str) -> BackendUnavailable | BackendError:
    message = (
        " ".join(line.strip() for line in output.strip().splitlines()[-3:]) or f"exit code {code}"
    )
    if UNREACHABLE.search(message):
        return BackendUnavailable(f"cannot connect to slurmctld ({name}: {message})")
    return BackendError(f"{name} failed: {message}")


def parse_controllers(config_text: str) -> list[Controller]:
    """`SlurmctldHost[i] = name(addr)` and `SlurmctldPort = 6817` of `scontrol show config`."""
    port = 6817
    hosts: list[str] = []
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "SlurmctldPort":
            port = _first_port(value, port)
        elif key.startswith("SlurmctldHost["):
            hosts += _controller_address(value)
    return [Controller(host, port) for host in hosts]


def default_conf_path(scontrol: str) -> str:
    """Where Slurm's clients read slurm.conf without `SLURM_CONF`: `<prefix>/etc/slurm.conf` of
    the prefix they were built for (HyperPod's /opt/slurm/bin -> /opt/slurm/etc), and Debian's
    /etc/slurm/slurm.conf for clients in /usr/bin."""
    prefix = Path(os.path.realpath(scontrol)).parent.parent if os.sep in scontrol else Path("/usr")
    return "/etc/slurm/slurm.conf" if prefix == Path("/usr") else str(prefix / "etc" / "slurm.conf")


def controllers_in_conf(conf_text: str) -> list[Controller]:
    """The controllers slurm.conf names: `SlurmctldHost=name(addr)` lines, the first the
    primary (or the older `ControlMachine`/`ControlAddr`), and `SlurmctldPort` (keys are
    case-insensitive, `#` starts a comment; slurm.conf(5))."""
    port = 6817
    hosts: list[str] = []
    legacy: dict[str, str] = {}
    for line in conf_text.splitlines():
        key, sep, value = line.split("#", 1)[0].partition("=")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "slurmctldport":
            port = _first_port(value, port)
        elif key == "slurmctldhost":
            hosts += _controller_address(value)
        elif key in ("controlmachine", "controladdr"):
            legacy[key] = value.split(",")[0].strip()
    if not hosts and (legacy.get("controladdr") or legacy.get("controlmachine")):
        hosts = [legacy.get("controladdr") or legacy["controlmachine"]]
    return [Controller(host, port) for host in hosts]


def _first_port(value: str, default: int) -> int:
    """`6817` or a range `6817-6818` -> 6817."""
    match = re.match(r"\d+", value)
    return int(match.group()) if match else default


def _controller_address(value: str) -> list[str]:
    """`name(addr)` -> [addr]; `name` -> [name]."""
    match = re.match(r"([^(\s]+)(?:\(([^)]+)\))?", value)
    return [match.group(2) or match.group(1)] if match else []


def parse_key_values(text: str) -> dict[str, str]:
    """`Key = value` lines of `scontrol show config`."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            result[key.strip()] = value.strip()
    return result
