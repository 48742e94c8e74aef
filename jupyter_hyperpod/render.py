"""Results of the magics and the CLI: Python objects that show as HTML tables in a notebook and as
plain-text tables (tabulate) in a terminal."""

from __future__ import annotations

import datetime as dt
import html
import shutil
import time
from collections.abc import Iterable, Sequence
from typing import Any

from tabulate import tabulate

from .core.models import (
    ClusterInfo,
    FileEntry,
    FileListing,
    Job,
    JobSpec,
    JobState,
    LogSnapshot,
    Node,
    Rendered,
    TemplateInfo,
)
from .core.watchdog import operator_summary
from .core.watchdog import summary as watchdog_summary
from .terminal_text import TerminalText

STATE_COLORS = {
    "PENDING": "#9a6700",
    "RUNNING": "#0969da",
    "SUCCEEDED": "#1a7f37",
    "FAILED": "#cf222e",
    "CANCELLED": "#6e7781",
    "healthy": "#1a7f37",
    "degraded": "#9a6700",
    "unhealthy": "#cf222e",
    "pass": "#1a7f37",
    "fail": "#cf222e",
    "warn": "#9a6700",
    "skip": "#6e7781",
}


MIN_WRAP = 16
"""A wrapped column keeps at least this many characters a line."""
HEADER_PADDING = 2
"""tabulate's `simple` format pads a column two past its header (its MIN_PADDING)."""
UNWRAPPED = 10**6
"""A header width that never wraps (tabulate's header widths take no None)."""


def terminal_width() -> int:
    """Columns of the terminal ($COLUMNS first); 100 when there is none (a pipe, a file)."""
    return shutil.get_terminal_size((100, 24)).columns


def fit_columns(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int
) -> list[int | None]:
    """Per column, the width to wrap it at (None: as it is) so that the table fits `width`:
    the widest column gives way first, down to MIN_WRAP. Doctor's details and fixes were one
    line each, 350 characters wide."""
    count = max([len(headers), *(len(row) for row in rows)])
    natural = [
        max(
            [len(str(headers[i])) + HEADER_PADDING if i < len(headers) else 0]
            + [max(map(len, str(row[i]).splitlines() or [""])) for row in rows if i < len(row)]
        )
        for i in range(count)
    ]
    widths = list(natural)
    excess = sum(widths) + 2 * (count - 1) - width
    while excess > 0:  # a character at a time from the widest: the wide ones end up level
        widest = max(range(count), key=lambda i: widths[i])
        if widths[widest] <= MIN_WRAP:
            break
        widths[widest] -= 1
        excess -= 1
    return [None if w == n else w for w, n in zip(widths, natural, strict=True)]


class Table:
    """Rows under headers, with an optional title and notes."""

    def __init__(
        self,
        headers: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        title: str | None = None,
        notes: Sequence[str] = (),
        colored: Sequence[str] = (),
    ) -> None:
        self.headers = list(headers)
        self.rows = [["" if cell is None else cell for cell in row] for row in rows]
        self.title = title
        self.notes = list(notes)
        self.colored = set(colored)
        """Columns whose values are states (colored in HTML)."""

    def text(self, width: int | None = None) -> str:
        """The table as plain text, its widest columns wrapped to fit `width` (the terminal's)."""
        parts = [self.title] if self.title else []
        headers = self.headers if any(self.headers) else []
        if self.rows:
            wraps = fit_columns(headers, self.rows, width or terminal_width())
            parts.append(
                tabulate(
                    self.rows,
                    headers=headers,
                    tablefmt="simple" if headers else "plain",
                    disable_numparse=True,
                    maxcolwidths=wraps,
                    maxheadercolwidths=[w or UNWRAPPED for w in wraps] if headers else None,
                )
            )
        else:
            parts.append("(none)")
        parts.extend(self.notes)
        return "\n".join(parts)

    def html(self) -> str:
        out = ['<div class="jp-hyperpod-result">']
        if self.title:
            out.append(f"<strong>{html.escape(self.title)}</strong>")
        out.append("<table>")
        if any(self.headers):
            out.append("<thead><tr>")
            out.extend(f'<th style="text-align:left">{html.escape(h)}</th>' for h in self.headers)
            out.append("</tr></thead>")
        out.append("<tbody>")
        for row in self.rows:
            out.append("<tr>")
            for header, cell in zip(self.headers, row, strict=False):
                text = html.escape(str(cell))
                if header in self.colored and str(cell) in STATE_COLORS:
                    text = f'<span style="color:{STATE_COLORS[str(cell)]};font-weight:600">{text}</span>'
                out.append(f'<td style="text-align:left;white-space:pre-wrap">{text}</td>')
            out.append("</tr>")
        if not self.rows:
            out.append(f'<tr><td colspan="{len(self.headers)}"><em>(none)</em></td></tr>')
        out.append("</tbody></table>")
        out.extend(f"<div>{html.escape(note)}</div>" for note in self.notes)
        out.append("</div>")
        return "".join(out)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())


class Shown:
    """Mixin: an object whose notebook/terminal display is `table()`."""

    def table(self) -> Table:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.table().text()

    def _repr_html_(self) -> str:
        return self.table().html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.table().text())


# -- formatting helpers ------------------------------------------------------------------------------


def when(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return (
        f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
    )


def job_duration(job: Job) -> str:
    if not job.started:
        return ""
    return duration((job.ended or time.time()) - job.started)


def resources(spec: JobSpec) -> str:
    text = f"{spec.nodes}x{spec.procs_per_node}"
    if spec.gpus_per_node:
        text += f" ({spec.gpus_per_node} GPU/node)"
    return text


def job_detail(job: Job) -> str:
    watched = watchdog_summary(job.watchdog, when) if job.state == JobState.RUNNING else ""
    parts = [
        text
        for text in (watched, operator_summary(job.operator_verdict, when), job.state_reason)
        if text
    ]
    if parts:
        return "; ".join(parts)
    if job.exit_code is not None and job.state.finished:
        return f"exit code {job.exit_code}"
    return ""


def size(value: int) -> str:
    number = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if number < 1024 or unit == "TiB":
            return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
        number /= 1024
    return str(value)


# -- results -----------------------------------------------------------------------------------------


class JobResults(Shown, list[Job]):
    """A page of jobs: a list of `Job` with the total count."""

    def __init__(self, jobs: Iterable[Job], total: int | None = None) -> None:
        super().__init__(jobs)
        self.total = len(self) if total is None else total

    def table(self) -> Table:
        notes = [f"{len(self)} of {self.total} jobs"] if self.total > len(self) else []
        return Table(
            ["id", "state", "ranks", "created", "duration", "detail"],
            [
                [
                    j.id,
                    j.state.value,
                    resources(j.spec),
                    when(j.created),
                    job_duration(j),
                    job_detail(j),
                ]
                for j in self
            ],
            notes=notes,
            colored=["state"],
        )


class NodeResults(Shown, list[Node]):
    def table(self) -> Table:
        rows = []
        for node in self:
            gpus = (
                f"{node.gpus.total - node.gpus.allocated}/{node.gpus.total}"
                if node.gpus.total
                else "-"
            )
            rows.append(
                [
                    node.name,
                    node.state,
                    node.health,
                    node.instance_type or "",
                    gpus,
                    node.cpus,
                    f"{node.memory_mb / 1024:.0f} GiB" if node.memory_mb else "",
                    node.instance_group or ",".join(node.partitions),
                    node.health_detail or "",
                ]
            )
        return Table(
            [
                "node",
                "state",
                "health",
                "instance",
                "GPUs free/total",
                "CPUs",
                "memory",
                "group",
                "detail",
            ],
            rows,
            colored=["health"],
        )


class TemplateResults(Shown, list[TemplateInfo]):
    def table(self) -> Table:
        return Table(
            ["template", "title", "parameters"],
            [
                [t.name, t.title, ", ".join(p.name + ("*" if p.required else "") for p in t.params)]
                for t in self
            ],
            notes=["* required; `templates NAME` shows a template's parameters"],
        )


class TemplateDetail(Shown):
    def __init__(self, info: TemplateInfo) -> None:
        self.info = info

    def table(self) -> Table:
        rows = []
        for param in self.info.params:
            kind = param.type + (f" ({'|'.join(param.choices)})" if param.choices else "")
            rows.append(
                [
                    param.name,
                    kind,
                    "yes" if param.required else "",
                    _short(param.default),
                    param.description,
                ]
            )
        return Table(
            ["parameter", "type", "required", "default", "description"],
            rows,
            title=f"{self.info.name}: {self.info.description}",
            notes=[f"set with --template {self.info.name} --set NAME=VALUE"],
        )


class FileResults(Shown, list[FileEntry]):
    def __init__(self, listing: FileListing) -> None:
        super().__init__(listing.entries)
        self.listing = listing

    @property
    def path(self) -> str:
        return self.listing.path

    def table(self) -> Table:
        listing = self.listing
        notes = []
        if listing.total > listing.offset + len(self):
            notes.append(
                f"entries {listing.offset + 1}-{listing.offset + len(self)} of {listing.total} "
                f"(use --offset {listing.offset + len(self)} for more)"
            )
        return Table(
            ["name", "type", "size", "modified"],
            [
                [
                    e.name + ("/" if e.type == "directory" else ""),
                    e.type,
                    "" if e.type == "directory" else size(e.size),
                    when(e.mtime),
                ]
                for e in self
            ],
            title=f"/{listing.path}",
            notes=notes,
        )


class RichJob(Shown, Job):
    """A `Job` that shows as a card."""

    def table(self) -> Table:
        job = self
        rows: list[list[Any]] = [
            ["id", job.id],
            ["name", job.name],
            ["state", job.state.value],
            ["reason", job.state_reason],
            ["orchestrator", job.orchestrator],
            ["backend id", job.backend_id],
            ["command", " ".join(job.spec.command)],
            ["workdir", job.spec.workdir or "(partition root)"],  # as the panel shows it
            ["ranks", resources(job.spec)],
            ["template", job.spec.template],
            ["created", when(job.created)],
            ["started", when(job.started)],
            ["ended", when(job.ended)],
            ["duration", job_duration(job)],
            ["exit code", job.exit_code],
            ["failed rank", job.failed_rank],  # the server's decision (core/blame.py)
            ["MLflow run", job.mlflow_run_url],
        ]
        notes = []
        if job.ranks:
            ranks = ", ".join(
                f"{r.rank}:{r.state or '?'}"
                + (f"({r.exit_code})" if r.exit_code is not None else "")
                for r in job.ranks
            )
            notes.append(f"ranks: {ranks}")
        notes.extend(f"event: {event}" for event in job.events[-5:])
        shown = [row for row in rows if row[1] not in (None, "")]
        return Table(["", ""], shown, title=f"job {job.id}", notes=notes, colored=[""])

    @classmethod
    def of(cls, job: Job) -> RichJob:
        return cls.model_construct(**dict(job))


class RichCluster(Shown, ClusterInfo):
    def table(self) -> Table:
        fs = self.filesystem
        caps = self.capabilities
        rows = [
            ["orchestrator", self.orchestrator],
            ["cluster", self.name],
            ["user", self.user],
            [
                "partition",
                fs.partition
                + ("" if fs.cluster_root == fs.root else f"  (jobs: {fs.cluster_root})"),
            ],
            ["MLflow", self.mlflow_uri or ""],
            [
                "can",
                ", ".join(
                    k
                    for k in ("multi_node", "gpus", "cancel", "follow_logs", "metrics")
                    if getattr(caps, k)
                ),
            ],
        ]
        return Table(["", ""], rows, title=f"{self.orchestrator} cluster {self.name}")

    @classmethod
    def of(cls, info: ClusterInfo) -> RichCluster:
        return cls.model_construct(**dict(info))


class RichRendered(Shown, Rendered):
    """A dry run: exactly what would be submitted."""

    def table(self) -> Table:
        notes = [f"warning: {w}" for w in self.warnings]
        return Table(
            ["would submit"],
            [[self.text.rstrip()]],
            title=f"dry run of {self.spec.name} ({self.format})",
            notes=notes,
        )

    def __str__(self) -> str:
        head = f"# dry run of {self.spec.name} ({self.format}); nothing was submitted"
        return "\n".join([head, self.text.rstrip(), *(f"# warning: {w}" for w in self.warnings)])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    @classmethod
    def of(cls, rendered: Rendered) -> RichRendered:
        return cls.model_construct(**dict(rendered))


class LogText(TerminalText):
    """A log snapshot, shown as a terminal would show it, with the offset to follow from."""

    snapshot: LogSnapshot

    def __new__(cls, snapshot: LogSnapshot) -> LogText:
        value = super().__new__(cls, snapshot.text)
        value.snapshot = snapshot
        return value


class Message(str):
    """A one-line outcome (connect, cancel of many) that shows without quotes."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _short(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def to_jsonable(value: Any) -> Any:
    """The JSON form of a result (for --json)."""
    from pydantic import BaseModel

    if isinstance(value, FileResults):
        return value.listing.model_dump(mode="json")
    if isinstance(value, JobResults):
        return {"jobs": [job.model_dump(mode="json") for job in value], "total": value.total}
    if isinstance(value, TemplateDetail):
        return value.info.model_dump(mode="json")
    if isinstance(value, LogText):
        return value.snapshot.model_dump(mode="json")
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    if hasattr(value, "to_json"):
        return value.to_json()
    return value
