"""`%load_ext jupyter_hyperpod`: the `%hyperpod` line magic and the `%%hyperpod submit` cell magic.

Same verbs and options as `jupyter hyperpod` (one parser, one set of actions). Results are
returned as Python objects that show as HTML tables in a notebook and as text in a terminal;
errors raise `UsageError` (a one-line message, and "Run all" stops there).
"""

from __future__ import annotations

import atexit
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .commands import CommandError, Console, HelpShown, Session, build_parser, open_session, run


@magics_class
class HyperPodMagics(Magics):
    """Keeps one session per shell: the server's REST API, or the core in this kernel."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._session: Session | None = None
        self._session_key: tuple[Any, ...] | None = None
        atexit.register(self.close)

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _session_for(self, args: Any) -> Session:
        key = (
            getattr(args, "url", None),
            getattr(args, "token", None),
            bool(getattr(args, "direct", False)),
        )
        if self._session is None or key != self._session_key:
            self.close()
            self._session = open_session(args)
            self._session_key = key
        return self._session

    @line_cell_magic
    def hyperpod(self, line: str, cell: str | None = None) -> Any:
        """Drive the training cluster: `%hyperpod --help`, `%hyperpod VERB --help`.

        Verbs: cluster, nodes, jobs, submit, status, wait, logs, cancel, files, templates, connect,
        doctor. `%%hyperpod submit [options] [-- script args]` submits the cell as a script.
        """
        try:
            argv = shlex.split(line)
        except ValueError as error:
            raise UsageError(f"cannot parse the options: {error}") from None
        console = Console(notes_to_err=False)
        parser = build_parser("%hyperpod" if cell is None else "%%hyperpod")
        try:
            outcome, args = run(
                argv,
                console=console,
                session_factory=self._session_for,
                keep_session=True,
                cell=cell,
                parser=parser,
            )
        except HelpShown:
            return None
        except CommandError as error:
            raise UsageError(error.message) from None
        if getattr(args, "json", False) and outcome.value is not None:
            from .commands import as_json

            print(as_json(outcome.value))
            return None
        return outcome.value


def register(ipython: Any) -> None:
    ipython.register_magics(HyperPodMagics)
