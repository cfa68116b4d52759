"""The board's SQLite connection: one ``sqlite3`` connection living on one thread of its own.

Why not a statement per thread hop (what aiosqlite does): every hop from the event loop
to the connection's thread and back costs a thread wake-up each way, and a card made
with BEGIN, two INSERTs and COMMIT paid four of them on top of the commit's fsync. Here
a coroutine hands the thread a whole piece of work (:meth:`SqliteConnection.call`): a
single statement, the opening of the board, or a whole transaction
(:meth:`SqliteConnection.transact`), and waits once.

A transaction body is written once, as a coroutine over the statements it is given
(``execute``, ``execute_fetchall``, ``executemany``, the slice of aiosqlite's
connection the board's SQL code uses), so the same body runs on a PostgreSQL board,
where every statement is a real wait. On this connection the body runs on the
connection's thread, where its statements answer at once, so it runs to its end
without ever suspending (:func:`run_at_once`). It may therefore await only those
statements, and coroutines that await nothing else: a body that waits for anything
else (a sleep, another thread) is a programming error, rolled back and raised.

The jobs are run one after another in the order they were handed in, so every
statement of the process on this board is serialised (the board's lock decides whose
turn it is; this thread never runs two things at once).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    """What callers read from an ``execute``: the rows it changed, and the id of the row
    an INSERT made (a cursor's ``rowcount`` and ``lastrowid``)."""

    rowcount: int
    lastrowid: int | None = None


# -- the statements, on the connection's thread ------------------------------------------

def execute(conn: sqlite3.Connection, sql: str, params: Iterable[Any] = ()) -> Result:
    cur = conn.execute(sql, tuple(params))
    return Result(cur.rowcount, cur.lastrowid)


def execute_fetchall(conn: sqlite3.Connection, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
    return conn.execute(sql, tuple(params)).fetchall()


def executemany(conn: sqlite3.Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    conn.executemany(sql, rows)


def fetch_each(conn: sqlite3.Connection, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
    """The rows of each query, in order (several reads in one hop)."""
    return [conn.execute(sql, tuple(params)).fetchall() for sql, params in queries]


class Statements:
    """What a transaction body is given on the connection's thread: the connection's
    three statement coroutines, answered at once."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> Result:
        return execute(self._conn, sql, params)

    async def execute_fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        return execute_fetchall(self._conn, sql, params)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        executemany(self._conn, sql, rows)


def run_at_once(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (it awaits only coroutines that answer at
    once) to its end, here and now, without an event loop."""
    try:
        waited_for = coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError(f"a board transaction waited for {waited_for!r}; it may only run the board's statements")


class Abandoned(Exception):
    """The caller stopped waiting (it was cancelled) before the commit: rolled back."""


def transact(conn: sqlite3.Connection, body: Callable[[Statements], Awaitable[T]], abandoned: threading.Event) -> T:
    """``BEGIN IMMEDIATE``, the body, ``COMMIT``; ``ROLLBACK`` when anything fails (also a
    failed COMMIT) or the caller gave up waiting before the commit."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = run_at_once(body(Statements(conn)))  # type: ignore[arg-type]
        if abandoned.is_set():
            raise Abandoned()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (I/O error, full disk)
            conn.execute("ROLLBACK")
        raise
    return result


# -- the thread ----------------------------------------------------------------------------

def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.cancelled():
        return
    if error is None:
        fut.set_result(result)
    else:
        fut.set_exception(error)


class SqliteConnection:
    """One ``sqlite3`` connection, opened, used and closed only by its own thread."""

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="hermes-tui board", daemon=True)
        self._thread.start()

    @classmethod
    async def open(cls, opener: Callable[[], sqlite3.Connection]) -> SqliteConnection:
        """A connection made by ``opener`` (which may also check and set up the file) on
        the new thread, in one hop."""
        self = cls()
        try:
            await self._submit(self._adopt, opener)
        except BaseException:
            self._closed = True
            self._jobs.put(None)
            raise
        return self

    def _adopt(self, opener: Callable[[], sqlite3.Connection]) -> None:
        self._conn = opener()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, loop, fut = job
            try:
                outcome = (fn(*args), None)
            except BaseException as exc:  # handed to the waiting coroutine
                outcome = (None, exc)
            try:
                loop.call_soon_threadsafe(_settle, fut, *outcome)
            except RuntimeError:
                pass  # its event loop is closed: nobody is waiting any more

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._jobs.put((fn, args, loop, fut))
        return fut

    def _on_conn(self, fn: Callable[..., T], args: tuple) -> T:
        if self._conn is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return fn(self._conn, *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` on the connection's thread: one hop."""
        return await self._submit(self._on_conn, fn, args)

    async def transact(self, body: Callable[[Statements], Awaitable[T]]) -> T:
        """``body`` as one transaction, in one hop (see the module doc). A caller
        cancelled before the commit has it rolled back."""
        abandoned = threading.Event()
        try:
            return await self.call(transact, body, abandoned)
        except asyncio.CancelledError:
            abandoned.set()
            raise

    # The statement coroutines, one hop each (aiosqlite's names and shapes).

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> Result:
        return await self.call(execute, sql, params)

    async def execute_fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        return await self.call(execute_fetchall, sql, params)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.call(executemany, sql, list(rows))

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self._submit(self._close_conn)
        finally:
            self._closed = True
            self._jobs.put(None)

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
