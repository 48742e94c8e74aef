"""The munge key of a HyperPod controller, over AWS Systems Manager as AWS's own tools reach the
nodes (there is no SSH): `ssm:StartSession` with the target
`sagemaker-cluster:<cluster-id>_<group>-<instance-id>` and the document
AWS-StartInteractiveCommand (the seed's lifecycle script), then the Session Manager plugin as the
AWS CLI runs it (`awscli/customizations/sessionmanager.py`), on a pseudo-terminal: without one the
plugin reads EOF from stdin and ends the session before the output arrives ("Cannot perform start
session: EOF", empty output; AWS's hyperpod-ssm skill wraps it in `unbuffer` for that).

The key travels framed, never as a hexdump to parse back: a BEGIN line with its size and sha256
computed on the node, the key in base64 on one line, an END line. A frame that is missing,
truncated, interleaved with the plugin's messages or does not match its size and sum is fetched
again, a bounded number of times."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.errors import BackendError, BackendUnavailable, Forbidden, HyperPodError, NotFound
from ..calls import call
from .runner import Runner

DOCUMENT = "AWS-StartInteractiveCommand"
PLUGIN = "session-manager-plugin"
PLUGIN_INSTALL = (
    "curl -fsSLo /tmp/session-manager-plugin.deb https://s3.amazonaws.com/"
    "session-manager-downloads/plugin/latest/ubuntu_64bit/session-manager-plugin.deb && "
    "sudo dpkg -i /tmp/session-manager-plugin.deb"
)
ENV_RESPONSE = "AWS_SSM_START_SESSION_RESPONSE"
LAST_VERSION_WITHOUT_ENV = (1, 2, 497, 0)
"""Newer plugins read the StartSession response from this variable (the AWS CLI's
`StartSessionCaller`): the session token then stays out of the process list."""
EOF_MESSAGE = "Cannot perform start session: EOF"
"""What the plugin prints when its stdin ends the session (`session.go`, `shellsession_unix.go`)."""
KEY_PATH = "/etc/munge/munge.key"
BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


class FrameError(Exception):
    """The output holds no complete, matching frame (worth another try)."""


@dataclass(frozen=True)
class ControllerFacts:
    """What one session tells about the controller: its key and who munge and slurm are there."""

    key: bytes
    munge_uid: int | None
    munge_gid: int | None
    slurm_uid: int | None
    slurm_gid: int | None
    cluster_name: str | None
    """slurmctld's own ClusterName (`scontrol show config` on the controller)."""


def node_script(marker: str, key_path: str = KEY_PATH) -> str:
    """What runs on the controller (as root: through `sudo -n` when the session's user is not)."""
    return f"""k={key_path}
m={marker}
if [ ! -r "$k" ]; then echo "$m-ERROR no readable $k"; exit 0; fi
ids=""
for f in "-u munge" "-g munge" "-u slurm" "-g slurm"; do ids="$ids $(id $f 2>/dev/null || echo -)"; done
name=$(scontrol show config 2>/dev/null | sed -n 's/^ClusterName *= *//p' | head -n 1)
echo "$m-BEGIN $(stat -c%s "$k") $(sha256sum "$k" | cut -d' ' -f1)$ids ${{name:--}}"
base64 -w0 "$k"; echo
echo "$m-END"
"""


def session_command(script: str) -> str:
    """The document's command: the script in base64, so that neither the marker nor a quote of it
    appears in what the session may echo, run as root."""
    encoded = base64.b64encode(script.encode()).decode()
    return (
        f"bash -c 'echo {encoded} | base64 -d | "
        'if [ "$(id -u)" = 0 ]; then bash; else sudo -n bash; fi\''
    )


def _int(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def parse_frame(output: str, marker: str) -> ControllerFacts:
    """The controller's facts from a session's output, or FrameError saying what is wrong."""
    lines = [line.strip() for line in output.replace("\r", "").split("\n")]
    for line in lines:
        if line.startswith(f"{marker}-ERROR"):
            raise NotFound(f"the controller has {line[len(marker) + 7 :]}")
    if any(line.startswith("sudo:") for line in lines):
        detail = next(line for line in lines if line.startswith("sudo:"))
        raise Forbidden(
            f"the SSM session's user cannot become root on the controller ({detail}): the "
            "session must run as root (HyperPod's default) or with passwordless sudo"
        )
    begins = [i for i, line in enumerate(lines) if line.startswith(f"{marker}-BEGIN ")]
    if not begins:
        shown = " ".join(line for line in lines if line)[:200]
        early = (
            " the session ended before its output: no terminal?" if EOF_MESSAGE in output else ""
        )
        raise FrameError(f"no key in the session's output ({shown or 'empty output'}){early}")
    start = begins[-1]
    ends = [i for i in range(start + 1, len(lines)) if lines[i] == f"{marker}-END"]
    if not ends:
        raise FrameError("the output stops before the end of the key (truncated)")
    fields = lines[start].split()
    if len(fields) < 8:
        raise FrameError(f"a damaged first line: {lines[start][:120]}")
    _, size, digest, munge_uid, munge_gid, slurm_uid, slurm_gid, name = fields[:8]
    payload = "".join(lines[start + 1 : ends[0]])
    if not BASE64.match(payload):
        raise FrameError("other text inside the key (interleaved output)")
    try:
        key = base64.b64decode(payload, validate=True)
    except ValueError as exc:
        raise FrameError(f"the key is not valid base64 ({exc})") from None
    if not size.isdigit() or len(key) != int(size):
        raise FrameError(f"{len(key)} bytes received, the controller's key has {size}")
    if hashlib.sha256(key).hexdigest() != digest:
        raise FrameError("the key's sha256 differs from the controller's")
    return ControllerFacts(
        key=key,
        munge_uid=_int(munge_uid),
        munge_gid=_int(munge_gid),
        slurm_uid=_int(slurm_uid),
        slurm_gid=_int(slurm_gid),
        cluster_name=None if name == "-" else name,
    )


def _version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text.strip())
    return tuple(int(p) for p in parts[:4])


class SessionManager:
    """Runs one command on a node through ssm:StartSession and the Session Manager plugin."""

    def __init__(
        self,
        ssm: Any,
        runner: Runner,
        *,
        profile: str = "",
        plugin: str = PLUGIN,
        timeout: float = 60.0,
    ) -> None:
        self.ssm = ssm
        self.runner = runner
        self.profile = profile
        self.plugin = plugin
        self.timeout = timeout

    def plugin_version(self) -> tuple[int, ...]:
        done = self.runner.run([self.plugin, "--version"], timeout=15)
        if done.returncode != 0:
            raise BackendUnavailable(
                f"the Session Manager plugin ({self.plugin}) is not installed here; install it: "
                + PLUGIN_INSTALL
            )
        return _version(done.stdout)

    def start(self, target: str, command: str) -> dict[str, Any]:
        request = {"Target": target, "DocumentName": DOCUMENT, "Parameters": {"command": [command]}}
        try:
            response = call(self.ssm, "start_session", **request)
        except HyperPodError as exc:
            code = _aws_code(exc)
            if code == "TargetNotConnected":
                raise BackendUnavailable(
                    f"the node {target} is not reachable over SSM (TargetNotConnected): its SSM "
                    "agent is not connected; check the node is Running and the target spells "
                    "sagemaker-cluster:<cluster-id>_<group>-<instance-id>"
                ) from exc
            if code == "InvalidDocument":
                raise BackendError(f"SSM has no document {DOCUMENT} here: {exc.message}") from exc
            raise
        return {"request": request, "response": response}

    def run(self, target: str, command: str) -> str:
        """The session's output (the plugin's own lines included), whatever it holds."""
        version = self.plugin_version()
        started = self.start(target, command)
        response = started["response"]
        session = json.dumps({k: response.get(k) for k in ("SessionId", "TokenValue", "StreamUrl")})
        env = dict(os.environ)
        first = session
        if version > LAST_VERSION_WITHOUT_ENV:
            env[ENV_RESPONSE] = session
            first = ENV_RESPONSE
        argv = [
            self.plugin,
            first,
            self.ssm.meta.region_name or "",
            "StartSession",
            self.profile,
            json.dumps(started["request"]),
            self.ssm.meta.endpoint_url,
        ]
        done = self.runner.run(argv, env=env, timeout=self.timeout, tty=True)
        if done.returncode == 124:
            # Leave no session open on the node for its idle timeout.
            with contextlib.suppress(HyperPodError):
                call(self.ssm, "terminate_session", SessionId=response.get("SessionId"))
        return done.stdout


def _aws_code(exc: HyperPodError) -> str:
    cause: Any = exc.__cause__
    response = getattr(cause, "response", None) or {}
    return str((response.get("Error") or {}).get("Code") or "")


def fetch_controller_facts(
    session: SessionManager,
    target: str,
    *,
    attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
    key_path: str = KEY_PATH,
) -> tuple[ControllerFacts, int]:
    """The controller's facts and how many sessions it took; retries a damaged frame (at most
    `attempts` sessions, a growing pause between them: start-session allows 3 per second)."""
    problems: list[str] = []
    for attempt in range(1, attempts + 1):
        marker = f"HPKEY-{secrets.token_hex(6)}"
        output = session.run(target, session_command(node_script(marker, key_path)))
        try:
            return parse_frame(output, marker), attempt
        except FrameError as exc:
            problems.append(f"try {attempt}: {exc}")
        if attempt < attempts:
            sleep(min(0.5 * attempt, 5.0))
    raise BackendUnavailable(
        f"the munge key did not arrive whole in {attempts} SSM sessions ({'; '.join(problems)})"
    )
