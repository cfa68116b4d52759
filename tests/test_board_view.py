"""How the board pane shows a board and keeps it current, through the real app (Pilot):
whole columns with a sign of more at the sides, whole cards with a sign of more below,
navigation that stays on the shown columns, and refreshes that do work only when the
board changed, are never cancelled by the next timer tick, and skip a hidden pane."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from tests.support import screen_shown
from tests.support import wait_until_pilot as wait_for
from tests.support.kanban import open_board
from tests.test_hermes_board import FIXTURE, NO_HERMES, fake_hermes  # noqa: F401 (a fixture)
from tests.test_kanban_pane import CONFIG, make_app, seed
from widgets.board.board_pane import BoardColumn, BoardPane
from widgets.board.card_list import CardList

FAST = CONFIG.replace("kanban:\n", "ui:\n  refresh_seconds: 0.2\nkanban:\n", 1)
SIX = ("todo", "ready", "running", "review", "blocked", "done")


def columns_inside(pane: BoardPane) -> list[str]:
    """The shown columns whose right edge passes the board's (drawn cut, with no sign)."""
    right = pane.content_region.right
    return [c.status for c in pane.query(BoardColumn) if c.display and c.region.right > right]


async def focus(pilot, pane: BoardPane, status: str) -> CardList:
    cards = pane.query_one(f"#cards-{status}", CardList)
    cards.focus()
    await pilot.pause()
    return cards


def drawn(pane: BoardPane) -> int:
    return sum(c.drawn for c in pane.query(CardList))


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_columns_that_do_not_fit_are_shown_whole_with_a_sign_of_how_many_more(home, size):
    """At 80x24 REVIEW, at 120x36 DONE were cut at the right edge mid-word, with no sign."""
    await seed(home)
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await pilot.pause()
        window = pane.shown_columns
        assert 0 < len(window) < 6 and window == SIX[:len(window)]
        assert columns_inside(pane) == []
        right = str(pane.query_one("#board-more-right").render())
        assert right.split() == ["▸", str(6 - len(window))]
        assert str(pane.query_one("#board-more-left").render()).strip() == ""
        await focus(pilot, pane, "todo")
        for _ in range(5):  # pressed at once: each key moves on from where the last one got to
            await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.focused, CardList) and app.focused.status == "done")
        await pilot.pause()
        assert pane.shown_columns[-1] == "done" and columns_inside(pane) == []
        assert str(pane.query_one("#board-more-left").render()).split() == ["◂", str(6 - len(window))]
        assert str(pane.query_one("#board-more-right").render()).strip() == ""


async def test_navigation_stays_on_the_shown_columns(home):
    """`l` on DONE went into the hidden ARCHIVED column (or wrapped to the first one)."""
    await seed(home)
    app = make_app(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await focus(pilot, pane, "done")
        await pilot.press("l")
        await pilot.pause()
        assert app.focused.status == "done" and pane.selected is not None
        await focus(pilot, pane, "todo")
        await pilot.press("h")
        await pilot.pause()
        assert app.focused.status == "todo"
        await pilot.press("A")  # archived shown: now it is a column to go to
        await pilot.pause()
        await focus(pilot, pane, "done")
        await pilot.press("l")
        await wait_for(pilot, lambda: app.focused.status == "archived")


@pytest.fixture
def hermes(tmp_path) -> HomeLayout:
    """hermes-agent 0.19.0's home, its writer card failed twice (hermes's own column)."""
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    conn = sqlite3.connect(root / "kanban.db")
    try:
        with conn:
            conn.execute("UPDATE tasks SET consecutive_failures = 2 WHERE title = 'Write the release notes'")
    finally:
        conn.close()
    return HomeLayout(root)


async def test_hermes_board_keeps_the_failure_count_in_view_and_stops_at_done(hermes, monkeypatch):
    """On hermes's 8-column board `✗2` was cut off the card, and `l` on DONE wrapped to TRIAGE."""
    from engine.config import load_config
    from hermes_tui.app import HermesApp

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    app = HermesApp(hermes, load_config(hermes.config_file))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        await pilot.pause()
        ready = pane.query_one("#cards-ready", CardList)
        ready.focus()
        await pilot.pause()
        assert "ready" in pane.shown_columns and columns_inside(pane) == []
        shown = ready.render().plain
        assert "✗2" in shown
        assert "✗2 failures" in pane.query_one("#board-detail").shown_text
        await focus(pilot, pane, "done")
        await pilot.press("l")
        await pilot.pause()
        assert app.focused.status == "done"


async def test_cards_are_whole_and_a_column_says_how_many_more_it_holds(home):
    """At 120x36 a card showed 2 of its lines at the column's foot; a long title ran on."""
    long_title = "Write the migration guide for every plugin author, with examples and a checklist"
    board = await open_board(home)
    try:
        for n in range(6):
            await tr.create_task(board, NewTask(long_title if n == 0 else f"card {n}", priority=6 - n))
    finally:
        await board.close()
    app = make_app(home)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 6)
        ready = pane.query_one("#cards-ready", CardList)
        ready.focus()
        await pilot.pause()
        lines = ready.render().plain.split("\n")
        height = ready.content_size.height
        assert len(lines) == height
        fit = height // 4  # whole cards of 3 lines and a rule, and the line saying how many more
        assert lines[-1].strip() == f"▾ 1-{fit} of 6"
        assert lines[1].endswith("…") and long_title.startswith(lines[1][:-1].rstrip())
        assert long_title in pane.query_one("#board-detail").shown_text  # in full, under the columns
        await pilot.press("end")
        await pilot.pause()
        assert ready.render().plain.split("\n")[-1].strip() == f"▴ {6 - fit + 1}-6 of 6"


# --------------------------------------------------------------------------------------
# Refreshing: only when something changed, never cancelled, not while hidden
# --------------------------------------------------------------------------------------


async def test_refreshes_of_an_unchanged_board_draw_nothing_and_a_change_draws_its_card(home):
    """Each card printed its age in seconds, so every refresh redrew every card in view."""
    made = await seed(home)
    app = make_app(home, FAST)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        ticks = pane._timer_ticks
        await wait_for(pilot, lambda: pane._timer_ticks >= ticks + 2)
        reads, before = pane.reads, drawn(pane)
        ticks = pane._timer_ticks
        await wait_for(pilot, lambda: pane._timer_ticks >= ticks + 5)
        assert (pane.reads, drawn(pane)) == (reads, before)  # not read again, nothing drawn
        board = await open_board(home)
        try:
            await board.conn.execute("UPDATE tasks SET title = 'Write the user guide, again' WHERE id = ?",
                                     (made["ready"],))
        finally:
            await board.close()
        await wait_for(pilot, lambda: pane.cards[made["ready"]].task.title.endswith("again"))
        await pilot.pause()
        assert pane.reads == reads + 1 and drawn(pane) == before + 1


async def test_a_refresh_slower_than_the_timer_lands_instead_of_being_cancelled(home):
    """With 100,000 cards a read took longer than the 1 s timer, which cancelled it: the
    board stayed empty. Here every read takes three timer ticks."""
    await seed(home)
    app = make_app(home, FAST)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.service is not None)
        service = pane.service
        slow_view = service.view
        started = []

        async def view(statuses, recent_limit=100):
            started.append(pane._timer_ticks)
            at = pane._timer_ticks
            while pane._timer_ticks < at + 3:
                await pilot.pause(0.05)
            return await slow_view(statuses, recent_limit)

        service.view = view
        pane.refresh_board()
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        assert len(started) <= 2  # the read under way finished; it was not started again and again


async def test_a_hidden_board_is_not_refreshed_until_it_is_shown(home):
    await seed(home)
    app = make_app(home, FAST)
    async with app.run_test(size=(80, 24)) as pilot:  # narrow: one pane at a time
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await pilot.press("2")
        await wait_for(pilot, lambda: pane.region.area == 0)
        reads = pane.reads
        board = await open_board(home)
        try:
            card = await tr.create_task(board, NewTask("made while the board was hidden"))
        finally:
            await board.close()
        ticks = pane._timer_ticks
        await wait_for(pilot, lambda: pane._timer_ticks >= ticks + 4)
        assert pane.reads == reads and card.id not in pane.cards and pane.skipped_hidden > 0
        await pilot.press("1")
        await wait_for(pilot, lambda: card.id in pane.cards)


# --------------------------------------------------------------------------------------
# A hermes home without `hermes` on PATH, with hermes's profiles and worker logs
# --------------------------------------------------------------------------------------


def footer_state(app) -> dict[str, bool]:
    """description -> whether the Footer shows the key as available."""
    from widgets.common.keys_footer import KeysFooter

    return {k.description: not k.disabled for k in app.query_one(KeysFooter).entries}


async def test_a_read_only_hermes_board_shows_its_change_keys_unavailable_and_a_press_says_why(hermes, monkeypatch):
    """The Footer offered n, <, >, e, a, which then only toasted "read-only" one by one; then
    they were dimmed and said nothing when pressed (issue 37.7): dimmed, and each press says
    why in one line."""
    from engine.config import load_config
    from hermes_tui.app import HermesApp
    from tests.support.notes import capture_notes
    from widgets.board.board_modals import NewCardScreen

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    app = HermesApp(hermes, load_config(hermes.config_file))
    notes = capture_notes(app)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        pane.query_one("#cards-ready", CardList).focus()
        await wait_for(pilot, lambda: footer_state(app).get("New card") is False)
        state = footer_state(app)
        assert not any(state[k] for k in ("New card", "Move right", "Move left", "Assign", "Archive"))
        for key in ("n", "greater_than_sign", "e", "a"):
            await pilot.press(key)
            await pilot.pause()
        assert not isinstance(app.screen, NewCardScreen)
        # once when the board opened, then one line for each press
        await wait_for(pilot, lambda: sum("not on PATH" in n for n in notes) == 1 + 4)
        assert "read-only (`hermes` is not on PATH)" in str(pane.query_one("#board-info").render())


async def test_hermes_profiles_are_offered_and_its_worker_log_is_shown(hermes, fake_hermes, monkeypatch):  # noqa: F811
    """The form said "no profiles configured" beside hermes's profiles/writer, and `o`
    said "no worker output yet" beside hermes's kanban/logs/<id>.log."""
    from engine.config import load_config
    from hermes_tui.app import HermesApp
    from tests.support.notes import capture_notes
    from widgets.board.board_modals import NewCardScreen

    env, _record = fake_hermes
    monkeypatch.setenv("PATH", env["PATH"])
    (hermes.root / "profiles" / "writer" / "memories").mkdir(parents=True)
    (hermes.root / "profiles" / "Not A Profile").mkdir()
    logs = hermes.hermes_kanban_logs_dir
    logs.mkdir(parents=True)
    done = "t_20f93ac7"
    (logs / f"{done}.log").write_text("looking at the test\n\x1b[31mfixed\x1b[0m: a race on the gate file\n")
    app = HermesApp(hermes, load_config(hermes.config_file))
    notes = capture_notes(app)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        await focus(pilot, pane, "ready")
        await pilot.press("n")
        await wait_for(pilot, lambda: screen_shown(app, NewCardScreen))
        hint = " ".join(str(label.render()) for label in app.screen.query("Label"))
        assert "(default, writer)" in hint and "no profiles configured" not in hint
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewCardScreen))
        cards = pane.query_one("#cards-done", CardList)
        cards.focus()
        cards.highlighted = 0
        await pilot.pause()
        await pilot.press("o")  # hermes's worker log, followed live in the output view (issue 24)
        output = app.pane("processes").output
        await wait_for(pilot, lambda: "race on the gate" in output.text())
        from rich.text import Text

        # The view draws a colour code as a style (Text.from_ansi), never as raw bytes to the terminal.
        assert "\x1b" not in Text.from_ansi(output.text()).plain
        assert not any("no worker output" in n for n in notes)
        assert pane.profiles == ("default", "writer")  # not the folder hermes would refuse as a name


async def test_the_board_data_version_moves_with_every_commit_and_only_then(home):
    """What lets the pane skip reading an unchanged board: a commit on its own connection
    (the app's dispatcher shares it) or on another one (a worker's CLI) moves it; reads do not."""
    board, other = await open_board(home), await open_board(home)
    try:
        first = await board.data_version()
        await board.fetch("SELECT count(*) FROM tasks")
        assert await board.data_version() == first
        await tr.create_task(board, NewTask("made on the pane's connection"))
        mine = await board.data_version()
        assert mine != first
        await tr.create_task(other, NewTask("made by another process"))
        theirs = await board.data_version()
        assert theirs != mine
        await board.list_tasks()
        assert await board.data_version() == theirs
    finally:
        await other.close()
        await board.close()
