"""The processes pane's focus rules, driven through the real app with real processes.

- a foreground command that ends stays in view (its exit shown), not another session;
- "follow" belongs to each session;
- after a search the arrow keys move the list again;
- the first Enter of a search lands on the first match.
"""

from __future__ import annotations

import pytest
from test_processes_app import FAST, PaneOnly, cleanup, make_app, submit  # noqa: F401

from engine.config import Settings
from engine.processes import ProcessRegistry
from tests.support import wait_until_pilot
from widgets.common.command_bar import CommandBar
from widgets.processes.processes_pane import ProcessesPane

WIDE = (160, 48)


async def test_a_foreground_run_that_ends_stays_in_view(home, cleanup):  # noqa: F811
    reg = ProcessRegistry(home, Settings())
    other = reg.spawn("sleep 60", background=True)  # newest running session: the table's top row
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: other.id in pane.row_ids)
        await submit(pilot, app, "echo the-foreground-run; exit 3")


        def ended():
            return next((s for s in pane.sessions.values()
                         if "the-foreground-run" in s.command and s.id in pane.row_ids), None)

        await wait_until_pilot(pilot, lambda: pane.foreground is None and ended() is not None)
        fg = ended()
        await wait_until_pilot(pilot, lambda: pane.selected is not None and pane.selected.id == fg.id)
        seen = pane.refresh_count  # two more refreshes: nothing takes the view away
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert pane.output.session_id == fg.id
        assert pane.selected.id == fg.id
        assert "exit 3" in pane.output.title_text().plain
        assert app.query_one(CommandBar) is not None


def finished(home, *commands: str) -> list:
    """Real sessions, run to their end before the app starts."""
    reg = ProcessRegistry(home, Settings())
    sessions = [reg.spawn(command) for command in commands]
    for s in sessions:
        reg.wait(s.id, timeout=10)
    return sessions


async def listed(pilot, app, sessions) -> ProcessesPane:
    """The pane once every session is a row, with the focus on its table."""
    pane: ProcessesPane = app.pane("processes")
    await wait_until_pilot(pilot, lambda: {s.id for s in sessions} <= set(pane.row_ids))
    pane.table.focus()
    await pilot.pause()
    return pane


async def test_follow_is_remembered_per_session(home, cleanup):  # noqa: F811
    sessions = finished(home, "echo first", "echo second")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane = await listed(pilot, app, sessions)
        top = pane.selected.id
        await pilot.press("f")
        assert not pane.output.follow
        await pilot.press("down")
        await wait_until_pilot(pilot, lambda: pane.output.session_id not in (None, top))
        assert pane.output.follow  # the other session was never unfollowed
        await pilot.press("up")
        await wait_until_pilot(pilot, lambda: pane.output.session_id == top)
        assert not pane.output.follow  # and this one is still as the user left it
        assert "follow off" in pane.output.title_text().plain


async def test_after_a_search_the_arrows_move_the_list_and_enter_lands_on_the_first_match(home, cleanup):  # noqa: F811
    many, other = finished(home, "for i in $(seq 1 300); do echo line $i; done; echo 'needle at 301'; "
                           "for i in $(seq 302 600); do echo line $i; done", "echo other")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane = await listed(pilot, app, [many, other])
        if pane.selected.id != many.id:
            await pilot.press("down")
        await wait_until_pilot(pilot, lambda: pane.output.session_id == many.id and len(pane.output.lines) == 600)
        log = pane.output.log
        await wait_until_pilot(pilot, lambda: log.scroll_y > 500)  # following: at the bottom
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*"needle", "enter")
        # The first Enter shows the first match (line 301, index 300), not the bottom.
        await wait_until_pilot(pilot, lambda: log.scroll_y == 298)
        seen = pane.refresh_count  # two more refreshes: nothing scrolls it away
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert log.scroll_y == 298
        # Focus is back on the list: the arrow keys move the cursor, not the output.
        assert app.focused is pane.table
        row = pane.table.cursor_row
        await pilot.press("down" if row == 0 else "up")
        assert pane.table.cursor_row != row
        # Escape out of a search hands focus back to the list as well.
        await pilot.press("slash")
        await pilot.pause()
        assert app.focused is not pane.table
        await pilot.press("escape")
        await wait_until_pilot(pilot, lambda: app.focused is pane.table)


NARROW = (80, 24)


async def test_opening_a_session_of_the_hidden_processes_pane_at_80x24_selects_it(home, cleanup):  # noqa: F811
    """`o` on the board at 80x24: the processes pane is a hidden tab, its table holds no
    DataTable row yet; opening a session there selects it once shown (it raised
    RowDoesNotExist from get_row_index)."""
    from widgets.board.board_pane import BoardPane

    reg = ProcessRegistry(home, Settings())
    first = reg.spawn("echo the-worker; sleep 60", background=True)
    newer = reg.spawn("sleep 60", background=True)  # the top row: not the one asked for
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        pane: ProcessesPane = app.pane("processes")
        assert app.active_pane_id == "board"
        await wait_until_pilot(pilot, lambda: {first.id, newer.id} <= set(pane.row_ids))
        app.query_one(BoardPane).post_message(BoardPane.OpenWorkerOutput(first.id, "t_1"))
        await wait_until_pilot(pilot, lambda: pane.selected is not None and pane.selected.id == first.id)
        assert app.active_pane_id == "processes"
        assert pane.output.session_id == first.id
        await wait_until_pilot(pilot, lambda: "the-worker" in pane.output.lines)
        seen = pane.refresh_count  # two more refreshes: the selection stays
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert pane.selected.id == first.id


@pytest.mark.parametrize("size", [NARROW, WIDE])
async def test_after_ctrl_b_the_view_and_the_focus_follow_the_command_just_backgrounded(home, tmp_path, cleanup,  # noqa: F811
                                                                                      size):
    """At 80x24 and 160x48: while a foreground run goes, the detail line describes it
    (not the selected row); after ctrl+b its row is selected and shown, and focus has
    left the command bar (a second `:` typed into it ran `:sleep 400`)."""
    from tests.support.commands import until

    reg = ProcessRegistry(home, Settings())
    other = reg.spawn("sleep 60 # the-other-session", background=True)
    gate = tmp_path / "gate"
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await pilot.press("2")
        await wait_until_pilot(pilot, lambda: other.id in pane.row_ids and pane.selected is not None)
        if pane.selected.id != other.id:
            pane.table.select_key(other.id)
        await wait_until_pilot(pilot, lambda: pane.output.session_id == other.id)
        await submit(pilot, app, f"echo the-foreground-run; {until(gate)}")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None
                               and "the-foreground-run" in pane.output.lines)
        fg = pane.foreground
        detail = pane.query_one("#proc-detail")
        await wait_until_pilot(pilot, lambda: fg.id in detail.shown_text)
        assert "the-other-session" not in detail.shown_text
        await pilot.press("ctrl+b")
        await wait_until_pilot(pilot, lambda: pane.foreground is None and fg.id in pane.row_ids)
        await wait_until_pilot(pilot, lambda: pane.selected is not None and pane.selected.id == fg.id)
        seen = pane.refresh_count  # two more refreshes: nothing takes the view away
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert pane.output.session_id == fg.id
        assert pane.selected.id == fg.id
        assert fg.id in detail.shown_text
        bar = app.query_one(CommandBar)
        assert app.focused is pane.table
        await pilot.press("colon")
        assert app.focused is bar and bar.value == ""
    gate.touch()
