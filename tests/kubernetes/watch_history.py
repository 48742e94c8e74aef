"""What the API server keeps so that clients can watch from a `resourceVersion`: one global
revision counter (etcd's), a window of recent change events per resource (the watch cache), and
compaction, after which older versions answer 410 Gone. The emulator (emulator.py) records every
write here and serves `?watch=true` from it.

Behaviours follow https://kubernetes.io/docs/reference/using-api/api-concepts/ (cited beside each
one as "api-concepts#<section>") and kube-apiserver's watch cache
(staging/src/k8s.io/apiserver/pkg/storage/cacher: watch_cache.go, cache_watcher.go).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

# kube-apiserver's cache_watcher.go sends a bookmark about once a minute (bookmarkFrequency),
# and one shortly before a watch's timeout ends, so that a client restarts from a fresh version.
BOOKMARK_EVERY_S = 60.0
BOOKMARK_BEFORE_END_S = 2.0
# watch_cache.go keeps a bounded window of events per resource (defaultLowerBoundCapacity ..
# defaultUpperBoundCapacity, 100 .. 100*1024); older versions are "too old".
WINDOW = 10_000


def expired(requested: int, oldest: int) -> dict[str, Any]:
    """The watch event for a version older than the window: a Status 410 with reason Expired
    (apimachinery errors.NewResourceExpired, as cacher.go's errWatcher sends it in a 200 stream;
    api-concepts#efficient-detection-of-changes: "clients must handle the case by recognizing
    the status code 410 Gone, clearing their local cache, performing a new get or list")."""
    return {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {requested} ({oldest})",
            "reason": "Expired",
            "code": 410,
        },
    }


class WatchHistory:
    """Revisions and per-resource change windows; lives in the emulator's event loop."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.revision = 0
        self.events: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        # The oldest version still watchable per resource (everything after it is kept).
        self.oldest: dict[str, int] = {}
        self.bookmark_every = BOOKMARK_EVERY_S
        self.cuts = 0
        self._changed = asyncio.Event()

    def bump(self) -> int:
        """The next revision: every write gets its own, across all resources (api-concepts
        #resource-versions: "identifies the internal version of this object", from etcd)."""
        self.revision += 1
        return self.revision

    def record(self, resource: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Record one change at a new revision, stamping it on the object (which the store
        shares) and on the event's copy. A DELETED event carries the object's last state with
        the deletion's revision (api-concepts#efficient-detection-of-changes, example)."""
        revision = self.bump()
        metadata = obj.setdefault("metadata", {})
        if kind != "DELETED":
            metadata["resourceVersion"] = str(revision)
        snapshot = copy.deepcopy(obj)
        snapshot["metadata"]["resourceVersion"] = str(revision)
        events = self.events.setdefault(resource, [])
        events.append((revision, {"type": kind, "object": snapshot}))
        if len(events) > self.window:
            dropped = len(events) - self.window
            self.oldest[resource] = events[dropped - 1][0]
            del events[:dropped]
        self._changed.set()
        self._changed = asyncio.Event()
        return snapshot

    def compact(self, resource: str | None = None) -> None:
        """Forget the history (etcd compaction, or the window overrun): a watch from any version
        before now answers 410 (api-concepts#efficient-detection-of-changes: "A given Kubernetes
        server will only preserve a historical record of changes for a limited time")."""
        for name in [resource] if resource else list({*self.events, *self.oldest}):
            self.events[name] = []
            self.oldest[name] = self.revision

    def cut(self) -> None:
        """End every open watch at once, without a last bookmark (a dropped connection: a
        load balancer's idle timeout, an API server replica going away)."""
        self.cuts += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def too_old(self, resource: str, version: int) -> bool:
        return version < self.oldest.get(resource, 0)

    async def follow(
        self,
        resource: str,
        since: int,
        *,
        timeout: float | None,
        bookmarks: bool,
        bookmark_object: Callable[[int], dict[str, Any]],
        keep: Callable[[dict[str, Any]], bool],
        serving: Callable[[], bool],
    ) -> AsyncIterator[dict[str, Any]]:
        """The events after `since`, then the changes as they come, until the timeout (the API
        server ends a watch after `timeoutSeconds`; api-concepts#efficient-detection-of-changes)
        or the server stops. With `allowWatchBookmarks=true`, BOOKMARK events whose object is of
        the watched kind with only `metadata.resourceVersion` set (api-concepts#watch-bookmarks)
        tell the client how far it has seen even when no event matched its selector."""
        loop = asyncio.get_running_loop()
        deadline = None if not timeout else loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_every
        position = since
        cuts = self.cuts
        while serving() and cuts == self.cuts:
            if self.too_old(resource, position):
                # Changes this watch had not sent yet left the window before it took them: the
                # cacher ends a watcher that cannot keep up (cacher.go, dispatchTimeoutBudget:
                # waiting on not-ready watchers "before shutting them down"), and the client's
                # watch again from its last version answers 410 (`too_old`), so it lists again.
                return
            events = self.events.get(resource, [])
            start = bisect.bisect_right(events, position, key=lambda item: item[0])
            for revision, event in events[start:]:
                position = revision
                if keep(event["object"]):
                    yield event
            now = loop.time()
            if bookmarks and (
                now >= next_bookmark
                or (deadline is not None and now >= deadline - BOOKMARK_BEFORE_END_S)
            ):
                # The bookmark names the latest revision: nothing this watch wants is between.
                position = max(position, self.revision)
                yield {"type": "BOOKMARK", "object": bookmark_object(position)}
                next_bookmark = now + self.bookmark_every
                if deadline is not None and now >= deadline - BOOKMARK_BEFORE_END_S:
                    bookmarks = False  # one before the end
            if deadline is not None and now >= deadline:
                return
            wait = 0.25  # also notices a stopping server promptly
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - now))
            changed = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), wait)
