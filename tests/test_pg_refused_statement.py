"""Issue 34 case 4, the family "a statement the server refuses for a reason of the moment":
``lock_timeout``, ``statement_timeout``, a deadlock, a serialization failure (and the
driver's own "another operation is in progress"). Each is retried like a lost
connection, by the board's every long-lived user: ``kanban daemon`` (which exited on
one, and left its cards to other hosts, which started them again), the app's dispatch
loop and its board pane (which stayed "board unusable", its "last tick" frozen, while
its dispatcher worked on).

Everything is real: the shared PostgreSQL server, a database of this test whose
``lock_timeout`` / ``statement_timeout`` is set as an operator would set it (``ALTER
DATABASE ... SET``), and a lock held on the cards' table by another connection of this
test, which makes the board's statements wait until the server refuses them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import asyncpg
import pytest

from engine.kanban import transitions as tr
from engine.kanban.backends.postgres.errors import BoardUnreachable, DriverFault, StatementRefused
from engine.kanban.models import NewTask
from tests.support import wait_until, wait_until_async
from tests.support.cli import run_cli
from tests.support.kanban import CLI, open_board
from tests.support.pg import ADMIN_URL

HOST = "refused-host"


async def _set_on_database(url: str, **settings: str) -> None:
    """``ALTER DATABASE <this test's> SET name = value``: every new connection gets it."""
    name = url.rpartition("/")[2]
    conn = await asyncpg.connect(ADMIN_URL, timeout=10)
    try:
        for key, value in settings.items():
            await conn.execute(f'ALTER DATABASE "{name}" SET {key} = \'{value}\'')
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _cards_locked(url: str):
    """Another connection holds ACCESS EXCLUSIVE on the cards' table until the block ends:
    every statement of the board that reads or writes cards waits for it."""
    conn = await asyncpg.connect(url, timeout=10)
    tx = conn.transaction()
    await tx.start()
    await conn.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
    try:
        yield conn
    finally:
        await tx.rollback()
        await conn.close()


class _Lock:
    """The same lock, held from a thread of its own (for a test that is not async)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._release: asyncio.Event | None = None
        self._held = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = None

    def hold(self) -> None:
        import threading

        def run() -> None:
            async def main() -> None:
                self._loop = asyncio.get_running_loop()
                self._release = asyncio.Event()
                async with _cards_locked(self.url):
                    self._held = True
                    await self._release.wait()
                self._held = False

            asyncio.run(main())

        self._thread = threading.Thread(target=run, name="holds-the-cards-lock")
        self._thread.start()
        wait_until(lambda: self._held, timeout=30, what="the lock held")

    def release(self) -> None:
        if self._thread is None:
            return
        wait_until(lambda: self._loop is not None and self._release is not None, timeout=30, what="the holder")
        self._loop.call_soon_threadsafe(self._release.set)
        self._thread.join(timeout=30)
        self._thread = None


# -- the board: a refused statement is of the moment, never the board's failure --------------


async def test_a_real_lock_timeout_is_a_refused_statement_retried_on_the_same_board(home, pg_url):
    """Family: refused statements. A read and a transition that wait past the server's
    ``lock_timeout`` are refused in one line (a StatementRefused, so a BoardUnreachable:
    retried), nothing is half made, and the same board works as soon as the lock goes."""
    board = await open_board(home, url=pg_url)
    first = await tr.create_task(board, NewTask("before the lock"))
    await board.close()
    await _set_on_database(pg_url, lock_timeout="150ms")
    board = await open_board(home, url=pg_url)
    try:
        async with _cards_locked(pg_url):
            with pytest.raises(StatementRefused) as read:
                await board.list_tasks()
            with pytest.raises(StatementRefused) as write:
                await tr.create_task(board, NewTask("during the lock"))
        for refused in (read.value, write.value):
            assert isinstance(refused, BoardUnreachable)
            text = str(refused)
            assert "refused a statement" in text and "lock timeout" in text, text
            assert "\n" not in text and "cannot be reached" not in text
            assert refused.retrying == "retrying"
        assert [t.id for t in await board.list_tasks()] == [first.id]  # nothing of the refused create
        after = await tr.create_task(board, NewTask("after the lock"))
        assert {t.id for t in await board.list_tasks()} == {first.id, after.id}
    finally:
        await board.close()


async def test_a_real_statement_timeout_is_a_refused_statement_too(home, pg_url):
    """Family: refused statements. ``statement_timeout`` (a statement cancelled by the
    server) is refused like a lock timeout, not "the board cannot be used"."""
    board = await open_board(home, url=pg_url)
    await tr.create_task(board, NewTask("a card"))
    await board.close()
    await _set_on_database(pg_url, statement_timeout="300ms")
    board = await open_board(home, url=pg_url)
    try:
        async with _cards_locked(pg_url):
            with pytest.raises(StatementRefused, match="statement timeout"):
                await board.list_tasks()
        assert len(await board.list_tasks()) == 1
    finally:
        await board.close()


async def test_a_driver_error_is_said_as_one_and_the_next_call_opens_a_new_connection(home, pg_url):
    """Words: asyncpg's "another operation is in progress" is the driver's refusal on
    this connection, not a server that "cannot be reached"; it is retried (a new
    connection), like the rest of the family."""
    board = await open_board(home, url=pg_url)
    try:
        await tr.create_task(board, NewTask("a card"))
        raw = board._raw
        pid = raw.get_server_pid()
        sleeping = asyncio.ensure_future(raw.fetch("SELECT pg_sleep(30)"))  # behind the board's back

        async def asleep() -> bool:
            conn = await asyncpg.connect(pg_url, timeout=10)
            try:
                return bool(await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND query LIKE 'SELECT pg_sleep%'", pid))
            finally:
                await conn.close()

        await wait_until_async(asleep, timeout=30, what="the other operation under way")
        with pytest.raises(DriverFault) as fault:
            await board.list_tasks()
        text = str(fault.value)
        assert "another operation is in progress" in text and "cannot be reached" not in text, text
        assert "driver" in text
        with contextlib.suppress(Exception):
            await sleeping
        assert len(await board.list_tasks()) == 1  # a new connection
        assert board._raw is not raw
    finally:
        await board.close()


# -- kanban daemon: one line, retried, never an exit -------------------------------------------


def _done(home, env: dict, task_id: str) -> bool:
    out = run_cli("--home", str(home.root), "kanban", "show", task_id, "--json", env=env)
    return out.returncode == 0 and json.loads(out.stdout)["status"] == "done"


@pytest.mark.slow
def test_the_daemon_retries_a_refused_statement_like_an_outage_and_never_exits(home, pg_url, children):
    """Family: refused statements, in ``kanban daemon``. A tick refused by a real
    ``lock_timeout`` is one line ("... refused a statement: ... lock timeout; retrying"),
    said once however many ticks are refused; the daemon lives on (it exited, and other
    hosts then started its cards again) and dispatches as soon as the lock goes."""
    asyncio.run(_set_on_database(pg_url, lock_timeout="200ms"))
    worker = f'{CLI} complete "$HERMES_KANBAN_TASK" --summary ok'
    home.config_file.write_text(f"kanban:\n  dispatch_interval_seconds: 0.2\n  profiles:\n    w: {json.dumps(worker)}\n")
    env = {"HERMES_KANBAN_DATABASE_URL": pg_url, "HERMES_KANBAN_HOST_ID": HOST}

    def create(title: str) -> str:
        out = run_cli("--home", str(home.root), "kanban", "create", title, "--assignee", "w", "--json", env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["id"]

    first = create("before the lock")
    log = home.root / "daemon.log"
    lock = _Lock(pg_url)
    with open(log, "w") as out:
        daemon = children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "daemon"],
                          stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    try:
        wait_until(lambda: _done(home, env, first), timeout=60, what=lambda: f"the first card; {log.read_text()}")
        lock.hold()
        wait_until(lambda: "refused a statement" in log.read_text() or daemon.poll() is not None, timeout=60,
                   what=lambda: f"the daemon's line; {log.read_text()}")
        refused = [line for line in log.read_text().splitlines() if "refused a statement" in line]
        assert refused and "lock timeout" in refused[0] and refused[0].endswith("; retrying"), log.read_text()
        # Several more ticks refused (each waits out the 200 ms timeout): still one line, still alive.
        mark = time.monotonic()
        wait_until(lambda: time.monotonic() - mark > 2 or daemon.poll() is not None, timeout=60)
        assert daemon.poll() is None, log.read_text()
        lock.release()
        wait_until(lambda: "answers again" in log.read_text(), timeout=60,
                   what=lambda: f"the daemon back; {log.read_text()}")
        second = create("after the lock")
        wait_until(lambda: _done(home, env, second), timeout=60, what=lambda: f"the second card; {log.read_text()}")
        assert daemon.poll() is None
    finally:
        lock.release()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    text = log.read_text()
    assert text.count("refused a statement") == 1, text
    assert "Traceback" not in text and "cannot be reached" not in text, text


# -- the app: the pane recovers with its dispatcher ------------------------------------------------


async def test_the_app_pane_waits_out_a_refused_statement_and_its_last_tick_moves_on(home, pg_url, tmp_path):
    """Family: refused statements, in the app. While a real ``lock_timeout`` refuses the
    pane's reads and the dispatcher's ticks, the pane says "retrying" (never "board
    unusable"), keeps its cards, and when the lock goes it reads again and its "last
    tick" moves on with the dispatcher's."""
    from test_kanban_pane import WIDE, make_app
    from test_pg_app import _config, _create_from_another_home, _info

    from tests.support import wait_until_pilot as wait_for
    from widgets.board.board_pane import BoardPane

    board = await open_board(home, url=pg_url)
    first = await tr.create_task(board, NewTask("before the lock"))
    await board.close()
    await _set_on_database(pg_url, lock_timeout="200ms")
    app = make_app(home, _config(pg_url, 0.2, dispatch=True))
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        loop = app.dispatch_loop
        await wait_for(pilot, lambda: first.id in pane.cards and pane.last_tick_at is not None)
        async with _cards_locked(pg_url):
            await wait_for(pilot, lambda: pane.unreachable is not None or pane.error is not None, timeout=30)
            assert pane.error is None, pane.error  # not "board unusable"
            assert "lock timeout" in pane.unreachable
            assert _info(pane).startswith("board refused a statement, retrying"), _info(pane)
            assert pane.border_subtitle == "board refused a statement, retrying"
            assert first.id in pane.cards  # the last cards stay shown
            await wait_for(pilot, lambda: loop.unreachable_ticks >= 1, timeout=30)
            ticks_during = loop.ticks
        await wait_for(pilot, lambda: pane.unreachable is None and loop.ticks > ticks_during, timeout=30)
        tick_at = pane.last_tick_at
        await wait_for(pilot, lambda: pane.last_tick_at != tick_at, timeout=30)  # "last tick" moves on
        assert "last tick" in _info(pane)
        later = await _create_from_another_home(tmp_path, pg_url, "after the lock")
        await wait_for(pilot, lambda: later in pane.cards, timeout=30)
        assert pane.error is None
