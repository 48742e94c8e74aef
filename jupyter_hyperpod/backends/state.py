"""Typed backend state, which lives in the ground: `core/state.py` (re-exported here)."""

from ..core.state import BackendState, StrictState, register_state, state_class

__all__ = ["BackendState", "StrictState", "register_state", "state_class"]
