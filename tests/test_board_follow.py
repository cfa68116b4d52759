"""The board's keys act on what the user sees: after a change (move, assign, unblock,
reclaim, a new card) the selection follows the card it acted on into its new column
and the view scrolls to it; a key pressed again at once acts on that same card, never
on the one that slid into the cursor's place; a move into done (no way back from the
board) asks first. Issue 37.1, the family "the view follows what you did"."""

from __future__ import annotations

import pytest

from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from tests.support import screen_shown, wait_workers
from tests.support import wait_until_pilot as wait_for
from tests.support.kanban import FakeClock, open_board
from tests.test_kanban_pane import card_status, make_app, select
from widgets.board.board_pane import BoardPane
from widgets.board.card_list import CardList
from widgets.common.confirm import ConfirmModal

NARROW = (80, 24)


async def cards_in(home, *specs: tuple[str, str]) -> list[str]:
    """Cards made in order; each (title, status) with status ready or review."""
    board = await open_board(home, FakeClock(1_800_000_000.0))
    made = []
    try:
        for title, status in specs:
            task = await tr.create_task(board, NewTask(title, assignee="coder"))
            if status == "review":
                await tr.review(board, task.id, "have a look")
            made.append(task.id)
    finally:
        await board.close()
    return made


def selected(pane: BoardPane) -> tuple[str | None, str | None]:
    """The focused column and the card highlighted in it."""
    focused = pane.app.focused
    if not isinstance(focused, CardList):
        return None, None
    return focused.status, focused.highlighted_id


@pytest.mark.parametrize("size", [NARROW, (160, 48)], ids=["80x24", "160x48"])
async def test_greater_than_twice_moves_one_card_twice_never_two_cards(home, size):
    first, second = await cards_in(home, ("First ready card", "ready"), ("Second ready card", "ready"))
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 2)
        await select(pilot, pane, first)
        await pilot.press("greater_than_sign", "greater_than_sign")  # at once, as a user types
        # The second press acts on the first card, now in review: into done asks first.
        await wait_for(pilot, lambda: screen_shown(app, ConfirmModal))
        assert f"Move {first} to done?" in app.screen.query_one(".title").render().plain
        assert "cannot be moved back" in app.screen.body
        await pilot.press("n")
        await wait_workers(app, ["board-change"])
        assert await card_status(home, first) == "review"
        assert await card_status(home, second) == "ready"  # untouched
        assert selected(pane) == ("review", first)
        assert "review" in pane._window  # the column it went to is in view


async def test_into_done_asks_first_and_the_selection_follows_the_card(home):
    one, two = await cards_in(home, ("Review me first", "review"), ("Review me next", "review"))
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 2)
        await select(pilot, pane, one)
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: selected(pane) == ("done", one))
        assert await card_status(home, one) == "done" and await card_status(home, two) == "review"
        assert "done" in pane._window
        await pilot.press("greater_than_sign")  # done goes nowhere: a warning, no dialog, no change
        await wait_workers(app, ["board-change"])
        assert not screen_shown(app, ConfirmModal)
        assert await card_status(home, two) == "review"


async def test_unblock_and_assign_follow_the_card_into_view(home):
    (card,) = await cards_in(home, ("Blocked card", "ready"))
    board = await open_board(home)
    try:
        await board.conn.execute("UPDATE tasks SET status = 'blocked' WHERE id = ?", (card,))
    finally:
        await board.close()
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: card in pane.cards and pane.cards[card].task.status == "blocked")
        await select(pilot, pane, card)
        assert "ready" not in pane._window or "blocked" in pane._window
        await pilot.press("u")
        await wait_for(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: selected(pane) == ("ready", card))
        assert "ready" in pane._window
        await pilot.press("e")
        field = app.screen.query_one("#assignee")
        field.value = "writer"
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.cards[card].task.assignee == "writer")
        assert selected(pane) == ("ready", card)
        detail = pane.query_one("#board-detail")
        await wait_for(pilot, lambda: f"{card} · ready · writer" in detail._shown_text)

async def test_a_new_card_is_selected_where_it_lands(home):
    await cards_in(home, ("Already here", "ready"))
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 1)
        await pilot.press("n")
        await pilot.pause()
        await pilot.press(*"A brand new card")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(pane.cards) == 2)
        new = next(i for i, v in pane.cards.items() if v.task.title == "A brand new card")
        await wait_for(pilot, lambda: selected(pane)[1] == new)
