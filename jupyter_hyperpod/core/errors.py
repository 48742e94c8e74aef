"""Typed errors raised by the core and the backends; the handlers map each to one HTTP status."""

from __future__ import annotations

from pydantic import ValidationError

from .names import name_problem


class HyperPodError(Exception):
    """Base error: `code` is stable for clients, `message` is for a person, `field` names the input."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "field": self.field}


class InvalidRequest(HyperPodError):
    status = 400
    code = "invalid_request"


class PathNotAllowed(HyperPodError):
    """A path that would leave the user's partition."""

    status = 403
    code = "path_not_allowed"


class Forbidden(HyperPodError):
    status = 403
    code = "forbidden"


class AwsDenied(Forbidden):
    """AWS (not Jupyter) refused: no credentials or a missing IAM permission."""

    code = "aws_denied"


class NotFound(HyperPodError):
    status = 404
    code = "not_found"


class Conflict(HyperPodError):
    status = 409
    code = "conflict"


class NotConnected(Conflict):
    """The job belongs to a cluster this server is not connected to (after a switch): nothing
    is sent to the connected one in its name."""

    code = "not_connected"


class BackendUnavailable(HyperPodError):
    """The orchestrator (slurmctld, the Kubernetes API, AWS) cannot be reached right now."""

    status = 503
    code = "backend_unavailable"


class StorageUnavailable(HyperPodError):
    """The file system refused a write the server needs (read-only, full, over quota, I/O error)."""

    status = 503
    code = "storage_unavailable"


class BackendError(HyperPodError):
    """The orchestrator answered, but refused or failed the request."""

    status = 502
    code = "backend_error"


def validation_error(error: ValidationError, prefix: str = "") -> InvalidRequest:
    """The first pydantic error as a message a person can act on, naming the field."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "this field is required"
    elif first["type"] == "extra_forbidden":
        message = "unknown field"
    elif first["type"] == "string_pattern_mismatch" and field == "name":
        message = name_problem(str(first.get("input", ""))) or message
    if prefix and field:
        field = f"{prefix}{field}"
    return InvalidRequest(f"{field}: {message}" if field else message, field=field)
