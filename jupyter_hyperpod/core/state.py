"""Typed backend state: what a backend keeps with each job (`StoredJob.data`), one model per
backend, stored as JSON in the job store's `data` column.

Each backend declares its model (`Orchestrator.State`); the service loads a stored row with
`load` (which also migrates rows written by older versions: keys that moved or went are dropped,
the others validated) and merges what a backend reports with `merged`. A backend reports
changes as a partial state of its own model (`JobUpdate.data = State(pid=12)`: only the fields
given are set, validated where the backend builds it): it cannot store a key its model does not
declare, nor a value of the wrong type.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from .models import OperatorVerdict

log = logging.getLogger(__name__)


class BackendState(BaseModel):
    """The facts every backend's state has; a backend without its own model keeps any key."""

    model_config = ConfigDict(extra="allow")

    mlflow_uri: str | None = None
    """The tracking URI given to the job (where its metrics are read from)."""
    adopted: bool = False
    """The job was created outside this server and adopted from the cluster's queue."""
    operator_verdict: OperatorVerdict | None = None
    """The cluster operator's own last hang/slow verdict, decided by a backend whose operator
    has one (Kubernetes: HyperPod's training operator)."""

    retired: ClassVar[tuple[str, ...]] = ()
    """Keys older versions stored that this model no longer keeps (dropped on load)."""

    @classmethod
    def load(cls, data: dict[str, Any] | BackendState | None) -> Self:
        """A stored row's state, migrated: retired keys dropped; keys the model does not know
        (a newer version's, or a bug's) dropped with a warning instead of failing the read."""
        if isinstance(data, cls):
            return data
        if isinstance(data, BackendState):
            data = data.stored()
        values = {key: value for key, value in (data or {}).items() if key not in cls.retired}
        if cls.model_config.get("extra") == "forbid":
            unknown = set(values) - set(cls.model_fields)
            if unknown:
                log.warning(
                    "dropping unknown %s keys: %s", cls.__name__, ", ".join(sorted(unknown))
                )
                values = {key: value for key, value in values.items() if key not in unknown}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            log.warning("stored %s is invalid, keeping what validates: %s", cls.__name__, error)
            good: dict[str, Any] = {}
            for key, value in values.items():
                try:
                    cls.model_validate({**good, key: value})
                except ValidationError:
                    continue
                good[key] = value
            return cls.model_validate(good)

    def changes(self) -> dict[str, Any]:
        """The facts set on this state when it was built (a backend's report, `JobUpdate.data`:
        `State(pid=12)` sets pid only), as the store keeps them; an explicit None clears one."""
        return self.model_dump(mode="json", exclude_unset=True)

    def changed(self, **facts: Any) -> Self:
        """This partial state with more facts set (a backend adding to its report): what
        `changes` returns keeps the facts set before and these."""
        return type(self).model_validate({**self.changes(), **facts})

    def merged(self, changes: BackendState | Mapping[str, Any] | None) -> Self:
        """This state with a backend's reported changes (a partial state, validated when the
        backend built it; or a mapping of fields), validated as a whole (a key of another
        backend's model refused)."""
        if changes is None:
            return self
        if isinstance(changes, BackendState):
            changes = changes.changes()
        if not changes:
            return self
        return type(self).model_validate({**self.stored(), **changes})

    def stored(self) -> dict[str, Any]:
        """What goes into the store's JSON column (unset optional facts left out)."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)


class StrictState(BackendState):
    """A backend's own model: only its declared keys."""

    model_config = ConfigDict(extra="forbid")


_STATES: dict[str, type[BackendState]] = {}


def register_state(kind: str, state: type[BackendState]) -> None:
    _STATES[kind] = state


def registered_state(kind: str) -> type[BackendState] | None:
    """The state model a loaded backend of that kind registered, if one did (importing the
    backend's module is the registry's job: `registry.state_class`)."""
    return _STATES.get(kind)
