"""The backend interface, which lives in the ground: `core/backend.py` (re-exported here for
the backends and for code written against this module)."""

from ..core.backend import (
    FileLogReader,
    JobUpdate,
    Launch,
    LogReader,
    Orchestrator,
    RenderedJob,
    StoredJob,
)

__all__ = [
    "FileLogReader",
    "JobUpdate",
    "Launch",
    "LogReader",
    "Orchestrator",
    "RenderedJob",
    "StoredJob",
]
