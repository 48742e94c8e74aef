"""What the server extension needs from jupyter_server that is newer than the oldest jupyter_server
of a supported SageMaker Studio image (2.8.0, SageMaker Distribution 1.0), with a fallback.

- `ws_authenticated` (jupyter_server 2.13): before it, a WebSocket handler checked
  `self.current_user` itself in `get` (jupyter_server 2.8's kernel channels `pre_get`); the
  fallback does exactly that: no user, 403, never a redirect to the login page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from tornado import web

F = TypeVar("F", bound=Callable[..., Any])


def _ws_authenticated(method: F) -> F:
    """Refuse (403) a WebSocket request from no authenticated user."""

    @wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.current_user is None:
            self.log.warning("Couldn't authenticate WebSocket connection")
            raise web.HTTPError(403)
        return method(self, *args, **kwargs)

    return cast(F, wrapper)


try:
    from jupyter_server.auth.decorator import ws_authenticated
except ImportError:  # jupyter_server < 2.13
    ws_authenticated = _ws_authenticated
