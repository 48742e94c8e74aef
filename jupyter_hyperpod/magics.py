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

from .cli.exits import CommandError, HelpShown
from .cli.output import Console, as_json
from .cli.parser import build_parser
from .cli.session import open_api
from .cli.verbs import run
from .core.api import HyperPodAPI


@magics_class
class HyperPodMagics(Magics):
    """Keeps one API per shell (`HyperPodAPI`): the server's REST client, or the core in this
    kernel; `api` may be set to either (or to any implementation) before the first call."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._session: HyperPodAPI | None = None
        self._session_key: tuple[Any, ...] | None = None
        atexit.register(self.close)

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    @property
    def api(self) -> HyperPodAPI | None:
        return self._session

    @api.setter
    def api(self, value: HyperPodAPI) -> None:
        self.close()
        self._session = value
        self._session_key = None

    def _session_for(self, args: Any) -> HyperPodAPI:
        key = (
            getattr(args, "url", None),
            getattr(args, "token", None),
            bool(getattr(args, "direct", False)),
            getattr(args, "kubeconfig", None),
            getattr(args, "profile", None),
        )
        given = self._session is not None and self._session_key is None
        if self._session is None or (key != self._session_key and not given):
            self.close()
            self._session = open_api(args)
            self._session_key = key
        return self._session

    @line_cell_magic
    def hyperpod(self, line: str, cell: str | None = None) -> Any:
        """Drive the training cluster: `%hyperpod --help`, `%hyperpod VERB --help`.

        Verbs: cluster, nodes, jobs, submit, status, wait, logs, cancel, rerun, diff, compare,
        chain, resume, sweeps, sweep, files, templates, connect, doctor. `%%hyperpod submit [options] [-- script args]` submits the cell as a script.
        """
        try:
            argv = shlex.split(line)
        except ValueError as error:
            raise UsageError(f"cannot parse the options: {error}") from None
        console = Console(notes_to_err=False, prog="%hyperpod")
        parser = build_parser("%hyperpod" if cell is None else "%%hyperpod")
        try:
            outcome, args = run(
                argv,
                console=console,
                api_factory=self._session_for,
                keep_api=True,
                cell=cell,
                parser=parser,
            )
        except HelpShown:
            return None
        except CommandError as error:
            raise UsageError(error.message) from None
        if getattr(args, "json", False) and outcome.value is not None:
            print(as_json(outcome.value))
            return None
        return outcome.value


def register(ipython: Any) -> None:
    ipython.register_magics(HyperPodMagics)
