"""The app (Pilot) on a PostgreSQL board: live updates from another home, and a server
that goes away and comes back. The "server restart" is a TCP relay in front of the real
server that this test stops and starts again (the shared server itself is never
restarted: other sessions use it)."""

from __future__ import annotations

import asyncio
import contextlib

from conftest import run_cli
from test_kanban_pane import WIDE, make_app, wait_for

from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from tests.support.kanban import open_board
from tests.support.notes import capture_notes
from widgets.board.board_pane import BoardPane


class Relay:
    """A TCP relay 127.0.0.1:<port> -> the PostgreSQL server; ``stop()`` drops every
    connection and refuses new ones (the server is gone), ``start()`` brings it back on
    the same port."""

    def __init__(self, target_port: int = 5432) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._pipes):
            writer.transport.abort()
        self._pipes.clear()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._pipes |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def url_for(self, direct_url: str) -> str:
        return direct_url.replace("127.0.0.1:5432", f"127.0.0.1:{self.port}")


def _config(url: str, refresh: float, dispatch: bool = False) -> str:
    ticks = "  dispatch: true\n  dispatch_interval_seconds: 0.2\n" if dispatch else "  dispatch: false\n"
    return f"kanban:\n  database: {url}\n{ticks}ui:\n  refresh_seconds: {refresh}\n"


async def _create_from_another_home(tmp_path, url: str, title: str) -> str:
    other = HomeLayout(tmp_path / "other-home").ensure()
    out = await asyncio.to_thread(run_cli, "--home", str(other.root), "kanban", "--db", url, "create", title)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[1]


def _info(pane: BoardPane) -> str:
    return str(pane.query_one("#board-info").content)


async def test_the_app_shows_a_card_created_from_another_home_without_waiting_for_a_poll(home, pg_url, tmp_path):
    board = await open_board(home, url=pg_url)  # the board exists before the app opens it
    await board.close()
    app = make_app(home, _config(pg_url, 3600))  # the refresh timer never fires in this test
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.service is not None and pane.listening)
        card = await _create_from_another_home(tmp_path, pg_url, "made elsewhere")
        await wait_for(pilot, lambda: card in pane.cards, timeout=30)
        assert pane.cards[card].task.title == "made elsewhere"


async def test_server_away_cli_says_so_app_retries_and_recovers_with_the_board_whole(home, pg_url, tmp_path):
    relay = Relay()
    await relay.start()
    url = relay.url_for(pg_url)
    board = await open_board(home, url=pg_url)
    first = await tr.create_task(board, NewTask("before the outage"))
    app = make_app(home, _config(url, 0.2, dispatch=True))
    notes = capture_notes(app)
    try:
        async with app.run_test(size=WIDE) as pilot:
            pane = app.query_one(BoardPane)
            loop = app.dispatch_loop
            await wait_for(pilot, lambda: first.id in pane.cards)

            await relay.stop()
            await wait_for(pilot, lambda: pane.unreachable is not None, timeout=30)
            ticks_before = loop.ticks
            await wait_for(pilot, lambda: loop.unreachable_ticks >= 2, timeout=30)
            assert _info(pane).startswith("board unreachable, retrying")
            assert pane.border_subtitle == "board unreachable, retrying"
            assert first.id in pane.cards  # the last cards stay shown
            cli = await asyncio.to_thread(run_cli, "--home", str(home.root), "kanban", "--db", url, "list")
            assert cli.returncode == 1 and cli.stderr.count("\n") == 1 and "cannot be reached" in cli.stderr
            during = await tr.create_task(board, NewTask("made while the app could not see it"))

            assert not [n for n in notes if "dispatch failed" in n]  # the pane's line says it, once
            await relay.start()
            await wait_for(pilot, lambda: pane.unreachable is None and during.id in pane.cards, timeout=30)
            await wait_for(pilot, lambda: loop.ticks > ticks_before, timeout=30)  # the dispatcher is back too
            later = await _create_from_another_home(tmp_path, url, "after the return")
            await wait_for(pilot, lambda: later in pane.cards, timeout=30)
        assert await board.counts() == {"ready": 3}
        runs = await board.fetch("SELECT count(*) FROM task_runs")
        events = await board.fetch("SELECT count(*), count(DISTINCT task_id) FROM task_events")
        assert runs[0][0] == 0 and tuple(events[0]) == (3, 3)
    finally:
        await board.close()
        with contextlib.suppress(Exception):
            await relay.stop()


async def test_a_malformed_board_url_is_one_line_in_the_pane_without_the_password(home, monkeypatch):
    monkeypatch.setenv("HERMES_KANBAN_DATABASE_URL", "postgresql://bob:hunter2-not-shown@db.example:port/board")
    app = make_app(home, "kanban:\n  dispatch: true\n  dispatch_interval_seconds: 0.2\n")
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.error is not None)
        assert "port that is not a number" in pane.error and "hunter2" not in pane.error
        assert app.is_running


async def test_an_empty_database_is_no_board_yet_until_another_home_creates_a_card(home, pg_url, tmp_path):
    app = make_app(home, _config(pg_url, 0.2, dispatch=True))
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: _info(pane).startswith("No board yet (postgresql://"))
        assert pane.error is None
        card = await _create_from_another_home(tmp_path, pg_url, "the first card")
        await wait_for(pilot, lambda: card in pane.cards, timeout=30)
        assert pane.error is None and pane.listening
