"""One rank's log as a byte-addressable file: a thread follows the worker pod's log and appends it
to a spool file; readers read the spool at byte offsets like every other backend's log.

The follower waits for the pod to exist and start, reconnects when the stream is cut (skipping what
it already has of that container), and continues with the new container after a restart or a
recreated pod (HyperPod auto-resume), marking the restart in the log. A finished spool is marked
done and never fetched again, so logs outlive the pods.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.backend import FileLogReader
from ...core.errors import BackendError, HyperPodError, NotFound
from ...core.preallocate import RoomAhead
from .chunked import Pieces, log_payloads
from .client import CONNECT_TIMEOUT, KubeClient
from .jobs import main_container_status

log = logging.getLogger(__name__)

# Pieces a spool write takes at once (a read of one-line chunks holds thousands; IOV_MAX is 1024).
IOV_BATCH = 512
# A quiet training step can take minutes; a cut connection is noticed after this many seconds.
STREAM_READ_TIMEOUT = 120.0
# torchrun --tee=3 prefixes each local rank's lines with "[<role><local_rank>]:" (role "default").
LOCAL_RANK_PREFIX = re.compile(rb"^\[([A-Za-z_-]*?)(\d+)\]:")
# A follower nobody has read for this long is stopped (its spool stays; a reader restarts it).
FOLLOWER_LINGER_S = 120.0
# Once a job has ended, its followed logs are drained before anyone is told: the log stream of a
# finished container ends within moments, so this bound is rarely reached.
DRAIN_TIMEOUT_S = 15.0


class RankSplitter:
    """Splits a pod log holding several local ranks (torchrun --tee) into one file per rank; lines
    without a prefix (torchrun itself, our restart notes) go to the pod's first rank.

    torchrun's tee copies each rank's output a `readline()` at a time, one thread a rank
    (torch.distributed.elastic.multiprocessing.tail_log.tail_logfile). A rank whose `print` writes
    the text and its newline apart (PYTHONUNBUFFERED, which the training operators set) can be
    read between the two: the pod log then holds "[default2]:loss 0.3[default0]:done" and later
    "[default2]:" alone. A prefix of the same role inside a line starts another rank's piece, and
    a piece without its newline waits for the rest of its rank's line."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.files = [open(path, "ab") for path in paths]  # noqa: SIM115 - closed in close()
        self.pending = b""
        self.partial: dict[int, bytes] = {}  # a rank's line whose newline has not come yet
        self._markers: dict[bytes, re.Pattern[bytes]] = {}

    def write(self, data: bytes) -> None:
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        touched: set[int] = set()
        for line in lines:
            match = LOCAL_RANK_PREFIX.match(line)
            if not match or int(match.group(2)) >= len(self.files):
                self.files[0].write(line + b"\n")
                touched.add(0)
                continue
            pieces = self._pieces(line, match)
            for index, text in pieces[:-1]:  # cut short by another rank's piece
                self.partial[index] = self.partial.get(index, b"") + text
            index, text = pieces[-1]
            self.files[index].write(self.partial.pop(index, b"") + text + b"\n")
            touched.add(index)
        for index in touched:
            self.files[index].flush()

    def _pieces(self, line: bytes, match: re.Match[bytes]) -> list[tuple[int, bytes]]:
        """A prefixed line as (local rank, text) pieces, cut at each later prefix of its role."""
        role = match.group(1)
        marker = self._markers.get(role)
        if marker is None:
            marker = self._markers[role] = re.compile(rb"\[" + re.escape(role) + rb"(\d+)\]:")
        pieces: list[tuple[int, bytes]] = []
        index, start = int(match.group(2)), match.end()
        for inner in marker.finditer(line, start):
            if int(inner.group(1)) < len(self.files):
                pieces.append((index, line[start : inner.start()]))
                index, start = int(inner.group(1)), inner.end()
        pieces.append((index, line[start:]))
        return pieces

    def close(self) -> None:
        if self.pending:
            self.write(b"\n")
        for index, text in self.partial.items():  # a rank that never ended its last line
            self.files[index].write(text + b"\n")
        self.partial.clear()
        for handle in self.files:
            handle.close()


class PodLogFollower:
    """Appends the log of the pod that currently holds one rank to `spool`."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        container: str,
        spool: Path,
        find_pod: Callable[[], dict[str, Any] | None],
        job_over: Callable[[], bool],
        label: str,
        rank_paths: list[Path] | None = None,
        poll_interval: float = 1.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.container = container
        self.spool = spool
        self.rank_paths = rank_paths or []
        self._splitter: RankSplitter | None = None
        self.state_path = spool.with_suffix(".state.json")
        self.find_pod = find_pod
        self.job_over = job_over
        self.label = label
        self.poll_interval = poll_interval
        self.refs = 0
        self.idle_since = time.monotonic()
        self.error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ended = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()
        state = self._load_state()
        self.done = bool(state.get("done"))
        self._key: list[Any] | None = state.get("key")
        self._seen = int(state.get("seen", 0))
        self._saved: dict[str, Any] | None = state or None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self.done or self._thread is not None:
            return
        # (The files are created by the thread: a reader of a file not there yet reads nothing,
        # and the caller -- a request -- is not held up by file system calls.)
        self._thread = threading.Thread(target=self._run, name=f"k8s-log-{self.label}", daemon=True)
        self._thread.start()

    def wait_done(self, timeout: float) -> bool:
        """Wait until the rank's log is complete (or the follower stops); True when done."""
        if self.done or self._thread is None:
            return self.done
        self.nudge()
        self._ended.wait(timeout)
        return self.done

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- state --------------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save_state(self) -> None:
        state = {"key": self._key, "seen": self._seen, "done": self.done}
        if state == self._saved:
            return  # (a write and a rename per look would cost more than the log itself)
        try:
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state), encoding="utf-8")
            tmp.replace(self.state_path)
            self._saved = state
        except OSError as exc:
            log.warning("cannot save log state %s: %s", self.state_path, exc)

    # -- the loop -----------------------------------------------------------------------------
    def _wait(self, seconds: float) -> bool:
        """Sleep until the next look; True when stopping. `nudge()` cuts the sleep short. What
        was streamed is recorded first (a stream's end is recorded here, or with `done`)."""
        self._save_state()
        self._wake.wait(seconds)
        self._wake.clear()
        return self._stop.is_set()

    def nudge(self) -> None:
        """Look again now (the job ended, or the API is back): skip the rest of a backoff."""
        self._wake.set()

    def _run(self) -> None:
        delay = self.poll_interval
        try:
            self.spool.parent.mkdir(parents=True, exist_ok=True)
            for path in self.rank_paths:
                path.touch(exist_ok=True)
            if self.rank_paths:
                self._splitter = RankSplitter(self.rank_paths)
            with _Spool(self.spool, self._splitter) as out:
                while not self._stop.is_set():
                    try:
                        finished = self._step(out)
                        self.error = None
                    except HyperPodError as exc:
                        # API down or refused: keep what we have, try again later.
                        self.error = exc.message
                        finished = False
                        delay = min(delay * 2, 15.0)
                        if self._wait(delay):
                            break
                        continue
                    if self.error is None and delay > self.poll_interval:
                        log.info("log follower %s reconnected", self.label)
                    if finished:
                        self.done = True
                        self._save_state()
                        return
                    delay = self.poll_interval
        except Exception:
            log.exception("log follower %s failed", self.label)
        finally:
            if self._splitter is not None:
                self._splitter.close()
            self._save_state()
            self._ended.set()

    def _step(self, out: _Spool) -> bool:
        """One look at the pod: stream what is new; True when this rank's log is complete."""
        pod = self.find_pod()
        if pod is None:
            if self.job_over():
                return True
            self._wait(self.poll_interval)
            return False
        status = main_container_status(pod)
        state = status.get("state") or {}
        phase = (pod.get("status") or {}).get("phase")
        started = "running" in state or "terminated" in state
        if not started:
            if phase in ("Succeeded", "Failed") or (phase is None and self.job_over()):
                return True
            self._wait(self.poll_interval)
            return False
        uid = (pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name")
        key = [uid, status.get("containerID") or int(status.get("restartCount") or 0)]
        if key != self._key:
            restarts = int(status.get("restartCount") or 0)
            name = (pod.get("metadata") or {}).get("name")
            if self._key is None and restarts > 0:
                # The container restarted before we first looked: its predecessor's log is only
                # available as `previous` (Kubernetes keeps one).
                self._fetch_previous(pod, out)
            if self._key is not None or restarts > 0:
                out.append_line(
                    f"[jupyter-hyperpod] {self.label} restarted (pod {name}, restart {restarts})"
                )
            self._key, self._seen = key, 0
        elif "terminated" in state:
            # Everything of this container is already in the spool: wait for a restart or the end.
            # A failed pod is not the end while the job runs: a HyperPodPyTorchJob makes it again.
            if phase == "Succeeded" or self.job_over():
                return True
            self._wait(self.poll_interval)
            return False
        before = self._seen
        self._stream(pod, out)
        if self._seen == before:
            # Nothing new (the container is ending, or its status lags): do not spin on the API.
            self._wait(min(self.poll_interval, 0.25))
        return False

    def _fetch_previous(self, pod: dict[str, Any], out: _Spool) -> None:
        name = (pod.get("metadata") or {}).get("name")
        try:
            response = self.kube.call(
                f"read the previous log of pod {name}",
                self.kube.core.read_namespaced_pod_log,
                name,
                self.namespace,
                container=self.container,
                previous=True,
                _preload_content=False,
            )
        except (NotFound, BackendError):
            return  # none kept (400 from the API): nothing to add
        try:
            for pieces in log_payloads(response):
                out.append(pieces)
        finally:
            _close(response)

    def _stream(self, pod: dict[str, Any], out: _Spool) -> None:
        name = (pod.get("metadata") or {}).get("name")
        try:
            response = self.kube.call(
                f"follow the log of pod {name}",
                self.kube.core.read_namespaced_pod_log,
                name,
                self.namespace,
                container=self.container,
                follow=True,
                _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT, STREAM_READ_TIMEOUT),
            )
        except NotFound:
            return
        with self._lock:
            self._response = response
        skip = self._seen
        last_save = time.monotonic()
        try:
            for pieces in log_payloads(response):
                if self._stop.is_set():
                    break
                if skip:  # reconnected: what this container's log already gave is in the spool
                    data = b"".join(pieces)
                    if len(data) <= skip:
                        skip -= len(data)
                        continue
                    pieces, skip = [memoryview(data)[skip:]], 0
                self._seen += out.append(pieces)
                if time.monotonic() - last_save > 1.0:
                    self._save_state()
                    last_save = time.monotonic()
        except Exception as exc:
            if not self._stop.is_set():
                log.debug("log stream of %s ended: %s", name, exc)
        finally:
            with self._lock:
                self._response = None
            _close(response)


def _close(response: Any) -> None:
    """Close a log response and hand its (closed) connection back: a body read in part, or
    decoded by `log_payloads` past http.client, must not be reused for another request."""
    with contextlib.suppress(Exception):
        response.close()
    with contextlib.suppress(Exception):
        response.release_conn()


class _Spool:
    """The spool file, appended to with one `writev` a read (no copy of the data in Python), with
    room reserved ahead where the file system gains from it (`core/preallocate.py`), and the
    per-rank split when the pod holds several ranks."""

    def __init__(
        self,
        path: Path,
        splitter: RankSplitter | None,
        room: Callable[[int], RoomAhead] = RoomAhead,
    ) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
        try:
            self.room = room(self.fd)
            self.ends_line = _ends_line(path)
            """Whether what the spool holds ends with a newline (or is empty)."""
        except BaseException:
            os.close(self.fd)
            raise
        self.splitter = splitter

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *_: object) -> None:
        try:
            self.room.release()
        finally:
            os.close(self.fd)

    def append(self, pieces: Pieces) -> int:
        """Write the pieces in order; how many bytes."""
        size = 0
        if self.room.active:
            self.room.before_append(sum(map(len, pieces)))
        for start in range(0, len(pieces), IOV_BATCH):
            batch = pieces[start : start + IOV_BATCH]
            total = sum(map(len, batch))
            written = os.writev(self.fd, batch)
            if written < total:  # a short write (a signal, a nearly full disk): the rest in turn
                rest = memoryview(b"".join(batch))[written:]
                while rest:
                    rest = rest[os.write(self.fd, rest) :]
            size += total
        self.room.appended(size)
        last = next((piece for piece in reversed(pieces) if len(piece)), None)
        if last is not None:
            self.ends_line = last[-1] == NEWLINE
        if self.splitter is not None:
            self.splitter.write(b"".join(pieces))
        return size

    def append_line(self, text: str) -> None:
        """A line of our own (a restart note) on a line of its own: a container killed between
        a `print`'s text and its newline (PYTHONUNBUFFERED writes them apart) leaves its last
        line open."""
        line = text if self.ends_line else f"\n{text}"
        self.append([memoryview(f"{line}\n".encode())])


NEWLINE = ord("\n")


def _ends_line(path: Path) -> bool:
    """Whether the file is empty or its last byte is a newline (a spool opened again)."""
    with open(path, "rb") as spool:
        size = spool.seek(0, os.SEEK_END)
        if size == 0:
            return True
        spool.seek(size - 1)
        return spool.read(1) == b"\n"


class FollowerPool:
    """The log followers of one backend, by key (job id, worker): one follower a pod's log however
    many readers it has, for our jobs and adopted ones alike. A reader takes one (`open`) and
    gives it back when closed (`release`); followers nobody has read for `linger` seconds stop
    (`sweep`), their spool kept; `close` stops all. Each job's spool directory is found once."""

    def __init__(
        self, *, linger: float = FOLLOWER_LINGER_S, drain_timeout: float = DRAIN_TIMEOUT_S
    ) -> None:
        self.linger = linger
        self.drain_timeout = drain_timeout
        self._followers: dict[tuple[str, int], PodLogFollower] = {}
        self._lock = threading.Lock()
        self._spool_dirs: dict[str, Path] = {}

    def spool_dir(self, job_id: str, job_dir: str | None) -> Path:
        """Where a job's spools go: `<job dir>/k8s-logs` where writable, else the user's cache."""
        known = self._spool_dirs.get(job_id)
        if known is None:
            self._spool_dirs[job_id] = known = _find_spool_dir(job_id, job_dir)
        return known

    def open(
        self, key: tuple[str, int], make: Callable[[], PodLogFollower], *, finished: bool
    ) -> PodLogFollower:
        """The running (or complete) follower of `key`, made by `make` when there is none or it
        died; one more reader of it. A finished job's log is read to its end at once: the
        follower fetches it first (at most `drain_timeout`)."""
        self.sweep()
        with self._lock:
            follower = self._followers.get(key)
            if follower is None or (not follower.alive and not follower.done):
                follower = make()
                self._followers[key] = follower
            follower.refs += 1
            follower.start()
        if finished:
            follower.wait_done(self.drain_timeout)
        return follower

    def release(self, follower: PodLogFollower) -> None:
        with self._lock:
            follower.refs = max(0, follower.refs - 1)
            if follower.refs == 0:
                follower.idle_since = time.monotonic()

    def sweep(self) -> None:
        """Stop followers nobody has read for a while (their spool stays; a reader restarts them)."""
        now = time.monotonic()
        stale: list[PodLogFollower] = []
        with self._lock:
            for key, follower in list(self._followers.items()):
                if follower.refs == 0 and (
                    follower.done or now - follower.idle_since > self.linger
                ):
                    stale.append(follower)
                    del self._followers[key]
        for follower in stale:
            follower.stop(timeout=1.0)

    def close(self) -> None:
        with self._lock:
            followers = list(self._followers.values())
            self._followers.clear()
        for follower in followers:
            follower.stop()


def _find_spool_dir(job_id: str, job_dir: str | None) -> Path:
    if job_dir:
        candidate = Path(job_dir) / "k8s-logs"
        with contextlib.suppress(OSError):
            candidate.mkdir(parents=True, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return candidate
    cache = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    fallback = cache / "jupyter-hyperpod" / "k8s-logs" / job_id
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


class SpoolLogReader(FileLogReader):
    """A rank's spool file; closing it lets the backend stop an idle follower."""

    def __init__(
        self,
        follower: PodLogFollower,
        release: Callable[[PodLogFollower], None],
        path: Path | None = None,
    ) -> None:
        super().__init__(path or follower.spool)
        self.follower = follower
        self._release: Callable[[PodLogFollower], None] | None = release

    def wait_complete(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """The job has finished: wait (at most timeout) until the pod's log stream has been read
        to its end, so that a final read misses nothing (called by the follow loop of
        `core/logprotocol.py`, in a worker thread, never by the status refresh)."""
        self.follower.wait_done(timeout)

    def close(self) -> None:
        super().close()
        if self._release is not None:
            self._release(self.follower)
            self._release = None
