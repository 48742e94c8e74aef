"""Exit codes of `jupyter hyperpod` and the errors the verbs raise (the magics raise them as
`UsageError`, the CLI prints the message and exits with the code)."""

from __future__ import annotations

from ..core.errors import (
    BackendUnavailable,
    Forbidden,
    HyperPodError,
    InvalidRequest,
    NotFound,
    PathNotAllowed,
)

# Exit codes of `jupyter hyperpod` (the magics raise instead).
EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_FORBIDDEN = 5
EXIT_ERROR = 6
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0   ok
  1   the job failed or was cancelled (when waiting or following it); doctor: a check failed
  2   usage error: bad options or a request the core refused (the message names the field)
  3   not found (job, template, path)
  4   the Jupyter server, the cluster or AWS cannot be reached right now
  5   not allowed (token, permissions, a path outside the partition)
  6   other error reported by the cluster
  124 timed out waiting
  130 interrupted (the job keeps running)"""


class CommandError(Exception):
    """A failed command: its message for a person and the CLI's exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class HelpShown(Exception):
    """argparse printed help (or the version): nothing else to do."""


def exit_code_for(error: HyperPodError) -> int:
    if isinstance(error, InvalidRequest):
        return EXIT_USAGE
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, BackendUnavailable):
        return EXIT_UNAVAILABLE
    if isinstance(error, (Forbidden, PathNotAllowed)):
        return EXIT_FORBIDDEN
    return EXIT_ERROR


def command_error(error: HyperPodError) -> CommandError:
    message = error.message
    if error.field and error.field.startswith("params.") and "--set" not in message:
        message += f" (--set {error.field.removeprefix('params.')}=VALUE)"
    return CommandError(message, exit_code_for(error))
