"""Job history in SQLite: survives restarts of the Jupyter server, shared by the CLI and the magics."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .models import Job, JobSnapshot, JobSpec, JobState, RankInfo

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    user TEXT NOT NULL,
    orchestrator TEXT NOT NULL,
    cluster TEXT NOT NULL,
    backend_id TEXT,
    state TEXT NOT NULL,
    state_reason TEXT,
    created REAL NOT NULL,
    started REAL,
    ended REAL,
    exit_code INTEGER,
    ranks TEXT NOT NULL DEFAULT '[]',
    events TEXT NOT NULL DEFAULT '[]',
    spec TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}'
);
DROP INDEX IF EXISTS jobs_by_scope;
CREATE INDEX IF NOT EXISTS jobs_by_scope_time ON jobs (orchestrator, cluster, user, created, id);
CREATE INDEX IF NOT EXISTS jobs_by_scope_state ON jobs (orchestrator, cluster, user, state, created, id);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS leases (
    owner TEXT PRIMARY KEY,
    expires REAL NOT NULL
);
"""
MIGRATIONS = (
    ("owner", "ALTER TABLE jobs ADD COLUMN owner TEXT"),
    ("snapshot", "ALTER TABLE jobs ADD COLUMN snapshot TEXT"),  # what the job ran (#24)
    ("held", "ALTER TABLE jobs ADD COLUMN held TEXT"),  # why a held job waits (core/holds.py)
)
"""Columns added since the first schema: added to an existing store when it is opened."""
DECODED_ROWS = 4096
"""Decoded rows kept (keyed by the row's values: a changed row is decoded again)."""

_COLUMNS = (
    "id, name, user, orchestrator, cluster, backend_id, state, state_reason, created, started, "
    "ended, exit_code, ranks, events, spec, data, snapshot, held"
)


class JobStore:
    """One row per job. Safe across threads (one write connection and its lock, one read
    connection per thread) and processes (WAL)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, timeout=30, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        for column, statement in MIGRATIONS:
            if column not in have:
                with contextlib.suppress(sqlite3.OperationalError):  # another process was first
                    self._db.execute(statement)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._decoded: dict[tuple[Any, ...], tuple[Job, str, dict[str, Any]]] = {}

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._readers_lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()

    def _reader(self) -> sqlite3.Connection:
        """This thread's own connection for reads: with WAL, a read never waits for a write
        (of this process's refresh, or another's claim), nor for the write connection's lock."""
        reader: sqlite3.Connection | None = getattr(self._local, "db", None)
        if reader is None:
            reader = sqlite3.connect(
                self.path, check_same_thread=False, timeout=30, isolation_level=None
            )
            self._local.db = reader
            with self._readers_lock:  # not the write lock: a waiting write must not hold it
                self._readers.append(reader)
        return reader

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._reader().execute(sql, args).fetchall()

    def _count(self, where: str, args: Sequence[Any]) -> int:
        """COUNT(*) of the rows `where` selects, counted again only after a commit: a list poll
        of a long history asks for the same total again and again (100,000 rows: ~7 ms a count).
        `PRAGMA data_version` of this thread's reader changes with every commit of any other
        connection, this process's writer and other processes' included (the reader never
        writes)."""
        reader = self._reader()
        version = reader.execute("PRAGMA data_version").fetchone()[0]
        counts: dict[tuple[Any, ...], int] = getattr(self._local, "counts", {})
        if getattr(self._local, "counts_version", None) != version:
            counts = {}
            self._local.counts, self._local.counts_version = counts, version
        key = (where, *args)
        if key not in counts:
            counts[key] = reader.execute(
                f"SELECT COUNT(*) FROM jobs WHERE {where}", args
            ).fetchone()[0]
        return counts[key]

    def _decode(self, row: tuple[Any, ...]) -> tuple[Job, str, dict[str, Any]]:
        """A row as (job, cluster, data); a row already decoded (same values) is not parsed
        and validated again, only copied (a list poll reads the same rows again and again)."""
        found = self._decoded.get(row)
        if found is None:
            found = _decode(row)
            if len(self._decoded) >= DECODED_ROWS:
                self._decoded.clear()
            self._decoded[row] = found
        job, cluster, data = found
        return job.model_copy(), cluster, dict(data)

    @contextmanager
    def _cursor(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def insert(
        self, job: Job, cluster: str, data: dict[str, Any], *, owner: str | None = None
    ) -> None:
        """A new row; `owner`: the service that starts it (the local queue's leases), written
        in the same statement."""
        with self._cursor() as cursor:
            cursor.execute(
                f"INSERT INTO jobs ({_COLUMNS}, owner) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job.id,
                    job.name,
                    job.user,
                    job.orchestrator,
                    cluster,
                    job.backend_id,
                    job.state.value,
                    job.state_reason,
                    job.created,
                    job.started,
                    job.ended,
                    job.exit_code,
                    _dump([r.model_dump() for r in job.ranks]),
                    _dump(job.events),
                    job.spec.model_dump_json(),
                    _dump(data),
                    job.snapshot.model_dump_json() if job.snapshot else None,
                    job.held,
                    owner,
                ),
            )

    def update(self, job_id: str, **fields: Any) -> None:
        """Update columns; `ranks`, `events` and `data` take Python objects."""
        if not fields:
            return
        encoded: dict[str, Any] = {}
        for key, value in fields.items():
            if key == "state":
                encoded[key] = JobState(value).value
            elif key == "ranks":
                encoded[key] = _dump(
                    [r.model_dump() if isinstance(r, RankInfo) else r for r in value]
                )
            elif key in ("events", "data"):
                encoded[key] = _dump(value)
            else:
                encoded[key] = value
        assignments = ", ".join(f"{key} = ?" for key in encoded)
        with self._cursor() as cursor:
            cursor.execute(
                f"UPDATE jobs SET {assignments} WHERE id = ?", (*encoded.values(), job_id)
            )

    def delete(self, job_id: str) -> None:
        """Forget a job (its row only: the caller decides about its files)."""
        with self._cursor() as cursor:
            cursor.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def get(self, job_id: str) -> tuple[Job, str, dict[str, Any]] | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return self._decode(rows[0]) if rows else None

    def query(
        self,
        *,
        orchestrator: str,
        cluster: str,
        user: str,
        states: list[JobState] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[list[tuple[Job, str, dict[str, Any]]], int]:
        where = "orchestrator = ? AND cluster = ? AND user = ?"
        args: list[Any] = [orchestrator, cluster, user]
        if states:
            where += f" AND state IN ({','.join('?' * len(states))})"
            args += [s.value for s in states]
        total = self._count(where, args)
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE {where} ORDER BY created DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        return [self._decode(row) for row in self._rows(sql, args)], total

    def everyone(
        self, *, orchestrator: str, cluster: str, states: list[JobState] | None = None
    ) -> list[tuple[Job, str, dict[str, Any]]]:
        """Every user's jobs on one cluster (the local queue of all servers sharing this store)."""
        where = "orchestrator = ? AND cluster = ?"
        args: list[Any] = [orchestrator, cluster]
        if states:
            where += f" AND state IN ({','.join('?' * len(states))})"
            args += [s.value for s in states]
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobs WHERE {where} ORDER BY created, id", args)
        return [self._decode(row) for row in rows]

    # -- the local queue, shared by every process that opens this store -----------------------
    def renew_lease(self, owner: str, ttl: float) -> None:
        """`owner` (one service in one process) is alive for ttl more seconds."""
        with self._cursor() as cursor:
            cursor.execute(
                "INSERT INTO leases (owner, expires) VALUES (?, ?) "
                "ON CONFLICT(owner) DO UPDATE SET expires = excluded.expires",
                (owner, time.time() + ttl),
            )

    def drop_lease(self, owner: str) -> None:
        with self._cursor() as cursor:
            cursor.execute("DELETE FROM leases WHERE owner = ?", (owner,))

    def owner_of(self, job_id: str) -> str | None:
        with self._cursor() as cursor:
            row = cursor.execute("SELECT owner FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def owner_alive(self, job_id: str) -> bool:
        """The service that owns the job still holds its lease."""
        with self._cursor() as cursor:
            row = cursor.execute(
                "SELECT 1 FROM jobs JOIN leases ON leases.owner = jobs.owner "
                "WHERE jobs.id = ? AND leases.expires > ?",
                (job_id, time.time()),
            ).fetchone()
        return row is not None

    def claim_start(
        self, job_id: str, owner: str, *, orchestrator: str, cluster: str, limit: int
    ) -> str | None:
        """Atomically (one write transaction, whichever process asks) mark a PENDING job
        RUNNING if it may start now: it is the oldest pending job of the cluster, fewer than
        `limit` jobs run there, and it is `owner`'s or its owner is gone (lease expired).
        None when it was claimed; otherwise why it waits."""
        with self._cursor() as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                reason = self._may_start(cursor, job_id, owner, orchestrator, cluster, limit)
                if reason is None:
                    cursor.execute(
                        "UPDATE jobs SET state = 'RUNNING', owner = ?, state_reason = NULL, "
                        "started = ? WHERE id = ?",
                        (owner, time.time(), job_id),
                    )
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
        return reason

    @staticmethod
    def _may_start(
        cursor: sqlite3.Cursor, job_id: str, owner: str, orchestrator: str, cluster: str, limit: int
    ) -> str | None:
        row = cursor.execute("SELECT state, owner FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or row[0] != JobState.PENDING.value:
            return "the job is not pending"
        if row[1] not in (None, owner):
            alive = cursor.execute(
                "SELECT 1 FROM leases WHERE owner = ? AND expires > ?", (row[1], time.time())
            ).fetchone()
            if alive:
                return "queued by another process sharing this job store: it starts the job"
        scope = "orchestrator = ? AND cluster = ?"
        # Queued jobs only: a row still being submitted (no job directory yet) holds no place.
        older = cursor.execute(
            f"SELECT id FROM jobs WHERE {scope} AND state = 'PENDING' "
            "AND json_extract(data, '$.job_dir') IS NOT NULL ORDER BY created, id LIMIT 1",
            (orchestrator, cluster),
        ).fetchone()
        if older is not None and older[0] != job_id:
            return f"job {older[0]} was queued first"
        running = cursor.execute(
            f"SELECT COUNT(*) FROM jobs WHERE {scope} AND state = 'RUNNING'",
            (orchestrator, cluster),
        ).fetchone()[0]
        if running >= limit:
            return f"{running} job(s) already running"
        return None

    # -- held jobs (core/holds.py) and chains (core/chains.py) ------------------------------
    def claim_held(self, job_id: str, owner: str) -> bool:
        """Clear the hold of a still held PENDING job (one write): True for the one caller,
        whichever process, that did; it then starts or cancels the job, as its new `owner`
        (the lease that says a start under way is not one left behind)."""
        with self._cursor() as cursor:
            cursor.execute(
                "UPDATE jobs SET held = NULL, owner = ? WHERE id = ? AND state = 'PENDING' "
                "AND held IS NOT NULL",
                (owner, job_id),
            )
            return cursor.rowcount == 1

    def set_held(self, job_id: str, reason: str) -> None:
        """A held job's new reason (also its state_reason, what lists show)."""
        with self._cursor() as cursor:
            cursor.execute(
                "UPDATE jobs SET held = ?, state_reason = ? WHERE id = ? AND held IS NOT NULL",
                (reason, reason, job_id),
            )

    def dependents(self, job_ids: Sequence[str], *, user: str) -> list[Job]:
        """The user's jobs whose spec waits for one of job_ids (`JobSpec.after`), oldest first."""
        if not job_ids:
            return []
        marks = ",".join("?" * len(job_ids))
        rows = self._rows(
            f"SELECT DISTINCT {', '.join('jobs.' + c.strip() for c in _COLUMNS.split(','))} "
            "FROM jobs, json_each(jobs.spec, '$.after') AS after "
            f"WHERE jobs.user = ? AND after.value IN ({marks}) ORDER BY jobs.created, jobs.id",
            (user, *job_ids),
        )
        return [self._decode(row)[0] for row in rows]

    def sweep_members(
        self, *, orchestrator: str, cluster: str, user: str, group: str | None = None
    ) -> list[Job]:
        """The user's sweep members here (`JobSpec.sweep`, #24 item 3): one group's, or every
        group's, oldest first."""
        where = "orchestrator = ? AND cluster = ? AND user = ?"
        args: list[Any] = [orchestrator, cluster, user]
        if group is None:
            where += " AND json_extract(spec, '$.sweep.group') IS NOT NULL"
        else:
            where += " AND json_extract(spec, '$.sweep.group') = ?"
            args.append(group)
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobs WHERE {where} ORDER BY created, id", args)
        return [self._decode(row)[0] for row in rows]

    def data_of(self, orchestrator: str) -> list[tuple[str, dict[str, Any]]]:
        """(id, backend data) of every job of one backend kind (to migrate its state model)."""
        with self._cursor() as cursor:
            rows = cursor.execute(
                "SELECT id, data FROM jobs WHERE orchestrator = ?", (orchestrator,)
            ).fetchall()
        return [(job_id, json.loads(data)) for job_id, data in rows]

    def cancel_pending(self, job_id: str) -> bool:
        """CANCELLED if it is still PENDING (no process claimed it meanwhile): True if so."""
        with self._cursor() as cursor:
            cursor.execute(
                "UPDATE jobs SET state = 'CANCELLED', state_reason = ?, ended = ? "
                "WHERE id = ? AND state = 'PENDING'",
                ("cancelled before it started", time.time(), job_id),
            )
            return cursor.rowcount == 1

    def running_dirs(self, *, orchestrator: str, cluster: str) -> dict[str, str]:
        """job id -> stored `job_dir` of every running job of the cluster (all processes)."""
        with self._cursor() as cursor:
            rows = cursor.execute(
                "SELECT id, data FROM jobs WHERE orchestrator = ? AND cluster = ? "
                "AND state = 'RUNNING'",
                (orchestrator, cluster),
            ).fetchall()
        found = {}
        for job_id, data in rows:
            job_dir = json.loads(data).get("job_dir")
            if job_dir:
                found[job_id] = str(job_dir)
        return found

    def backend_ids(self, *, orchestrator: str, cluster: str, user: str) -> dict[str, str]:
        """backend id -> job id of one user's jobs on one cluster (which queue rows are known)."""
        with self._cursor() as cursor:
            rows = cursor.execute(
                "SELECT backend_id, id FROM jobs WHERE orchestrator = ? AND cluster = ? "
                "AND user = ? AND backend_id IS NOT NULL",
                (orchestrator, cluster, user),
            ).fetchall()
        return {backend_id: job_id for backend_id, job_id in rows}


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _decode(row: tuple[Any, ...]) -> tuple[Job, str, dict[str, Any]]:
    (
        job_id,
        name,
        user,
        orchestrator,
        cluster,
        backend_id,
        state,
        reason,
        created,
        started,
        ended,
        exit_code,
        ranks,
        events,
        spec,
        data,
        snapshot,
        held,
    ) = row
    job = Job(
        id=job_id,
        name=name,
        user=user,
        orchestrator=orchestrator,
        backend_id=backend_id,
        state=JobState(state),
        state_reason=reason,
        created=created,
        started=started,
        ended=ended,
        exit_code=exit_code,
        ranks=[RankInfo(**r) for r in json.loads(ranks)],
        events=json.loads(events),
        spec=JobSpec.model_validate_json(spec),
        snapshot=JobSnapshot.model_validate_json(snapshot) if snapshot else None,
        held=held,
    )
    return job, cluster, json.loads(data)


def now() -> float:
    return time.time()
