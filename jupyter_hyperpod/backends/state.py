"""Typed backend state, which lives in the ground: `core/state.py` (re-exported here)."""

from ..core.registry import state_class
from ..core.state import BackendState, StrictState, register_state

__all__ = ["BackendState", "StrictState", "register_state", "state_class"]
