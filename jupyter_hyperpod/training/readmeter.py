"""How many checkpoint bytes this process read: the evidence for `cpu_ram_efficient_loading`.

transformers reads safetensors checkpoints through `safetensors.safe_open` (imported into
`transformers.modeling_utils`; `get_slice` per tensor, materialised when indexed). We wrap that
one entry point and count the bytes of every tensor it hands out, so a rank that never opens
the checkpoint reports 0 and a rank that loads the model reports the checkpoint's size.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_bytes = 0
_installed = False


def bytes_read() -> int:
    return _bytes


def _count(tensor: Any) -> Any:
    global _bytes
    nbytes = getattr(tensor, "nbytes", None)
    if nbytes is not None:
        with _lock:
            _bytes += int(nbytes)
    return tensor


class _Slice:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getitem__(self, index: Any) -> Any:
        return _count(self._inner[index])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Handle:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __enter__(self) -> _Handle:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)

    def get_tensor(self, name: str) -> Any:
        return _count(self._inner.get_tensor(name))

    def get_slice(self, name: str) -> _Slice:
        return _Slice(self._inner.get_slice(name))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    """Count from now on (idempotent)."""
    global _installed
    if _installed:
        return
    import safetensors
    import transformers.modeling_utils as modeling_utils

    original = safetensors.safe_open

    def metered_safe_open(*args: Any, **kwargs: Any) -> _Handle:
        return _Handle(original(*args, **kwargs))

    modeling_utils.safe_open = metered_safe_open  # type: ignore[assignment]
    _installed = True
