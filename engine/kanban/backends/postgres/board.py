""":class:`PgBoard`: the board on a PostgreSQL server, behind the same interface as the
SQLite :class:`engine.kanban.backends.sqlite.store.Board` (``transaction()``, ``fetch()``, the reads),
so the transitions, the dispatcher and the breaker run on it unchanged.

Why these choices:

- **One connection per process**, serialised like the SQLite board's (a transaction holds
  the lock from BEGIN to COMMIT), so a read never sees half of another coroutine's
  transaction. Each transition is one server transaction: a lost server means the whole
  change is rolled back, never half applied; nothing is retried for the caller.
- **The server may go away.** A lost connection turns into :class:`BoardUnreachable`
  (a :class:`StoreError`: the CLI prints one line and exits 1); the next call connects
  again, so a long-lived holder (the app) recovers by itself when the server returns.
  A statement the server refuses for a reason of the moment (``lock_timeout``,
  ``statement_timeout``, a deadlock, a serialization failure, no resources) is a
  :class:`StatementRefused`, and the driver's own refusal ("another operation is in
  progress") a :class:`DriverFault`: both are BoardUnreachable, so every holder that
  waits out an outage waits these out too (``errors`` says why).
- **READ COMMITTED + compare-and-set**: the transitions' ``UPDATE ... WHERE status = ?
  AND current_run_id IS ?`` re-check the row after waiting for a concurrent writer, so
  the loser sees ``rowcount == 0`` exactly as on SQLite. Claims skip rows another
  host is claiming (``FOR UPDATE SKIP LOCKED``) instead of waiting for them.
- **The dispatch lock is per host**: two dispatchers of one host serialise
  (``skipped_locked``), dispatchers of different hosts run at once.
- **One clock: the server's.** Every time the board writes or compares (leases, claims,
  heartbeats, runs, events) is :meth:`PgBoard.now`: the server's ``clock_timestamp()``,
  read when the connection opens and again with every tick's dispatch lock (no extra
  round trip), advanced between readings by this host's monotonic clock. A host whose
  wall clock is wrong sees the same time as every other host. (A test may pin the
  board's clock instead: ``clock=``, the boundary it fakes.)
- **Why it subclasses the SQLite Board** rather than standing beside it: the reads
  (``list_tasks``, ``board_view``, ``details``, ``events``...) are written once, in SQL
  that :mod:`engine.kanban.backends.postgres.dialect` turns into PostgreSQL's, with the
  same row shapes; PgBoard replaces only the connection, the locks, the clock and the
  leases. Splitting them would mean writing every read twice, or moving the reads into
  a third shared module for no gain.
- **A tick in five statements** (:meth:`PgBoard.first_look`, :meth:`claim_cards`,
  :meth:`record_launches`, which the dispatcher uses when the board has them): each
  statement is a round trip to a server that may be a network away
  (:mod:`engine.kanban.backends.postgres.tick` says how they stay as safe).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

from engine.kanban.backend import StoreError
from engine.kanban.backends.postgres import schema, tick
from engine.kanban.backends.postgres.dialect import rowcount_of, to_postgres
from engine.kanban.backends.postgres.errors import (
    BoardConflict,
    BoardUnreachable,
    DriverFault,
    NoBoardYet,
    StatementRefused,
    UnusableUrl,
)
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.backends.sqlite.store import Board

Clock = Callable[[], float]
T = TypeVar("T")
CONNECT_TIMEOUT_SECONDS = 10.0
# The server's clock, in the board's unit (seconds since the epoch).
SERVER_NOW = "extract(epoch FROM clock_timestamp())::float8"

# What a lost or unreachable server looks like from asyncpg (an InterfaceError is the
# driver's: lost only when its connection is closed, see PgBoard._error).
_LOST = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError,
         asyncpg.PostgresConnectionError,
         asyncpg.exceptions.AdminShutdownError, asyncpg.exceptions.CrashShutdownError,
         asyncpg.exceptions.CannotConnectNowError, asyncpg.exceptions.ConnectionFailureError)
# Statements the server refuses for a reason of the moment: the transaction is rolled
# back whole, and the same statement may pass a moment later (class 40: a deadlock, a
# serialization failure; 55P03: lock_timeout; 57014: statement_timeout or a cancel;
# class 53: no disk, memory or connection slot left).
_OF_THE_MOMENT = (asyncpg.exceptions.TransactionRollbackError, asyncpg.exceptions.LockNotAvailableError,
                  asyncpg.exceptions.QueryCanceledError, asyncpg.exceptions.InsufficientResourcesError)


class _Result:
    """What callers read from an ``execute``, as from an SQLite cursor: the rows it
    touched and, for an insert of one run or event, its id."""

    def __init__(self, rowcount: int, lastrowid: int | None = None) -> None:
        self.rowcount = rowcount
        self.lastrowid = lastrowid


# An insert of one row (``VALUES (?, ?, 'x')``): executemany sends it as multi-row inserts.
_ONE_ROW_INSERT = re.compile(r"^(\s*INSERT(?:\s+OR\s+IGNORE)?\s+INTO\s+\w+\s*\([^)]*\)\s*VALUES\s*)(\([^()]*\))\s*$",
                             re.IGNORECASE)
MAX_PARAMETERS = 30000  # PostgreSQL's limit is 65535 per statement

# Inserts whose new id a caller may want (``cursor.lastrowid`` on SQLite).
_ID_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(task_runs|task_events)\b(?!.*\bRETURNING\b)",
                        re.IGNORECASE | re.DOTALL)


class PgConnection:
    """The slice of the SQLite connection's API the board's SQL code uses (``execute``,
    ``execute_fetchall``, ``executemany``), spoken to asyncpg: statements are translated
    by :func:`engine.kanban.backends.postgres.dialect.to_postgres`, rows come back as tuples."""

    def __init__(self, raw: asyncpg.Connection, errors: Callable[[BaseException], BaseException]) -> None:
        self.raw = raw
        self._errors = errors

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> _Result:
        try:
            if _ID_INSERT.match(sql) and "),(" not in sql.replace(" ", ""):
                rows = await self.raw.fetch(to_postgres(sql) + " RETURNING id", *params)
                return _Result(len(rows), rows[-1][0] if rows else None)
            return _Result(rowcount_of(await self.raw.execute(to_postgres(sql), *params)))
        except (asyncpg.PostgresError, *_LOST) as exc:
            raise self._errors(exc) from None

    async def execute_fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        try:
            return [tuple(r) for r in await self.raw.fetch(to_postgres(sql), *params)]
        except (asyncpg.PostgresError, *_LOST) as exc:
            raise self._errors(exc) from None

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        try:
            one_row = _ONE_ROW_INSERT.match(sql)
            if one_row and len(rows) > 1:
                await self._insert_rows(one_row.group(1), one_row.group(2), rows)
            else:
                await self.raw.executemany(to_postgres(sql), rows)
        except (asyncpg.PostgresError, *_LOST) as exc:
            raise self._errors(exc) from None

    async def _insert_rows(self, head: str, values: str, rows: list[tuple]) -> None:
        """Many rows in few statements (``VALUES (...), (...), ...``): one server round
        trip and one plan per chunk instead of one execution per row."""
        per_chunk = max(1, MAX_PARAMETERS // max(1, len(rows[0])))
        for i in range(0, len(rows), per_chunk):
            chunk = rows[i : i + per_chunk]
            await self.raw.execute(to_postgres(head + ", ".join([values] * len(chunk))),
                                   *[v for row in chunk for v in row])


class PgBoard(Board):
    """One PostgreSQL board on one (re-opened when lost) connection."""

    def __init__(self, url: DatabaseUrl, clock: Clock | None = None, host_key: str | None = None) -> None:
        super().__init__(None, url, clock or time.time)  # type: ignore[arg-type] - connected in open()
        self._pinned_clock = clock  # None: the server's clock (see the module doc)
        self._server_time = 0.0  # the server's clock_timestamp() at the last reading ...
        self._read_at = time.monotonic()  # ... and this host's monotonic clock then
        self.url = url
        self.host_key = host_key
        self._raw: asyncpg.Connection | None = None
        self._local_dispatch = asyncio.Lock()
        self._listener: asyncpg.Connection | None = None
        self._guard_held = False  # this session holds the host's dispatch lock

    # -- opening ----------------------------------------------------------------------

    @classmethod
    async def open(cls, url: DatabaseUrl, *, clock: Clock | None = None, create: bool = True,
                   host_key: str | None = None) -> PgBoard:
        board = cls(url, clock, host_key)
        await board._connect()
        try:
            await board._check_and_set_up(create)
        except BaseException:
            await board.close()
            raise
        return board

    async def _connect(self) -> PgConnection:
        if self._raw is not None and not self._raw.is_closed():
            return self.conn
        if self._guard_held:  # a new session would not hold the dispatch lock: end the tick instead
            raise BoardUnreachable(f"the board database {self.url} dropped the connection that held this "
                                   "host's dispatch lock")
        try:
            self._raw = await asyncpg.connect(dsn=self.url.secret, timeout=CONNECT_TIMEOUT_SECONDS,
                                              server_settings={"application_name": "hermes-tui",
                                                               # a float as text (json) is exact
                                                               "extra_float_digits": "3"})
        except ValueError as exc:  # asyncpg's own DSN parser (ClientConfigurationError included)
            self._raw = None
            raise UnusableUrl(f"the board database URL {self.url} is not usable: {self.url.scrub(str(exc))}") \
                from None
        except (asyncpg.PostgresError, *_LOST) as exc:
            self._raw = None
            raise self._error(exc) from None
        self.conn = PgConnection(self._raw, self._error)
        rows = await self.conn.execute_fetchall(f"SELECT {SERVER_NOW}")
        self._server_read(rows[0][0])
        return self.conn

    # -- the clock ------------------------------------------------------------------------

    def _server_read(self, server_time: float) -> None:
        self._server_time, self._read_at = float(server_time), time.monotonic()

    def now(self) -> float:
        """The board's time: the server's clock (never this host's wall clock), or the
        clock a test pinned."""
        if self._pinned_clock is not None:
            return float(self._pinned_clock())
        return self._server_time + (time.monotonic() - self._read_at)

    def _error(self, exc: BaseException) -> BaseException:
        """One line naming the board without its password; a lost connection is dropped
        so the next call connects again."""
        text = self.url.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        driver = isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError)) \
            and self._raw is not None and not self._raw.is_closed()
        if isinstance(exc, _LOST):
            listener_too = not driver  # the listener went with the server too; not with a driver fault
            for raw in (self._raw, self._listener) if listener_too else (self._raw,):
                if raw is not None:
                    raw.terminate()
            self._raw = None
            if listener_too:
                self._listener = None
            if driver:
                return DriverFault(f"the board database {self.url}: the database driver refused a call on "
                                   f"this connection ({text}); a new connection is opened")
            return BoardUnreachable(f"the board database {self.url} cannot be reached: {text}")
        if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
            return sqlite3.IntegrityError(text)  # the transitions' "id collided" branch
        if isinstance(exc, (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)):
            return BoardConflict(f"the board database {self.url} refused a statement (it gave way to another "
                                 f"host's change): {text}")
        if isinstance(exc, _OF_THE_MOMENT):
            return StatementRefused(f"the board database {self.url} refused a statement: {text}")
        return StoreError(f"the board database {self.url} refused a statement: {text}")

    async def _check_and_set_up(self, create: bool) -> None:
        meta, tables = await self._ownership()
        if meta is not None and not schema.refusal(str(self.url), meta=meta, other_tables=tables) \
                and int(meta["schema_version"]) == schema.SCHEMA_VERSION:
            return
        why = schema.refusal(str(self.url), meta=meta, other_tables=tables)
        if why:
            raise StoreError(why)
        if meta is None and not create:
            raise NoBoardYet(f"no board in {self.url} yet")
        async with self.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(?)", (schema.SETUP_LOCK_KEY,))
            meta, tables = await self._ownership()  # another host may have done it meanwhile
            why = schema.refusal(str(self.url), meta=meta, other_tables=tables)
            if why:
                raise StoreError(why)
            version = 0 if meta is None else int(meta["schema_version"])
            for step in range(version, schema.SCHEMA_VERSION):
                for statement in schema.MIGRATIONS[step]:
                    await conn.raw.execute(statement)  # DDL: no parameters, no translation
            await conn.execute(
                f"INSERT INTO {schema.META_TABLE} (key, value) VALUES ('application', ?), ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (schema.APPLICATION, str(schema.SCHEMA_VERSION)))

    async def _ownership(self) -> tuple[dict[str, str] | None, list[str]]:
        """(our meta row as a dict, or None when there is no meta table; every other
        table in the current schema)."""
        tables = [r[0] for r in await self.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
        if schema.META_TABLE not in tables:
            return None, tables
        rows = await self.fetch(f"SELECT key, value FROM {schema.META_TABLE}")
        return {k: v for k, v in rows}, [t for t in tables if t not in schema.OUR_TABLES]

    # -- live updates -------------------------------------------------------------------------

    async def listen(self, on_change: Callable[[], None]) -> bool:
        """Call ``on_change`` (on this event loop) after every committed event on the
        board, from any host: LISTEN on a connection of its own. True while listening;
        after a lost server, call again to listen anew (a no-op while still listening)."""
        if self._listener is not None and not self._listener.is_closed():
            return True
        try:
            listener = await asyncpg.connect(dsn=self.url.secret, timeout=CONNECT_TIMEOUT_SECONDS,
                                             server_settings={"application_name": "hermes-tui listen"})
            await listener.add_listener(schema.NOTIFY_CHANNEL, lambda *_args: on_change())
        except (asyncpg.PostgresError, *_LOST) as exc:
            raise self._error(exc) from None
        self._listener = listener
        return True

    async def close(self) -> None:
        listener, raw = self._listener, self._raw
        self._listener = self._raw = None
        for conn in (listener, raw):
            if conn is not None and not conn.is_closed():
                try:
                    await asyncio.wait_for(conn.close(), timeout=5)
                except (asyncpg.PostgresError, *_LOST):
                    conn.terminate()  # a server that does not answer: drop the socket

    @property
    def worker_location(self) -> str:
        """What a worker's ``HERMES_KANBAN_DB`` holds: the URL it connects with."""
        return self.url.secret

    # -- transactions and reads ----------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        """One server transaction (rolled back on any exception, or by the server when
        the connection is lost: never half applied)."""
        async with self._tx_lock.held():
            conn = await self._connect()
            try:
                tx = conn.raw.transaction()
                await tx.start()
            except (asyncpg.PostgresError, *_LOST) as exc:
                raise self._error(exc) from None
            try:
                yield conn
            except BaseException:
                if self._raw is not None and not self._raw.is_closed():
                    try:
                        await tx.rollback()
                    except (asyncpg.PostgresError, *_LOST):
                        pass
                raise
            try:
                await tx.commit()
            except (asyncpg.PostgresError, *_LOST) as exc:
                raise self._error(exc) from None

    async def atomic(self, body: Callable[[PgConnection], Awaitable[T]]) -> T:
        """``body(conn)`` as one server transaction, each statement a round trip."""
        async with self.transaction() as conn:
            return await body(conn)

    async def fetch(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        async with self._tx_lock.held():
            conn = await self._connect()
            return await conn.execute_fetchall(sql, tuple(params))

    async def fetch_many(self, queries: Sequence[tuple[str, Iterable[Any]]]) -> list[list[tuple]]:
        return [await self.fetch(sql, params) for sql, params in queries]

    async def data_version(self) -> object:
        """None: a server board has no cheap version; it announces changes (NOTIFY) instead."""
        return None

    # -- dispatching ------------------------------------------------------------------------

    @asynccontextmanager
    async def dispatch_guard(self) -> AsyncIterator[bool]:
        """True while this process holds this host's dispatch lock on the server (a
        session advisory lock keyed by the host), False when another dispatcher of the
        same host holds it. Other hosts dispatch at the same time."""
        if self._local_dispatch.locked():
            yield False
            return
        from engine.kanban.workers import hostname

        async with self._local_dispatch:
            key = zlib.crc32(f"hermes-tui dispatch {self.host_key or hostname()}".encode()) - 2**31
            rows = await self.fetch(f"SELECT pg_try_advisory_lock(?, ?), {SERVER_NOW}", (schema.SETUP_LOCK_KEY, key))
            self._server_read(rows[0][1])  # the tick's reading of the server's clock
            if not rows[0][0]:
                yield False
                return
            self._guard_held = True
            try:
                yield True
            finally:
                self._guard_held = False
                if self._raw is not None and not self._raw.is_closed():
                    await self.fetch("SELECT pg_advisory_unlock(?, ?)", (schema.SETUP_LOCK_KEY, key))

    async def lock_profiles(self, conn: PgConnection, profiles: Sequence[str]) -> None:
        """Until this transaction ends, no other host claims for these (capped) profiles:
        their caps are counted again under the lock (sorted: no two hosts deadlock)."""
        for profile in sorted(profiles):
            await conn.execute("SELECT pg_advisory_xact_lock(?, ?)",
                               (schema.PROFILE_LOCK_KEY, zlib.crc32(profile.encode()) - 2**31))

    async def renew_lease(self, host_id: str, boot: str, now: float, lease_seconds: float) -> list[str]:
        """Renew this host's lease (one row per host: its id, boot and expiry); return
        the other hosts whose lease has run out. A live lease of this host id held by
        another boot is not taken: :class:`HostIdInUse`."""
        # One statement, one round trip, atomic on its own: the renewal in a data-changing
        # WITH, and the other hosts as they were (the outer SELECT does not see the
        # renewal, and leaves this host out anyway).
        rows = await self.fetch(
            tick.RENEW + "SELECT " + tick.LOST + ", " + tick.RENEWAL,
            (*tick.renew_params(host_id, boot, now, lease_seconds), host_id))
        lost, renewed, held = rows[0]
        tick.refuse_unless_renewed(renewed, held, host_id, boot, now)
        return list(lost or ())

    has_host_leases = True

    async def live_hosts(self, now: float) -> list[str]:
        """The hosts whose lease runs past ``now`` (the board's, that is the server's, time)."""
        return [r[0] for r in await self.fetch(f"SELECT h.host_id FROM hosts h WHERE {tick.LEASE_LIVE} "
                                               "ORDER BY h.host_id", (now, now))]

    def no_live_lease_sql(self, host: str, now: float) -> tuple[str, tuple]:
        """SQL true while ``host`` holds no live lease at ``now``, with its parameters.
        A statement that takes another host's card on its lease (``host_lost``, the
        stale claim of a host without one) carries it, so the lease is judged by the
        statement that acts, not by a read that came before it: a host that renewed
        meanwhile (this tick paused, or slow) keeps its cards."""
        return f"NOT EXISTS (SELECT 1 FROM hosts h WHERE h.host_id = ? AND {tick.LEASE_LIVE})", (host, now, now)

    # -- the tick in few round trips (see engine.kanban.backends.postgres.tick) ------------

    async def first_look(self, *, live: str, promotable: str, ready: tick.Ordered, launching: tick.Ordered,
                         host_id: str, boot: str, now: float,
                         lease_seconds: float) -> tuple[list[tuple], list[tuple], list[tuple], list[tuple], list[str]]:
        """The tick's first reads, each as :meth:`fetch` would give its rows (``live``;
        ``promotable``; the ``ready`` cards and the ``launching`` runs, each given in parts
        (columns, source, order), in that order), and the lease renewal
        (:meth:`renew_lease`, whose answer comes fifth: the other hosts whose lease ran
        out), in one statement. Raises :class:`HostIdInUse`, before anything acts on the
        reads, when another boot holds this host id's live lease."""
        rows = await self.fetch(tick.first_look_sql(live, promotable, ready, launching),
                                (*tick.renew_params(host_id, boot, now, lease_seconds), host_id))
        is_live, promotable_ids, ready_rows, launching_rows, lost, renewed, held = rows[0]
        tick.refuse_unless_renewed(renewed, held, host_id, boot, now)
        return ([(is_live,)], [(i,) for i in promotable_ids or ()], tick.json_rows(ready_rows),
                tick.json_rows(launching_rows), list(lost or ()))

    async def claim_cards(self, conn: PgConnection | None, cards: Sequence[tuple[str, str, str]],
                          events: Sequence[tuple[str, str, dict | None, bool]], **values: Any) -> list[tuple]:
        """Claim ``cards`` (id, profile, launch token) in one statement (:data:`tick.CLAIM`):
        the cards still ready and unclaimed become running with a ``launching`` run each,
        and ``events`` of the cards won are written. On ``conn`` (inside its transaction),
        or on its own (its own transaction). Returns (id, run id, title, body) of each card
        won, by id. ``values``: see :func:`tick.claim_params`."""
        params = tick.claim_params(cards, events, **values)
        if conn is None:
            return await self.fetch(tick.CLAIM, params)
        return await conn.execute_fetchall(tick.CLAIM, params)

    async def record_launches(self, workers: Sequence[tuple], **values: Any) -> list[tuple]:
        """Record launched workers in one statement (:data:`tick.RECORD`): each on its run
        (a run still launching becomes running) and its card (while the card is still on
        that run), with its ``spawned`` event. Returns (run id, card id, outcome, pid,
        fingerprint, claim lock) of the runs that ended meanwhile by an outcome other than
        a worker's own, by run id. ``values``: see :func:`tick.record_params`."""
        return await self.fetch(tick.RECORD, tick.record_params(workers, **values))

    def claim_statement(self, count: int) -> str:
        """The claim's compare-and-set, skipping cards another host is claiming right now."""
        marks = ",".join("?" * count)
        return ("UPDATE tasks SET status = ?, assignee = COALESCE(assignee, ?), claim_lock = ?, claim_expires = ?, "
                "started_at = COALESCE(started_at, ?), last_heartbeat_at = NULL WHERE id IN ("
                f"SELECT id FROM tasks WHERE id IN ({marks}) AND status = ? AND claim_lock IS NULL "
                "ORDER BY id FOR UPDATE SKIP LOCKED) RETURNING id")
