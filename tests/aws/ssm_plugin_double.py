"""A double of AWS's Session Manager plugin (`session-manager-plugin`), run as the AWS CLI runs it
(`awscli/customizations/sessionmanager.py` StartSessionCaller: `--version`, then the StartSession
response or the name of the variable holding it, region, `StartSession`, profile, the request
JSON, endpoint). It runs the document's command on this machine, which plays the HyperPod node.

Each behaviour, from aws/session-manager-plugin `src/sessionmanagerplugin/session/`:
- `session.go` ValidateInputAndStartSession: the response is read from the variable when the
  first argument starts with AWS_SSM_START_SESSION_RESPONSE; Execute prints
  "\\nStarting session with SessionId: <id>\\n" first; a failure prints
  "Cannot perform start session: <error>".
- `shellsession/shellsession_unix.go` handleKeyboardInput: stdin is read until it fails; at EOF
  (stdin not a terminal: /dev/null, a closed pipe) the session ends with
  "Cannot perform start session: EOF", before the command's output has arrived (AWS's
  hyperpod-ssm skill: "calls intermittently return empty output with `Cannot perform start
  session: EOF`" without a PTY; it wraps the CLI in `unbuffer`).
- `datachannel` channel_closed: "\\n\\nExiting session with sessionId: <id>.\\n\\n" at the end.
- Output damaged on the way, as the seed's lifecycle script records (a key whose text ends in
  "Cannot perform start session: EOF", `slurm_lifecycle.sh`) and the skill warns ("Large outputs
  may be truncated by SSM"): HP_SSM_FAULTS, one fault per session in order (`truncate`:
  the output cut short and that message glued on; `interleave`: the message inside the output;
  `eof`: as without a terminal; `ok`). HP_SSM_LOG: one JSON line per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

EOF_MESSAGE = "Cannot perform start session: EOF"


def next_fault() -> str:
    faults = [f for f in os.environ.get("HP_SSM_FAULTS", "").split(",") if f]
    state = os.environ.get("HP_SSM_STATE", "")
    count = 0
    if state:
        try:
            with open(state) as f:
                count = int(f.read() or 0)
        except FileNotFoundError:
            count = 0
        with open(state, "w") as f:
            f.write(str(count + 1))
    return faults[count] if count < len(faults) else "ok"


def main(argv: list[str]) -> int:
    out = sys.stdout
    if len(argv) == 2 and argv[1] == "--version":
        out.write("1.2.707.0\n")
        return 0
    if len(argv) != 7 or argv[3] != "StartSession":
        out.write(f"\nUnknown operation {argv[1] if len(argv) > 1 else ''}. \n")
        return 0
    raw = os.environ.get(argv[1], "") if argv[1].startswith("AWS_SSM_START_SESSION") else argv[1]
    try:
        response = json.loads(raw)
        session_id = response["SessionId"]
    except (ValueError, KeyError) as exc:
        out.write(f"Cannot perform start session: {exc}\n")
        return 0
    request = json.loads(argv[5])
    fault = next_fault()
    tty = os.isatty(0) and os.isatty(1)
    log = os.environ.get("HP_SSM_LOG")
    if log:
        with open(log, "a") as f:
            entry = {"argv": [*argv[2:5], argv[6]], "first": argv[1][:40], "tty": tty}
            f.write(json.dumps({**entry, "fault": fault, "request": request}) + "\n")
    out.write(f"\nStarting session with SessionId: {session_id}\n")
    out.flush()
    if not tty or fault == "eof":
        if not tty:
            sys.stdin.read()  # returns at EOF, as the plugin's reader does
        out.write(f"\n{EOF_MESSAGE}\n")
        return 0
    command = request["Parameters"]["command"][0]
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    text = done.stdout + done.stderr
    if fault == "truncate":
        text = text[: len(text) * 3 // 5] + EOF_MESSAGE + "\n"
    elif fault == "interleave":
        middle = text.find("\n", text.find("-BEGIN ")) + 40
        text = text[:middle] + EOF_MESSAGE + text[middle:]
    out.write(text)
    out.write(f"\n\nExiting session with sessionId: {session_id}.\n\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
