"""The board's connection thread (engine/kanban/backends/sqlite/connection.py) and Board.atomic: a
transaction is one call on the thread, all or nothing, and the round trips of a tick
do not grow with the cards it claims. A real board file, a real thread."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.backends.sqlite.connection import SqliteConnection
from engine.kanban.dispatcher import LAUNCH_THREADS, LAUNCHES_PER_THREAD
from engine.kanban.models import NewTask
from engine.kanban.workers import NullSpawner
from tests.support.kanban import dispatcher, kanban_settings, open_board


@pytest.fixture
def hops(monkeypatch) -> Counter:
    """What each round trip to a board's connection thread ran, by function name."""
    seen: Counter = Counter()
    real = SqliteConnection.call

    async def counted(self, fn, *args):
        seen[fn.__name__] += 1
        return await real(self, fn, *args)

    monkeypatch.setattr(SqliteConnection, "call", counted)
    return seen


async def titles(board) -> list[str]:
    return [r[0] for r in await board.fetch("SELECT title FROM tasks ORDER BY title")]


async def test_creating_a_card_is_one_call_on_the_board_thread(home, hops):
    board = await open_board(home)
    try:
        await tr.create_task(board, NewTask("one"))
        assert hops == Counter(transact=1)
        hops.clear()
        await tr.create_tasks(board, [NewTask(f"many {i}") for i in range(50)])
        assert hops == Counter(transact=1)
        assert len(await titles(board)) == 51
    finally:
        await board.close()


async def test_a_failing_body_is_rolled_back_and_the_connection_goes_on(home):
    board = await open_board(home)
    try:
        async def fails(conn):
            await conn.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_1', 'gone', 'ready', 0)")
            raise tr.TransitionRefused("no")

        with pytest.raises(tr.TransitionRefused):
            await board.atomic(fails)
        assert await titles(board) == []

        async def waits(conn):
            await conn.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_2', 'gone', 'ready', 0)")
            await asyncio.sleep(0)  # not a statement: a body may not wait for anything else

        with pytest.raises(RuntimeError, match="may only run the board's statements"):
            await board.atomic(waits)
        assert await titles(board) == []
        await tr.create_task(board, NewTask("after"))
        assert await titles(board) == ["after"]
    finally:
        await board.close()


async def test_a_caller_cancelled_before_the_commit_has_its_transaction_rolled_back(home):
    board = await open_board(home)
    inside, go_on = threading.Event(), threading.Event()

    async def slow(conn):
        await conn.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_1', 'gone', 'ready', 0)")
        inside.set()
        go_on.wait()  # holds the board's thread (not the event loop) until the caller is cancelled

    try:
        task = asyncio.ensure_future(board.atomic(slow))
        await asyncio.to_thread(inside.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        go_on.set()
        assert await titles(board) == []  # runs after the transaction: one thread, in order
    finally:
        go_on.set()
        await board.close()


async def test_a_closed_connection_refuses_further_statements(home):
    board = await open_board(home)
    await board.close()
    with pytest.raises(Exception, match="closed database"):
        await board.fetch("SELECT 1")


async def test_a_tick_s_round_trips_do_not_grow_with_the_cards_it_claims(tmp_path, hops, monkeypatch):
    launch_threads: list[str] = []
    real_to_thread = asyncio.to_thread

    async def to_thread(fn, *args, **kwargs):
        launch_threads.append(getattr(fn, "__name__", ""))
        return await real_to_thread(fn, *args, **kwargs)

    async def tick(cards: int) -> tuple[Counter, int]:
        home = HomeLayout(tmp_path / f"home-{cards}").ensure()
        home.ensure_dir(home.kanban_db.parent)
        settings = kanban_settings({"coder": "true"}, max_in_progress=cards)
        board = await open_board(home)
        try:
            await tr.create_tasks(board, [NewTask(f"card {i}", assignee="coder") for i in range(cards)]
                                  + [NewTask(f"not here {i}", assignee="elsewhere") for i in range(cards)])
            hops.clear()
            launch_threads.clear()
            monkeypatch.setattr(asyncio, "to_thread", to_thread)
            result = await dispatcher(board, home, settings, NullSpawner()).tick()
            monkeypatch.setattr(asyncio, "to_thread", real_to_thread)
            assert len(result.spawned) == cards and len(result.skipped) == cards  # each noted once
            return Counter(hops), launch_threads.count("_launch_share")
        finally:
            await board.close()

    few, few_threads = await tick(2)
    many, many_threads = await tick(20)
    # The claim, the record of the launched workers and the notes on the cards no profile
    # here serves are one transaction and one call each, whatever the number of cards.
    # Nothing was running, nothing to promote: the tick's first look (one call, several
    # reads) stands for the reads of every phase; one more reads the newest events of
    # the unserved cards, and one the titles and bodies of the cards picked (the look
    # reads no texts: a board may hold 100,000 ready cards).
    assert few == Counter(transact=3, fetch_each=1, execute_fetchall=2)
    assert many == few
    assert (few_threads, many_threads) == (1, min(LAUNCH_THREADS, -(-20 // LAUNCHES_PER_THREAD)))
