"""`jupyter hyperpod doctor`: can this machine act as the login node of the configured cluster?

The checks run where the core runs: through a Jupyter server, the server runs them
(`GET diagnose`) and says what it uses (orchestrator, file system root, partition) in the words
of its `GET cluster`; without one, the core in this process runs them. Each backend checks itself
(`Orchestrator.diagnose`); the shared checks are in `core/diagnose.py`. This module only shows
the result, as a table in a terminal or a notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .core.api import Diagnosis, DiagnosticCheck, HyperPodAPI
from .core.diagnose import check
from .core.errors import HyperPodError
from .render import Shown, Table

Check = DiagnosticCheck


class DoctorReport(Shown):
    def __init__(self, checks: list[Check], orchestrator: str, where: str) -> None:
        self.checks = checks
        self.orchestrator = orchestrator
        self.where = where

    @classmethod
    def of(cls, diagnosis: Diagnosis, first: Sequence[Check] = ()) -> DoctorReport:
        return cls([*first, *diagnosis.checks], diagnosis.orchestrator, diagnosis.where)

    @property
    def ok(self) -> bool:
        return all(item.status != "fail" for item in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [item for item in self.checks if item.status == "fail"]

    def table(self) -> Table:
        failed = len(self.failed)
        summary = "all checks passed" if not failed else f"{failed} check(s) failed"
        return Table(
            ["check", "result", "detail", "fix"],
            [[c.name, c.status, c.detail, c.fix] for c in self.checks],
            title=f"login node checks for the {self.orchestrator} cluster ({self.where})",
            notes=[summary],
            colored=["result"],
        )

    def __getitem__(self, name: str) -> Check:
        for item in self.checks:
            if item.name == name:
                return item
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "orchestrator": self.orchestrator,
            "where": self.where,
            "checks": [item.model_dump() for item in self.checks],
        }


def doctor_report(api: HyperPodAPI) -> DoctorReport:
    """The doctor verb: the checks of whichever core `api` is; for a server, first that it
    answers (and, when it does not, the checks of a core in this process instead)."""
    from .client import HyperPodClient

    if not isinstance(api, HyperPodClient):
        server = check(
            "Jupyter server", "skip", "none used: the checks ran in this process (standalone)"
        )
        return DoctorReport.of(api.diagnose(), [server])
    try:
        info = api.cluster()
        diagnosis = api.diagnose()
    except HyperPodError as error:
        failed = check(
            "Jupyter server",
            "fail",
            error.message,
            "start JupyterLab with the extension, pass --url/--token, or use --direct",
        )
        return DoctorReport([failed], "unknown", api.description)
    served = check(
        "Jupyter server",
        "pass",
        f"{api.url} serves the hyperpod API ({info.orchestrator}, file system root "
        f"{info.filesystem.root}, partition {info.filesystem.partition})",
    )
    report = DoctorReport.of(diagnosis, [served])
    report.where = f"{api.description}: {diagnosis.where}"
    return report


def diagnose(settings: Any) -> DoctorReport:
    """The checks of a core in this process configured by `settings` (creates no partition)."""
    from .core.service import HyperPodService
    from .wiring import Wiring

    service = HyperPodService(settings, create_partition=False, adapters=Wiring())
    try:
        return DoctorReport.of(service.diagnose())
    finally:
        service.close()
