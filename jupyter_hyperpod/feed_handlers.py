"""The job feed's WebSocket (`core/feed.py`): authenticated as the log stream is (its handler's
`pre_get`/`get`: no token, 403 before the upgrade), scoped as `GET jobs` (the feed reads the
server's own user's jobs).

Query: `since` (the last `seq` received; absent: only what happens from now on) and `epoch`
(the `epoch` of the `hello` that numbering came from). Frames: `hello`, then the missed events
(or one `resync`), then each event as the tracker sees it, and a `heartbeat` when nothing
happened for `heartbeat_interval` seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tornado.websocket import WebSocketClosedError

from .core.errors import HyperPodError, InvalidRequest
from .core.feed import JobFeed
from .core.inputs import query_int
from .handlers import LogStreamHandler
from .server_compat import ws_authenticated


class JobFeedHandler(LogStreamHandler):
    """`GET hyperpod/api/feed` (WebSocket): the job changes the tracker sees."""

    _wake: asyncio.Event | None = None
    _unsubscribe: Any = None

    @property
    def feed(self) -> JobFeed:
        return self.settings["hyperpod_feed"]  # type: ignore[no-any-return]

    _since: int | None = None

    async def pre_get(self) -> None:
        """Authorized, then the query checked before the upgrade (a bad one: the JSON 400)."""
        await super().pre_get()
        raw = self.get_argument("since", "")
        if raw:
            since = query_int("since", raw, 0)
            if since < 0:
                raise InvalidRequest(
                    "since must be a seq received from this feed (>= 0)", field="since"
                )
            self._since = since

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        """The log stream's: authenticated, authorized, the query checked, then the upgrade."""
        await super().get(*args, **kwargs)

    def _handle_request_exception(self, error: BaseException) -> None:
        """A bad query (before the upgrade) is its 4xx with the JSON error, not a 500."""
        if isinstance(error, HyperPodError) and not self._finished:
            self.send_error(error.status, exc_info=(type(error), error, error.__traceback__))
            return
        super()._handle_request_exception(error)  # type: ignore[arg-type]

    async def open(self) -> None:  # type: ignore[override]
        since = self._since
        epoch = self.get_argument("epoch", "") or None
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        wake = self._wake

        def woken() -> None:  # in the tracker's thread
            loop.call_soon_threadsafe(wake.set)

        self._unsubscribe = self.feed.subscribe(woken)
        self.service.tracker.nudge(now=True)  # someone watches: look at the jobs now
        self._task = asyncio.ensure_future(self._push(since, epoch))

    def on_close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        super().on_close()

    async def _push(self, since: int | None, epoch: str | None) -> None:
        feed = self.feed
        now, hello = feed.hello()
        seq = now if since is None else since
        try:
            await self.write_message(hello)
            heartbeat = float(self.service.settings.heartbeat_interval)
            assert self._wake is not None
            while True:
                self._wake.clear()
                events = feed.since(seq, epoch)
                epoch = None
                for number, text in events:
                    await self.write_message(text)
                    seq = number
                if not events:
                    try:
                        await asyncio.wait_for(self._wake.wait(), heartbeat)
                    except TimeoutError:
                        await self.write_message(feed.heartbeat(seq))
        except WebSocketClosedError:
            pass
