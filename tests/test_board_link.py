"""BoardLink: each state and each way between them, on a real SQLite file and on the
real PostgreSQL server (a fresh database per test; its "server away" is a TCP relay
this test stops and starts, as in tests/test_pg_app.py)."""

from __future__ import annotations

import asyncio

import pytest
from test_pg_app import Relay

from engine.kanban import transitions as tr
from engine.kanban.backends.postgres.errors import BoardUnreachable
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.link import BoardLink, LinkState
from engine.kanban.models import NewTask
from engine.kanban.service import BoardService
from engine.kanban.statuses import STATUSES
from tests.support.kanban import kanban_settings, open_board

SETTINGS = kanban_settings({"coder": "sleep 30"})


def _on_server(url: str):
    return kanban_settings({"coder": "sleep 30"}, database=DatabaseUrl.parse(url))


async def _card_from_elsewhere(home, url: str | None = None) -> str:
    """A card made on a connection of its own (another program, as far as the link knows)."""
    board = await open_board(home, url=url)
    try:
        return (await tr.create_task(board, NewTask("made elsewhere"))).id
    finally:
        await board.close()


# -- a file board -----------------------------------------------------------------------------


async def test_a_missing_board_is_missing_until_it_appears_then_ready(home):
    link = BoardLink(home, SETTINGS)
    assert link.state is LinkState.LOOKING and link.service is None
    assert await link.open() is None
    assert link.state is LinkState.MISSING and link.location == home.kanban_db
    assert not home.kanban_db.exists()  # looking created nothing
    card = await _card_from_elsewhere(home)
    service = await link.open()  # the next open finds it
    try:
        assert link.state is LinkState.READY and link.reason == "" and service is link.service
        assert set(STATUSES) <= set(link.statuses) and link.profiles == ("coder",)
        assert (await service.get(card)).title == "made elsewhere"
        assert not link.listening  # a file announces nothing: its user reads it on a timer
    finally:
        await link.close()
    assert link.service is None


async def test_open_with_create_makes_the_first_board(home):
    link = BoardLink(home, SETTINGS)
    assert await link.open(create=True) is not None
    try:
        assert link.state is LinkState.READY and home.kanban_db.exists()
    finally:
        await link.close()


async def test_a_broken_file_fails_with_one_line_and_stays_failed(home):
    home.kanban_db.parent.mkdir(parents=True, exist_ok=True)
    home.kanban_db.write_bytes(b"this is not a board\n" * 200)
    link = BoardLink(home, SETTINGS)
    assert await link.open() is None
    assert link.state is LinkState.FAILED and link.failure is not None
    assert link.reason.startswith("The board cannot be used: ") and "\n" not in link.reason
    reason = link.reason
    assert await link.open(create=True) is None  # final: not opened, not created over
    assert link.state is LinkState.FAILED and link.reason == reason
    assert home.kanban_db.read_bytes().startswith(b"this is not a board")


async def test_a_malformed_url_fails_without_its_password(home, monkeypatch):
    monkeypatch.setenv("HERMES_KANBAN_DATABASE_URL", "postgresql://bob:hunter2-not-shown@db.example:port/board")
    link = BoardLink(home, SETTINGS)
    assert link.location is None  # not known at a glance either
    assert await link.open() is None
    assert link.state is LinkState.FAILED and isinstance(link.failure, ValueError)
    assert "port that is not a number" in link.reason and "hunter2" not in link.reason


async def test_two_links_share_the_one_service_of_the_process(home):
    pane, loop = BoardLink(home, SETTINGS), BoardLink(home, SETTINGS)
    first = await pane.open(create=True)
    try:
        assert await loop.open() is first
        await pane.close()  # the other holder keeps it open
        assert await first.counts() == {}
    finally:
        await pane.close()
        await loop.close()
    assert not BoardService._open


async def test_a_service_handed_out_while_its_other_holder_gives_it_back_stays_open(home, monkeypatch):
    """The app's attention monitor opens and closes the board beside the pane. When both
    opened at once, the pane found the monitor's service, closed its own spare connection,
    and the monitor gave the service back during that close: the pane was handed a closed
    service ("Cannot operate on a closed database" on every refresh, an empty board)."""
    from engine.kanban.backends.sqlite.store import Board

    await _card_from_elsewhere(home)
    real_open, real_close = Board.open.__func__, Board.close
    opened: list[Board] = []
    let_the_late_one_finish = asyncio.Event()
    monitor: list[BoardService] = []

    async def paced_open(cls, *args, **kwargs):
        board = await real_open(cls, *args, **kwargs)
        opened.append(board)
        if len(opened) == 1:  # the pane's open: it finishes after the monitor's
            await let_the_late_one_finish.wait()
        return board

    async def close(board):
        if board is opened[0] and monitor:  # the pane's spare: the monitor leaves meanwhile
            await monitor.pop().close()
        await real_close(board)

    monkeypatch.setattr(Board, "open", classmethod(paced_open))
    monkeypatch.setattr(Board, "close", close)
    pane = asyncio.create_task(BoardService.open(home, SETTINGS, create=False))
    while not opened:
        await asyncio.sleep(0.01)
    monitor.append(await BoardService.open(home, SETTINGS, create=False))
    let_the_late_one_finish.set()
    service = await pane
    try:
        assert not monitor  # the monitor gave it back while the spare closed
        assert sum((await service.counts()).values()) == 1  # it answers: the card made elsewhere
    finally:
        await service.close()
    assert not BoardService._open


async def test_a_failed_link_tries_again_only_when_switched(home, tmp_path):
    home.kanban_db.parent.mkdir(parents=True, exist_ok=True)
    home.kanban_db.write_bytes(b"this is not a board\n" * 200)
    other = tmp_path / "other.db"
    link = BoardLink(home, SETTINGS)
    await link.open()
    assert link.state is LinkState.FAILED
    await link.switch(other)
    assert link.state is LinkState.LOOKING and link.reason == "" and link.location == other
    assert await link.open() is None and link.state is LinkState.MISSING
    try:
        assert await link.open(create=True) is not None
        assert link.state is LinkState.READY and link.location == other and other.exists()
    finally:
        await link.close()


# -- a server board ---------------------------------------------------------------------------


async def test_an_empty_database_is_missing_and_a_listened_board_calls_back(home, pg_url):
    changed = asyncio.Event()
    link = BoardLink(home, _on_server(pg_url), on_change=changed.set)
    assert await link.open() is None and link.state is LinkState.MISSING
    assert await link.open(create=True) is not None
    try:
        assert link.state is LinkState.READY and link.listening
        card = await _card_from_elsewhere(home, pg_url)
        await asyncio.wait_for(changed.wait(), timeout=30)  # NOTIFY: the guard of a lost one, never a pace
        assert (await link.service.get(card)).title == "made elsewhere"
    finally:
        await link.close()


async def test_a_server_away_before_opening_is_unreachable_until_it_comes_back(home, pg_url):
    await (await open_board(home, url=pg_url)).close()  # the board exists
    relay = Relay()
    await relay.start()
    link = BoardLink(home, _on_server(relay.url_for(pg_url)), on_change=lambda: None)
    try:
        await relay.stop()
        assert await link.open() is None
        assert link.state is LinkState.UNREACHABLE and "cannot be reached" in link.reason
        assert link.service is None and not link.listening
        assert await link.open() is None and link.state is LinkState.UNREACHABLE  # each open retries
        await relay.start()
        assert await link.open() is not None
        assert link.state is LinkState.READY and link.reason == "" and link.listening
    finally:
        await link.close()
        await relay.stop()


async def test_a_server_lost_while_open_comes_back_and_is_listened_to_again(home, pg_url):
    await (await open_board(home, url=pg_url)).close()
    relay = Relay()
    await relay.start()
    link = BoardLink(home, _on_server(relay.url_for(pg_url)), on_change=lambda: None)
    service = await link.open()
    try:
        assert link.listening
        await relay.stop()
        with pytest.raises(BoardUnreachable) as lost:
            await service.counts()
        link.lost(lost.value)
        assert link.state is LinkState.UNREACHABLE and not link.listening
        assert await link.open() is service  # kept: its next call connects again
        await relay.start()
        assert await service.counts() == {}
        assert await link.reached() is True  # this ends the outage
        assert link.state is LinkState.READY and link.listening
        assert await link.reached() is False  # and only once
    finally:
        await link.close()
        await relay.stop()
