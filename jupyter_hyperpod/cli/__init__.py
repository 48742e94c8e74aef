"""`jupyter hyperpod <verb>` (also `jupyter-hyperpod` and `python -m jupyter_hyperpod.cli`).

Results print as plain-text tables, or as JSON with --json; the exit code says what happened
(see `jupyter hyperpod --help`). The package: `parser` (the options), `verbs` (one function per
verb, in a table), `submission` (submit's request body), `session` (the server's REST client or
the core in this process), `output` (console, outcomes, JSON) and `exits` (exit codes).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .exits import EXIT_INTERRUPTED, EXIT_OK, CommandError, HelpShown
from .output import Console, as_json
from .parser import build_parser
from .verbs import run


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    console = Console(notes_to_err=False)
    try:
        outcome, args = run(arguments, console=console, parser=build_parser("jupyter hyperpod"))
    except HelpShown:
        return EXIT_OK
    except CommandError as error:
        print(
            f"error: {error.message}" if not error.message.startswith("usage:") else error.message,
            file=sys.stderr,
        )
        return error.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if getattr(args, "json", False):
        if outcome.value is not None:
            print(as_json(outcome.value))
    elif outcome.print_value and outcome.value is not None:
        text = str(outcome.value)
        print(text, end="" if text.endswith("\n") else "\n")
    return outcome.exit_code
