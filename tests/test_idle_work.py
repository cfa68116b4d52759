"""An idle app does no work where nothing changed (issue 22), through the real app
(Pilot) on real homes: the panes' timers tick, but a log that was not appended to is
not read again, a board that does not exist yet is not looked for again until the
place it would appear in changes, no hidden widget animates, and only what is shown
is read."""

from __future__ import annotations

from engine.config import Settings
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.processes import ProcessRegistry
from engine.scratch.audit import AuditLog
from hermes_tui.app import HermesApp
from tests.support import wait_until_pilot as wait_for
from tests.support.kanban import open_board
from tests.test_kanban_pane import make_app
from widgets.board.board_pane import BoardPane
from widgets.common.fit_table import DetailLine
from widgets.processes.processes_pane import ProcessesPane
from widgets.prune_log.prune_log_pane import PruneLogPane

FAST = "ui:\n  refresh_seconds: 0.2\nkanban:\n  dispatch: false\n"
WIDE = (160, 48)


async def test_an_unchanged_prune_log_is_not_read_again_until_it_changes(home):
    """Every timer tick started a thread that opened and read the log, appended to or not."""
    home.ensure_dir(home.logs_dir)
    with AuditLog(home.prune_log) as audit:
        audit.removed("/s/a", 10)
    app = make_app(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(PruneLogPane)
        await wait_for(pilot, lambda: len(pane.records) == 1)
        reads = pane.reads
        skipped = pane.skipped_reads
        await wait_for(pilot, lambda: pane.skipped_reads >= skipped + 4, what="four ticks with the log unchanged")
        assert pane.reads == reads
        with AuditLog(home.prune_log) as audit:
            audit.kept("/s/b", ".scratch-keep marker")
        await wait_for(pilot, lambda: [r.action for r in pane.records] == ["removed", "kept"])
        assert pane.reads > reads


async def test_a_missing_board_is_looked_for_again_only_when_its_place_changes(home):
    """Each tick of a home without a board asked, in two threads, where the board is and
    whether it exists; once it is made, the pane still finds it at the next tick."""
    app = make_app(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        link = pane.link
        looked: list[bool] = []  # the pane's own looks (the attention monitor asks on its own)
        real_open = link._open_locked

        async def open_locked(create):
            looked.append(create)
            return await real_open(create)

        link._open_locked = open_locked
        # The app's first looks at its home made what they make in it (a folder made
        # changes the place a board would appear in): the pane rightly looked again then.
        await wait_for(pilot, lambda: app.pane("processes").refresh_count >= 1
                       and app.pane("scratch").last_survey is not None and app.attention.computations >= 1,
                       what="the app's first looks at its home")
        settled = pane.skipped_missing
        await wait_for(pilot, lambda: pane.skipped_missing >= settled + 1, what="a tick that did not look again")
        seen, skipped = len(looked), pane.skipped_missing
        await wait_for(pilot, lambda: pane.skipped_missing >= skipped + 4, what="four more ticks")
        assert pane.service is None and len(looked) == seen
        board = await open_board(home)  # another process makes the board and a card
        try:
            card = await tr.create_task(board, NewTask("made after the app started"))
        finally:
            await board.close()
        await wait_for(pilot, lambda: card.id in pane.cards, what="the new board's card")


async def test_the_hidden_prune_progress_bar_does_not_animate(home):
    """A progress bar without a total is indeterminate: it redrew on a 15-a-second timer
    for the app's whole life, hidden until a prune runs."""
    app = make_app(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        bar = app.query_one("#scratch-progress")
        assert not bar.display or not bar.has_class("-running")
        assert bar.percentage is not None
        assert bar.query_one("Bar").auto_refresh is None


async def test_the_processes_pane_reads_the_output_size_of_the_selected_session_only(home):
    """Every sample stat-ed the output file of every running session (1,000 stats a
    second on a home of 1,000), though only the selected one's size is ever shown."""
    reg = ProcessRegistry(home, Settings())
    spawned = [reg.spawn(["sh", "-c", f"echo {'x' * (10 + n)}; sleep 60"], owner="test") for n in range(3)]
    try:
        app = HermesApp(home, Settings(), home_label="~/.hermes")
        async with app.run_test(size=WIDE) as pilot:
            pane = app.query_one(ProcessesPane)
            await pilot.press("2")
            await wait_for(pilot, lambda: all(pane.row(s.id) is not None for s in spawned) and pane.selected)
            first = pane.selected.id
            detail = pane.query_one("#proc-detail", DetailLine)
            await wait_for(pilot, lambda: "stored" in detail.shown_text, what="the selected one's size")
            count = pane.refresh_count
            await wait_for(pilot, lambda: pane.refresh_count >= count + 2, what="two more samples")
            assert set(pane._stored) == {first}
            await pilot.press("down")
            await wait_for(pilot, lambda: pane.selected.id != first)
            second = pane.selected.id
            await wait_for(pilot, lambda: second in pane._stored and "stored" in detail.shown_text,
                           what="the newly selected one's size")
            assert len(pane._stored) == 2
    finally:
        for s in spawned:
            reg.kill(s.id, grace=0.2)
