"""Issue 34 case 10, the family "a board file removed or replaced under a process that
holds it open": SQLite keeps the unlinked file alive for its connection, so the app went
on showing a board nobody else sees and wrote new cards into it, and a daemon made the
removed board again (``--db``) or ticked whatever file stood at the path now.

The board is the file at its path *as it was opened*: its identity (``st_dev``,
``st_ino``, a stat: never an open) is checked before every statement; a board removed
or replaced since is said in one line and nothing is read or written there again.

Real files, a real app (Pilot) and a real ``kanban daemon``. To see what the app wrote
into the unlinked file, the test keeps hard links to the board's files before removing
them (the same inodes, read by SQLite itself afterwards)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from engine.kanban.backend import BoardGone
from engine.kanban.boards import own_board_path
from tests.support import screen_shown, wait_until
from tests.support import wait_until_pilot as wait_for
from tests.support.cli import run_cli
from tests.test_kanban_pane import WIDE, make_app

GONE = re.compile(r"[Tt]he board .* was (removed|replaced by another file) since")


def _cli(home, *args: str) -> subprocess.CompletedProcess:
    out = run_cli("--home", str(home.root), "kanban", *args)
    assert out.returncode == 0, out.stderr
    return out


def _card(home, *args: str) -> str:
    return json.loads(_cli(home, *args, "--json").stdout)["id"]


def _keep_links(board: Path, keep: Path) -> Path:
    """Hard links to the board's files (main, -wal, -shm) under ``keep``: the inodes the
    app's connection still holds, once the board's own names are gone."""
    keep.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if board.with_name(board.name + suffix).exists():
            os.link(board.with_name(board.name + suffix), keep / ("board.db" + suffix))
    return keep / "board.db"


def _titles(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT title FROM tasks")}
    finally:
        conn.close()


async def test_the_app_says_its_named_board_was_removed_and_writes_nothing_into_the_unlinked_file(home, tmp_path):
    """Family: a board file removed under its holder. The app shows the named board
    ``side``; its folder is removed. A card made in the app then is refused in one line
    (it was written into the unlinked file), the pane says the board was removed (it
    went on showing it), and nothing reached the file it held."""
    from widgets.board.board_pane import BoardPane
    from widgets.board.board_switcher import BoardSwitchScreen

    _cli(home, "boards", "create", "side")
    on_side = _card(home, "--board", "side", "create", "on the side board")
    on_default = _card(home, "create", "on the default board")
    side = own_board_path(home, "side")
    app = make_app(home, "kanban:\n  dispatch: false\nui:\n  refresh_seconds: 3600\n")
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: on_default in pane.cards)
        await pilot.press("b")
        await wait_for(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        boards = app.screen.query_one("#boards")
        boards.highlighted = [i for i in range(boards.option_count)
                              if "side" in str(boards.get_option_at_index(i).prompt)][0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: on_side in pane.cards and pane.board_override is not None)

        kept = _keep_links(side, tmp_path / "kept")
        shutil.rmtree(side.parent)  # as a person removes a board they no longer want
        await pilot.press("n")
        await pilot.press(*"made after the removal")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: pane.error is not None, timeout=30,
                       what=lambda: f"the pane noticing; info: {pane.query_one('#board-info').content}")
        assert "was removed since it was opened" in pane.error and "\n" not in pane.error, pane.error
        assert pane.border_subtitle == "board removed"
        assert all(v.task.title != "made after the removal" for v in pane.cards.values())
    assert "made after the removal" not in _titles(kept)  # nothing written into the unlinked file
    assert _titles(kept) == {"on the side board"}
    assert not side.parent.exists()  # and nothing made again where it was


async def test_the_app_says_a_board_replaced_by_another_file_and_shows_none_of_the_new_one(home, tmp_path):
    """Family: a board file replaced under its holder (removed, and a new board of the
    same name made): the pane, on its next refresh, says so in one line and shows
    nothing of either (switching to it again opens the new one); the app's dispatcher,
    which ticks every board of the home, says it once and ticks the new board from then on."""
    from tests.support.notes import capture_notes
    from widgets.board.board_pane import BoardPane

    _cli(home, "boards", "create", "side")
    old = _card(home, "--board", "side", "create", "on the old side board")
    side = own_board_path(home, "side")
    app = make_app(home, "kanban:\n  dispatch: true\n  dispatch_interval_seconds: 0.2\nui:\n  refresh_seconds: 0.2\n")
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        loop = app.dispatch_loop
        await wait_for(pilot, lambda: any(t.ticks for t in loop.others.values()), timeout=30)
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.link.state.value in ("missing", "ready"))
        pane._reopen(side)
        await wait_for(pilot, lambda: old in pane.cards)
        shutil.rmtree(side.parent)
        _cli(home, "boards", "create", "side")
        new = _card(home, "--board", "side", "create", "on the new side board")
        await wait_for(pilot, lambda: pane.error is not None, timeout=30)
        # Removed, then a new one made: whether a refresh fell in between decides the word.
        assert GONE.search(pane.error) and "\n" not in pane.error, pane.error
        assert new not in pane.cards
        ticker = loop.others[os.path.abspath(side)]
        await wait_for(pilot, lambda: [n for n in notes if "dispatch: the board" in n], timeout=30)
        ticks = ticker.ticks
        await wait_for(pilot, lambda: ticker.ticks > ticks and ticker.link.service is not None
                       and ticker.link.service.gone() is None, timeout=30)  # the new board, ticked
        pane._reopen(side)  # the person switches to it again: the new board
        await wait_for(pilot, lambda: new in pane.cards and pane.error is None, timeout=30)
    said = [n for n in notes if "dispatch: the board" in n]
    assert len(said) == 1 and GONE.search(said[0]), said


async def test_a_board_removed_under_an_open_service_refuses_every_read_and_write(home):
    """Family: a board file removed under its holder, at the store: every statement
    checks the file's identity first (BoardGone, one line), and the process's next
    opener gets the file at the path now, never the stale shared service."""
    from engine.config import Settings
    from engine.kanban.models import NewTask
    from engine.kanban.service import BoardService

    settings = Settings()
    _cli(home, "boards", "create", "side")
    side = own_board_path(home, "side")
    service = await BoardService.open(home, settings, override=side)
    try:
        await service.create(NewTask("before"))
        for name in ("board.db", "board.db-wal", "board.db-shm"):  # rm board.db*
            if (side.parent / name).exists():
                os.unlink(side.parent / name)
        for call in (lambda: service.list_tasks(), lambda: service.create(NewTask("after")),
                     lambda: service.counts()):
            try:
                await call()
            except BoardGone as exc:
                assert "was removed since it was opened" in str(exc) and "\n" not in str(exc)
            else:
                raise AssertionError("a removed board answered")
        _cli(home, "boards", "create", "side")
        again = await BoardService.open(home, settings, override=side)
        try:
            assert again is not service and await again.list_tasks() == []
        finally:
            await again.close()
    finally:
        await service.close()


def _daemon(home, children, *where: str):
    """``kanban daemon`` on the board ``where`` names, once its first tick has spawned
    the card's worker (the first tick is over: the board it ticks is known)."""
    log = home.root / "daemon.log"
    with open(log, "w") as out:
        daemon = children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", *where,
                           "daemon", "--interval", "0.2"], stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: "Spawned:                1" in log.read_text() or daemon.poll() is not None, timeout=60,
               what=lambda: f"the first tick; {log.read_text()}")
    assert daemon.poll() is None, log.read_text()
    return daemon, log


def test_the_daemon_stops_in_one_line_when_its_board_is_removed_and_never_makes_it_again(home, children):
    """Family: a board file removed under its holder, in ``kanban daemon --db FILE``: it
    made the removed board again at its next tick; now it says in one line that the
    board was removed, exits 1, and no board is made at the path."""
    home.config_file.write_text("kanban:\n  profiles:\n    w: 'true'\n")
    board = home.root / "elsewhere" / "team.db"
    board.parent.mkdir()
    _cli(home, "--db", str(board), "create", "a card", "--assignee", "w")
    daemon, log = _daemon(home, children, "--db", str(board))
    for leftover in board.parent.iterdir():
        os.unlink(leftover)
    assert daemon.wait(timeout=60) == 1, log.read_text()
    text = log.read_text()
    lines = [line for line in text.splitlines() if GONE.search(line)]
    assert len(lines) == 1 and str(board) in lines[0] and "was removed" in lines[0] and "Traceback" not in text, text
    assert not [p.name for p in board.parent.iterdir() if p.name.startswith("team.db") and "lock" not in p.name]


def test_the_daemon_never_ticks_a_named_board_replaced_under_it(home, children):
    """Family: a board file replaced under its holder, in ``kanban --board SLUG daemon``:
    it ticked the new board of the same name (starting its cards) as its own; now it says
    in one line that its board is gone, exits 1, and the new board's card waits."""
    home.config_file.write_text("kanban:\n  profiles:\n    w: 'true'\n")
    _cli(home, "boards", "create", "side")
    _cli(home, "--board", "side", "create", "on the old board", "--assignee", "w")
    side = own_board_path(home, "side")
    daemon, log = _daemon(home, children, "--board", "side")
    shutil.rmtree(side.parent)
    _cli(home, "boards", "create", "side")
    card = _card(home, "--board", "side", "create", "on the new board", "--assignee", "w")
    assert daemon.wait(timeout=60) == 1, log.read_text()
    text = log.read_text()
    assert len([line for line in text.splitlines() if GONE.search(line)]) == 1, text
    shown = json.loads(_cli(home, "--board", "side", "show", card, "--json").stdout)
    assert shown["status"] == "ready", shown  # never started by the daemon of the old board
