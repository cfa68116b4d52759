"""The board file: an SQLite database on one connection with a thread of its own
(:mod:`engine.kanban.backends.sqlite.connection`).

Why these choices:
- WAL + ``synchronous=FULL``: readers (the pane, ``list``) never wait for a writer, and a
  committed transition survives a power cut.
- Every write is ``BEGIN IMMEDIATE`` (take the write lock up front, so two dispatchers
  serialise instead of deadlocking on a lock upgrade) plus compare-and-set UPDATEs
  whose losers see ``rowcount == 0``.
- The board is the file at its path *as it was opened*: its identity (``st_dev`` and
  ``st_ino``, a stat, never an open) is checked before every statement, and a board
  removed or replaced since is a :class:`BoardGone` (one line), never read or written
  again through the connection that still holds the unlinked file.
- The file is ours only if its ``application_id`` says so. A file that is not SQLite,
  that SQLite cannot read, that belongs to something else, or that was written by a
  newer hermes-tui is refused with one line; it is never recreated or overwritten.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sqlite3
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from engine.kanban.backend import MIN_ID_PREFIX, BadId, BoardGone, StoreError, UnknownTask
from engine.kanban.backends.sqlite.connection import SqliteConnection, fetch_each
from engine.kanban.dispatch_lock import dispatch_lock
from engine.kanban.models import Event, Run, Task, TaskDetails, load_payload

APPLICATION_ID = 0x484B4E42  # "HKNB": hermes kanban board
BUSY_TIMEOUT_SECONDS = 30.0

Clock = Callable[[], float]
T = TypeVar("T")


class Conn(Protocol):
    """The statements a transaction runs: the SQLite connection's (on its thread) or a
    PostgreSQL board's (``engine.kanban.backends.postgres.board.PgConnection``)."""

    async def execute(self, sql: str, params: Iterable[Any] = ...) -> Any: ...

    async def execute_fetchall(self, sql: str, params: Iterable[Any] = ...) -> list: ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


# --------------------------------------------------------------------------------------
# Schema and migrations (PRAGMA user_version = index of the last applied step)
# --------------------------------------------------------------------------------------

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            assignee TEXT,
            status TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            started_at REAL,
            completed_at REAL,
            claim_lock TEXT,
            claim_expires REAL,
            worker_pid INTEGER,
            worker_started_at TEXT,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            max_retries INTEGER,
            max_runtime_seconds REAL,
            last_failure_error TEXT,
            last_heartbeat_at REAL,
            current_run_id INTEGER,
            result TEXT
        )""",
        "CREATE INDEX tasks_by_status ON tasks(status, priority DESC, created_at, id)",
        """CREATE TABLE task_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL,
            profile TEXT,
            status TEXT NOT NULL,
            claim_lock TEXT,
            claim_expires REAL,
            worker_pid INTEGER,
            worker_started_at TEXT,
            process_id TEXT,
            output_path TEXT,
            log_offset INTEGER NOT NULL DEFAULT 0,
            started_at REAL NOT NULL,
            ended_at REAL,
            outcome TEXT,
            error TEXT,
            summary TEXT
        )""",
        "CREATE INDEX runs_by_task ON task_runs(task_id, id)",
        "CREATE INDEX runs_with_evidence ON task_runs(ended_at) "
        "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL",
        """CREATE TABLE task_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL,
            run_id INTEGER,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX events_by_task ON task_events(task_id, id)",
        """CREATE TABLE task_links (
            parent_id TEXT NOT NULL,
            child_id TEXT NOT NULL,
            PRIMARY KEY (parent_id, child_id)
        )""",
        "CREATE INDEX links_by_child ON task_links(child_id, parent_id)",
    ),
    (
        # Usage a worker reports for its run (`kanban usage`): one row per run, the latest
        # report wins. A run without a row has no known usage (never shown as zero).
        """CREATE TABLE run_usage (
            run_id INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd REAL,
            reported_at REAL NOT NULL
        )""",
        "CREATE INDEX usage_by_task ON run_usage(task_id, run_id)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
USAGE_STEP = 1  # the SQLite step that makes run_usage (the PostgreSQL board repeats it)

TASK_COLUMNS = (
    "id, title, body, assignee, status, priority, created_at, started_at, completed_at, "
    "claim_lock, claim_expires, worker_pid, worker_started_at, consecutive_failures, "
    "max_retries, max_runtime_seconds, last_failure_error, last_heartbeat_at, current_run_id, result"
)
RUN_COLUMNS = (
    "id, task_id, profile, status, claim_lock, worker_pid, worker_started_at, process_id, "
    "output_path, log_offset, started_at, ended_at, outcome, error, summary"
)
EVENT_COLUMNS = "id, task_id, run_id, kind, payload, created_at"


def task_from_row(row: Sequence[Any], parent_ids: tuple[str, ...] = (), session_id: str | None = None) -> Task:
    return Task(*row, parent_ids=parent_ids, session_id=session_id)


def run_from_row(row: Sequence[Any]) -> Run:
    return Run(*row)


def event_from_row(row: Sequence[Any]) -> Event:
    return Event(row[0], row[1], row[2], row[3], load_payload(row[4]), row[5])


def refusal(path: Path, *, app_id: int, version: int, objects: int, pages: int) -> str | None:
    """Why the file at ``path`` is not ours to use, or None when it is (or is a blank
    SQLite database we may initialise)."""
    if pages == 0:
        return (f"{path} is an empty file that hermes-tui did not create; refusing to use it. "
                f"To start a new board, remove it (rm {shlex.quote(str(path))}) and run again")
    # The version before the owner: an empty file from a newer program is not ours to rewrite.
    if version > SCHEMA_VERSION:
        return (f"{path} was written by a newer hermes-tui (schema {version}, "
                f"this one knows {SCHEMA_VERSION}); refusing to use it")
    if app_id == 0 and objects == 0 and version == 0:
        return None  # an empty SQLite database with nothing in it: ours to initialise
    if app_id != APPLICATION_ID:
        return (f"{path} is an SQLite database of another program "
                "(not a hermes-tui board); refusing to use or overwrite it")
    return None


def _not_sqlite(path: Path, exc: sqlite3.DatabaseError) -> StoreError:
    if "file is not a database" in str(exc):  # SQLite's own header check said no
        return StoreError(f"{path} is not an SQLite database (or its header is damaged); "
                          "refusing to use or overwrite it")
    return StoreError(f"{path} is not a readable kanban board (corrupt?): {exc}; refusing to use or overwrite it")


def _precheck(path: Path) -> None:
    """Refuse a file that is not ours before opening it for writing.

    Read through SQLite itself (never Python's open(): see the module doc), with an
    ``immutable`` read-only connection: it takes no lock and creates no -wal/-shm, so a
    foreign file and its folder are left exactly as they were. It reads the main file
    only (not a WAL's newer pages), which is enough to refuse; the read-write open
    checks again, under the write lock, before it changes anything.
    """
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the board {path}: {exc}") from None
    try:
        facts = {name: int(conn.execute(f"PRAGMA {name}").fetchone()[0])
                 for name in ("application_id", "user_version", "page_count")}
        objects = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) if facts["page_count"] else 0
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot open the board {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise _not_sqlite(path, exc) from None
    finally:
        conn.close()
    why = refusal(path, app_id=facts["application_id"], version=facts["user_version"], objects=objects,
                  pages=facts["page_count"])
    if why:
        raise StoreError(why)


def _init_new_board(conn: sqlite3.Connection) -> None:
    """Schema, ownership and WAL for a board being born (its file is not visible yet)."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for step in MIGRATIONS:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()
    conn.execute("PRAGMA journal_mode = WAL")


def _create_board_file(path: Path) -> None:
    """Make a new, complete board at ``path`` (mode 0600) or leave an existing one alone.

    The board is built under a private temporary name in the same folder and hard-linked
    into place (``link`` fails if the name exists): so ``path`` never exists half-made,
    a 0-byte ``kanban.db`` is never one of ours, and two processes creating the board at
    once get exactly one. The temporary file is opened by nothing but SQLite once it has
    been created, and its connection is closed before the link.
    """
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileNotFoundError:
        raise StoreError(f"cannot create the board {path}: its folder does not exist") from None
    except OSError as exc:
        raise StoreError(f"cannot create the board {path}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.execute("BEGIN")
            _init_new_board(conn)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # someone else made it first: theirs is the board
    except sqlite3.Error as exc:
        raise StoreError(f"cannot create the board {path}: {exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot create the board {path}: {exc.strerror or exc}") from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass


Identity = tuple[int, int]  # (st_dev, st_ino) of a board file


def file_identity(path: Path) -> Identity | None:
    """The file at ``path`` now, by a stat (never an open: see the module doc); None
    when nothing (or nothing we may look at) is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _open_board_file(path: Path, create: bool, seen: dict | None = None) -> sqlite3.Connection:
    """The board's connection, checked, migrated and configured (run on the connection's
    thread). No open()/read of the file here: once a connection exists in this process,
    closing any other descriptor of the board would drop SQLite's POSIX locks (see
    docs/architecture.md). Whether the file is SQLite, and ours, SQLite tells us.
    ``seen["identity"]`` is set to the identity of the file the connection holds (the
    same before and after the connect, else the file was replaced meanwhile: refused)."""
    if not path.exists():
        if not create:
            raise StoreError(f"no board at {path}")
        _create_board_file(path)
    _precheck(path)
    before = file_identity(path)
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the board {path}: {exc}") from None
    if before is None or file_identity(path) != before:
        conn.close()
        raise BoardGone(f"the board {path} was removed or replaced while it was being opened; nothing was "
                        "read or written there")
    if seen is not None:
        seen["identity"] = before
    try:
        # Ownership is checked before any pragma that writes the file (journal_mode
        # rewrites the header): a foreign file must stay byte-for-byte as it was.
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        _check_and_migrate(conn, path)
        _use_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 1000")
    except sqlite3.OperationalError as exc:  # busy, read-only, I/O: not the file's fault
        conn.close()
        reader = _reader_on_a_full_disk(path)
        if reader is not None:
            if seen is not None:
                seen["identity"] = file_identity(path)
            return reader
        raise StoreError(f"cannot open the board {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _not_sqlite(path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _reader_on_a_full_disk(path: Path) -> sqlite3.Connection | None:
    """A read must not need to write: on a full disk SQLite cannot make the -shm/-wal a
    WAL connection needs. When the disk is full and the board has no pending WAL (the
    last connection checkpointed it: the main file holds everything), the board is read
    through an ``immutable`` read-only connection, which makes no file; every write on it
    fails with "attempt to write a readonly database" (one line). None otherwise."""
    try:
        if os.statvfs(path.parent).f_bavail > 0:
            return None
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            return None  # newer pages only the WAL holds: an immutable read would miss them
        return sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1", uri=True,
                               isolation_level=None)
    except (OSError, sqlite3.Error):
        return None


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch a new board to WAL. The switch needs the file to itself and SQLite does
    not wait for that (no busy handler), so several processes opening a brand-new
    board at once retry briefly; a board already in WAL needs nothing."""
    for _attempt in range(100):
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(0.05)  # this board's own thread: nothing else waits on it
    raise sqlite3.OperationalError("database is locked (could not switch it to WAL)")


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return int(row[0]) if row else 0


def _check_and_migrate(conn: sqlite3.Connection, path: Path) -> None:
    app_id, version = _pragma(conn, "application_id"), _pragma(conn, "user_version")
    if app_id == APPLICATION_ID and version == SCHEMA_VERSION:
        return
    _refuse_unless_ours(conn, path, app_id, version)
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process may have initialised it.
        app_id, version = _pragma(conn, "application_id"), _pragma(conn, "user_version")
        _refuse_unless_ours(conn, path, app_id, version)
        if app_id == 0:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _refuse_unless_ours(conn: sqlite3.Connection, path: Path, app_id: int, version: int) -> None:
    objects = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    why = refusal(path, app_id=app_id, version=version, objects=objects, pages=_pragma(conn, "page_count"))
    if why:
        raise StoreError(why)


class _OwnedLock:
    """An asyncio lock the holding task may take again (a read inside its own
    transaction must not wait for itself)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task | None = None

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        me = asyncio.current_task()
        if self._owner is me and me is not None:  # taken again inside its own hold
            yield
            return
        async with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None


class Board:
    """One open board on one connection. Every statement is serialised by one lock:
    a transaction (:meth:`transaction`) holds it from BEGIN to COMMIT, and a read
    (:meth:`fetch`) takes it too, so another coroutine never reads half of someone
    else's transaction on the shared connection."""

    def __init__(self, conn: SqliteConnection, path: Path, clock: Clock) -> None:
        self.conn = conn
        self.path = path
        self.clock = clock
        self._tx_lock = _OwnedLock()
        self.identity: Identity | None = None  # the file's (st_dev, st_ino) when opened (None: a server board)

    # -- opening ----------------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path | str, *, clock: Clock = time.time, create: bool = True) -> Board:
        """Open (and, with ``create``, make) the board at ``path``: every step, checks
        included, on the connection's own thread in one hop (:func:`_open_board_file`)."""
        path = Path(path)
        seen: dict = {}
        board = cls(await SqliteConnection.open(partial(_open_board_file, path, create, seen)), path, clock)
        board.identity = seen.get("identity")
        return board

    def gone(self) -> str | None:
        """Why this board is no longer the file at its path (removed, or another file
        there now), or None while it is: a stat of the path, compared with the identity
        it had when opened. Always None for a board that is not a file."""
        if self.identity is None:
            return None
        now = file_identity(self.path)
        if now == self.identity:
            return None
        if now is None:
            return f"the board {self.path} was removed since it was opened; nothing is read or written there"
        return (f"the board {self.path} was replaced by another file since it was opened; nothing is read or "
                "written there")

    def check_same_file(self) -> None:
        """Raise :class:`BoardGone` when the board is no longer the file at its path
        (checked right before every statement: see the module doc)."""
        why = self.gone()
        if why is not None:
            raise BoardGone(why)

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self) -> Board:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transactions -------------------------------------------------------------------

    async def atomic(self, body: Callable[[Conn], Awaitable[T]]) -> T:
        """``body(conn)`` as one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``,
        ``ROLLBACK`` when it raises); returns what the body returns.

        The whole of it is one call on the connection's thread, where the body's
        statements answer at once: so the body may await only ``conn``'s statements and
        coroutines that await nothing else (see :mod:`engine.kanban.backends.sqlite.connection`). A
        PostgreSQL board runs the same body statement by statement."""
        async with self._tx_lock.held():
            self.check_same_file()
            return await self.conn.transact(body)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception), one hop per
        statement; :meth:`atomic` runs a transaction in one."""
        async with self._tx_lock.held():
            self.check_same_file()
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")

    def now(self) -> float:
        return float(self.clock())

    def boot_time(self) -> float:
        """This machine's boot clock (:func:`engine.identity.boot_clock`), which a wall
        clock's step does not move: every age that decides to stop a live worker is
        measured on it. A test's pinned clock may give its own (``boot_time``)."""
        pinned = getattr(self.clock, "boot_time", None)
        return float(pinned()) if pinned is not None else time.clock_gettime(time.CLOCK_BOOTTIME)

    # -- what the dispatcher asks of a store (PgBoard answers differently) ---------------

    @property
    def worker_location(self) -> str:
        """What a worker's ``HERMES_KANBAN_DB`` holds: this board's file."""
        return str(self.path)

    @asynccontextmanager
    async def dispatch_guard(self) -> AsyncIterator[bool]:
        """True while this process holds the board's dispatch lock (a non-blocking
        ``flock`` beside the file), False when another dispatcher holds it."""
        self.check_same_file()  # no lock file is made beside a board that is gone
        with dispatch_lock(self.path) as held:
            yield held

    async def listen(self, on_change: Callable[[], None]) -> bool:
        """A file board announces nothing: False, the caller keeps polling."""
        return False

    async def lock_profiles(self, conn, profiles: Sequence[str]) -> None:
        """Nothing to lock: a file board's transactions already take turns (BEGIN IMMEDIATE)."""

    async def renew_lease(self, host_id: str, boot: str, now: float, lease_seconds: float) -> list[str]:
        """A file board has no host leases (every dispatcher sees the same machine):
        nothing to renew, no host is ever lost."""
        return []

    # Whether hosts hold leases on this board (a shared board): then another host's
    # claim is never reclaimed while its host's lease lives.
    has_host_leases = False

    async def live_hosts(self, now: float) -> list[str]:
        """The hosts whose lease runs past ``now`` (none on a file board)."""
        return []

    def no_live_lease_sql(self, host: str, now: float) -> tuple[str, tuple]:
        """SQL true while ``host`` holds no live lease at ``now`` (always, on a file
        board), with its parameters: what a statement that takes another host's card
        checks again, in itself (see the PostgreSQL board's)."""
        return "1 = 1", ()

    def claim_statement(self, count: int) -> str:
        """The claim's compare-and-set: only cards still ready and unclaimed are taken."""
        marks = ",".join("?" * count)
        return ("UPDATE tasks SET status = ?, assignee = COALESCE(assignee, ?), claim_lock = ?, claim_expires = ?, "
                f"started_at = COALESCE(started_at, ?), last_heartbeat_at = NULL WHERE id IN ({marks}) "
                "AND status = ? AND claim_lock IS NULL RETURNING id")

    # -- reads ----------------------------------------------------------------------------

    async def fetch(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        async with self._tx_lock.held():
            self.check_same_file()
            return list(await self.conn.execute_fetchall(sql, tuple(params)))

    async def fetch_many(self, queries: Sequence[tuple[str, Iterable[Any]]]) -> list[list[tuple]]:
        """The rows of several reads, in order, in one call on the connection's thread."""
        async with self._tx_lock.held():
            self.check_same_file()
            return await self.conn.call(fetch_each, [(sql, tuple(params)) for sql, params in queries])

    async def data_version(self) -> object:
        """A value that differs whenever the board may have changed since it was last
        asked: SQLite's ``data_version`` (commits by other connections) with this
        connection's own change count (``total_changes``). A screen reads the cards only
        when it moved; None would mean "unknown, read them"."""
        async with self._tx_lock.held():
            self.check_same_file()
            return await self.conn.call(_data_version)

    async def resolve_id(self, id_or_prefix: str) -> str:
        """A full id, or a unique prefix of one (``t_1a2`` or ``1a2``)."""
        raw = (id_or_prefix or "").strip()
        if not raw:
            raise UnknownTask("a card id is needed")
        rows = await self.fetch("SELECT id FROM tasks WHERE id = ?", (raw,))
        if rows:
            return rows[0][0]
        prefix = raw if raw.startswith("t_") else "t_" + raw
        if len(prefix) - 2 < MIN_ID_PREFIX:
            raise BadId(f"card id {raw!r} is too short: give at least {MIN_ID_PREFIX} characters after 't_'")
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = await self.fetch("SELECT id FROM tasks WHERE id LIKE ? ESCAPE '\\' LIMIT 2", (escaped + "%",))
        if not rows:
            raise UnknownTask(f"no card {raw!r} on this board")
        if len(rows) > 1:
            raise UnknownTask(f"{raw!r} matches several cards; give more of the id")
        return rows[0][0]

    async def get_task(self, task_id: str) -> Task:
        rows = await self.fetch(f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        if not rows:
            raise UnknownTask(f"no card {task_id!r} on this board")
        return task_from_row(rows[0])

    async def list_tasks(self, statuses: Sequence[str] | None = None) -> list[Task]:
        """Cards (with parents and the open run's process id) in board order."""
        if statuses:
            return await self._tasks_where(f"t.status IN ({','.join('?' * len(statuses))})", list(statuses))
        return await self._tasks_where("1", [])

    async def _tasks_where(self, where: str, params: list[Any]) -> list[Task]:
        rows = await self.fetch(
            f"SELECT {', '.join('t.' + c.strip() for c in TASK_COLUMNS.split(','))}, "
            "(SELECT group_concat(parent_id) FROM task_links WHERE child_id = t.id), "
            "(SELECT process_id FROM task_runs WHERE id = t.current_run_id) "
            f"FROM tasks t WHERE {where} ORDER BY t.priority DESC, t.created_at, t.id",
            params,
        )
        if len(rows) > MANY_ROWS:  # a big board's cards are built off the event loop
            return await asyncio.to_thread(_tasks_from_rows, rows)
        return _tasks_from_rows(rows)

    async def board_view(self, statuses: Sequence[str], recent_limit: int = 100,
                         recent_statuses: Sequence[str] = ("done", "archived")) -> tuple[list[Task], dict[str, int]]:
        """What the board shows: every card of ``statuses``, except that the finished
        columns (``recent_statuses``) hold only their ``recent_limit`` newest cards (a
        board with 50,000 done cards must not redraw them all); plus the full counts."""
        busy = [s for s in statuses if s not in recent_statuses]
        tasks = await self.list_tasks(busy) if busy else []
        for status in (s for s in statuses if s in recent_statuses):
            ids = await self.fetch(
                "SELECT id FROM tasks WHERE status = ? ORDER BY coalesce(completed_at, created_at) DESC, id "
                "LIMIT ?", (status, recent_limit))
            if ids:
                recent = await self.list_tasks_by_id([r[0] for r in ids])
                recent.sort(key=lambda t: (-(t.completed_at or t.created_at), t.id))
                tasks.extend(recent)
        return tasks, await self.counts()

    async def list_tasks_by_id(self, ids: Sequence[str]) -> list[Task]:
        out: list[Task] = []
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            out.extend(await self._tasks_where(f"t.id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    async def runs_of(self, task_id: str) -> list[Run]:
        rows = await self.fetch(f"SELECT {RUN_COLUMNS} FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,))
        return [run_from_row(r) for r in rows]


    async def events(self, task_id: str | None = None, after_id: int = 0, limit: int | None = None) -> list[Event]:
        """Events in order; ``limit`` keeps the newest ``limit`` of them."""
        where = "WHERE id > ?"
        params: list[Any] = [after_id]
        if task_id is not None:
            where += " AND task_id = ?"
            params.append(task_id)
        if limit is not None:
            rows = await self.fetch(
                f"SELECT * FROM (SELECT {EVENT_COLUMNS} FROM task_events {where} ORDER BY id DESC LIMIT ?) AS newest "
                "ORDER BY id", [*params, limit])
        else:
            rows = await self.fetch(f"SELECT {EVENT_COLUMNS} FROM task_events {where} ORDER BY id", params)
        return [event_from_row(r) for r in rows]

    async def last_event_id(self) -> int:
        rows = await self.fetch("SELECT coalesce(max(id), 0) FROM task_events")
        return int(rows[0][0])

    async def latest_events(self, kinds: Sequence[str], statuses: Sequence[str]) -> dict[str, Event]:
        """The newest event of one of ``kinds`` of each card now in one of ``statuses``
        (one read: which block a blocked card is in, and since when)."""
        k, s = ",".join("?" * len(kinds)), ",".join("?" * len(statuses))
        rows = await self.fetch(
            f"SELECT {EVENT_COLUMNS} FROM task_events WHERE id IN (SELECT max(e.id) FROM task_events e "
            f"JOIN tasks t ON t.id = e.task_id WHERE t.status IN ({s}) AND e.kind IN ({k}) GROUP BY e.task_id)",
            [*statuses, *kinds])
        return {e.task_id: e for e in map(event_from_row, rows)}

    async def events_since(self, kinds: Sequence[str], since: float) -> list[Event]:
        """Events of ``kinds`` created at or after ``since``, in order."""
        rows = await self.fetch(
            f"SELECT {EVENT_COLUMNS} FROM task_events WHERE kind IN ({','.join('?' * len(kinds))}) "
            "AND created_at >= ? ORDER BY id", [*kinds, since])
        return [event_from_row(r) for r in rows]

    async def details(self, task_id: str, event_limit: int | None = None) -> TaskDetails:
        task = await self.get_task(task_id)
        parents = await self.fetch("SELECT parent_id FROM task_links WHERE child_id = ? ORDER BY parent_id",
                                   (task_id,))
        children = await self.fetch("SELECT child_id FROM task_links WHERE parent_id = ? ORDER BY child_id",
                                    (task_id,))
        return TaskDetails(
            task=task,
            parents=tuple(r[0] for r in parents),
            children=tuple(r[0] for r in children),
            runs=tuple(await self.runs_of(task_id)),
            events=tuple(await self.events(task_id, limit=event_limit)),
        )

    async def counts(self) -> dict[str, int]:
        rows = await self.fetch("SELECT status, count(*) FROM tasks GROUP BY status")
        return {r[0]: int(r[1]) for r in rows}


MANY_ROWS = 500  # more cards than this are built in a thread


def _tasks_from_rows(rows: Sequence[Sequence[Any]]) -> list[Task]:
    """Cards from ``_tasks_where``'s rows (its columns, then the parents, then the open
    run's process id)."""
    out = []
    for row in rows:
        parents = tuple(sorted(row[20].split(","))) if row[20] else ()
        out.append(task_from_row(row[:20], parents, row[21]))
    return out


def _data_version(conn: sqlite3.Connection) -> tuple[int, int]:
    return int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes


async def add_event(conn: Conn, task_id: str, kind: str, payload: dict[str, Any] | None,
                    now: float, run_id: int | None = None) -> None:
    """Append one event (inside the caller's transaction)."""
    await add_events(conn, [(task_id, run_id, kind, payload)], now)


async def add_events(conn: Conn,
                     events: Sequence[tuple[str, int | None, str, dict[str, Any] | None]], now: float) -> None:
    """Append many events, (task_id, run_id, kind, payload) each, in one statement."""
    from engine.kanban.models import dump_payload

    await conn.executemany(
        "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)",
        [(task_id, run_id, kind, dump_payload(payload), now) for task_id, run_id, kind, payload in events],
    )
