"""Names and bases every model module shares: the job name pattern, the job state, strict input
models and the error body of every 4xx/5xx."""

from __future__ import annotations

import re
from enum import Enum

from pydantic import BaseModel, ConfigDict

JOB_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$"
"""RFC 1123 label, short enough for Kubernetes to append pod suffixes; valid for Slurm too."""


ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


NODE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
"""A Slurm node or Kubernetes node name (RFC 1123 subdomain, Slurm's host names)."""


class JobState(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody
