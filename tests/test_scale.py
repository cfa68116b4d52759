"""A big home stays light (issue 22): long lists page, a pane not shown is not
re-surveyed, quitting stops a walk, the prune dialog of a huge plan stays short.

Behaviour only: no test here times anything (the figures are tests/bench/bench_app.py's)."""

from __future__ import annotations

import threading
from dataclasses import replace

from rich.text import Text
from textual.app import App, ComposeResult

from engine.config import Settings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry
from engine.scratch import activity
from hermes_tui.app import HermesApp
from tests.support import screen_shown, wait_until, wait_until_pilot
from tests.support.scratch import make_entry, target_of
from widgets.common.fit_table import Col, FitTable
from widgets.processes.processes_pane import COLUMNS as PROC_COLUMNS
from widgets.processes.processes_pane import ProcessesPane
from widgets.scratch import scratch_pane
from widgets.scratch.scratch_pane import ScratchPane

WIDE = (160, 48)
NARROW = (80, 24)


class TableApp(App):
    def __init__(self, rows: int, page_rows: int) -> None:
        super().__init__()
        self.rows, self.page_rows = rows, page_rows

    def compose(self) -> ComposeResult:
        yield FitTable((Col("n", "N"), Col("text", "Text", flex=True)), id="t", page_rows=self.page_rows)

    def on_mount(self) -> None:
        table = self.query_one(FitTable)
        table.set_rows({f"k{i:03d}": i for i in range(self.rows)},
                       lambda key, value: (Text(str(value)), Text(f"row {value}")))
        table.sync()
        table.focus()


async def test_a_long_table_holds_one_page_and_the_cursor_moves_the_page():
    """Only ``page_rows`` rows are in the DataTable; the arrows, page keys and
    ctrl+home/end cross the page's ends and the page follows; the cells of a row are
    built only when its page is shown."""
    app = TableApp(rows=95, page_rows=20)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(FitTable)
        await wait_until_pilot(pilot, lambda: table.row_count == 20)
        assert table.row_total == 95 and table.selected_key == "k000"
        assert set(table._built) <= {f"k{i:03d}" for i in range(20)}  # no other row's cells were made
        for _ in range(20):
            await pilot.press("down")
        assert table.selected_key == "k020" and table.selected_index == 20
        assert table.row_count == 20 and table.page_start > 0  # the page moved, still one page
        await pilot.press("ctrl+end")
        assert table.selected_key == "k094" and table.page_text() == "rows 76-95 of 95"
        await pilot.press("pageup", "pageup", "pageup")
        assert table.selected_index < 76 and table.selected_key == f"k{table.selected_index:03d}"
        await pilot.press("ctrl+home")
        assert table.selected_key == "k000" and table.page_start == 0


async def test_a_jump_to_another_page_draws_it_whole_instead_of_removing_rows_one_by_one(monkeypatch):
    """ctrl+end left no row of the page: each of its 200 rows was removed alone (a layout
    request and a repaint each, ~35 ms), then the new ones added. A step of the cursor
    past the page's end still moves the page by its kept rows."""
    app = TableApp(rows=95, page_rows=20)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(FitTable)
        await wait_until_pilot(pilot, lambda: table.row_count == 20)
        removed = []
        remove_row = FitTable.remove_row
        monkeypatch.setattr(FitTable, "remove_row", lambda self, key: (removed.append(key), remove_row(self, key))[1])
        await pilot.press("ctrl+end")
        assert table.selected_key == "k094" and table.page_text() == "rows 76-95 of 95"
        assert removed == [] and table.row_count == 20
        await pilot.press("ctrl+home")
        for _ in range(20):
            await pilot.press("down")
        assert table.selected_key == "k020" and removed  # a step: the rows that left, one by one


async def test_a_sort_keeps_the_cursor_on_its_row_even_on_another_page():
    app = TableApp(rows=95, page_rows=20)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(FitTable)
        await wait_until_pilot(pilot, lambda: table.row_count == 20)
        table.go_to(5)
        table.set_order(sorted(table.keys, reverse=True))  # k005 is now row 89
        table.sync()
        await pilot.pause()
        assert table.selected_key == "k005" and table.selected_index == 89


async def test_a_sync_of_unchanged_rows_measures_and_cuts_nothing_again(monkeypatch):
    """The processes pane syncs its table every second: a page of 200 unchanged rows was
    measured and cut again each time (most of the idle app's UI work with 1,000
    sessions). Now only a row whose cells changed, or a new plan, costs anything."""
    from widgets.common import fit_table

    app = TableApp(rows=95, page_rows=20)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(FitTable)
        await wait_until_pilot(pilot, lambda: table.row_count == 20)
        cuts: list[str] = []
        real_cut = fit_table.cut
        monkeypatch.setattr(fit_table, "cut", lambda cell, width: cuts.append(cell.plain) or real_cut(cell, width))
        table.sync()
        assert cuts == []
        table.update_rows({**table.values, "k003": "x3"}, lambda key, value: (Text(str(value)), Text(f"row {value}")))
        table.sync()  # as wide as before: the same plan
        await pilot.pause()
        assert sorted(cuts) == ["row x3", "x3"]  # the changed row's two cells, no other
        assert table.get_row("k003")[1].plain == "row x3"
        cuts.clear()
        table.update_rows({**table.values, "k004": "a value far longer than the column it is shown in, ever"},
                          lambda key, value: (Text("4"), Text(str(value))))
        table.sync()  # the flex column already takes the width left: the same plan
        await pilot.pause()
        assert len(cuts) == 2 and table.get_row("k004")[1].plain.endswith("…")
        cuts.clear()
        await pilot.resize_terminal(50, 20)  # a new plan: the page is cut again for it
        await wait_until_pilot(pilot, lambda: len(cuts) >= 2 * 20, what="the page cut for the new width")
        assert table.plan.widths[-1][1] < 50


async def test_the_processes_pane_reads_usage_only_of_the_rows_near_the_screen(home):
    """The page holds 200 rows; CPU and memory are read for the rows on screen and a
    screenful either side (and the selected one), not for every row of the page; moving
    to the end reads those rows instead."""
    reg = ProcessRegistry(home, Settings())
    sessions = [reg.spawn(["sleep", "120"], owner="test") for _ in range(48)]
    rss = [c.key for c in PROC_COLUMNS].index("rss")
    try:
        app = _app(home)
        async with app.run_test(size=NARROW) as pilot:
            await pilot.press("2")
            pane = app.query_one(ProcessesPane)
            table = pane.table
            await wait_until_pilot(pilot, lambda: table.row_count == 48, what="every session's row")
            await wait_until_pilot(pilot, lambda: pane.row(table.keys[0])[rss] != "", what="the top row's memory")
            wanted = pane._usage_wanted()
            assert 0 < len(wanted) < 48 and table.keys[0] in wanted and table.keys[-1] not in wanted
            # The first sample, before any row was laid out, read the newest sessions; the
            # next ones read only those near the screen.
            await wait_until_pilot(pilot, lambda: pane.row(table.keys[-1])[rss] == "", what="no memory far below")
            await pilot.press("ctrl+end")
            await wait_until_pilot(pilot, lambda: pane.row(table.keys[-1])[rss] != "", what="the last row's memory")
    finally:
        for s in sessions:
            reg.kill(s.id, grace=0.2)


def _app(home: HomeLayout) -> HermesApp:
    # make_entry's entries have just arrived (their ctime is now): arrivals do not count here.
    s = Settings()
    return HermesApp(home, replace(s, scratch=replace(s.scratch, arrival_hours=0.0)), home_label="~/.hermes")


async def test_the_scratch_pane_pages_a_folder_longer_than_a_page(home):
    t = target_of(home)
    for i in range(230):
        (t.scratch_dir / f"e{i:03d}").mkdir(parents=True)
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_until_pilot(pilot, lambda: pane.last_survey is not None)
        table = pane.table
        assert table.row_total == 230 and table.row_count == table.page_rows < 230
        await pilot.press("3", "ctrl+end")
        assert table.selected_key == "e:e229"
        detail = pane.query_one("#scratch-detail").shown_text
        assert "scratch/e229" in detail and "of 230" in detail  # which rows the page holds


async def test_a_pane_not_shown_is_not_resurveyed_until_it_is_shown(home, monkeypatch):
    """In the narrow layout only the active pane is shown: the scratch pane's timer
    ticks but does not walk the folder; shown again, it catches up."""
    monkeypatch.setattr(scratch_pane, "MIN_REFRESH_SECONDS", 0.05)
    monkeypatch.setattr(scratch_pane, "SURVEY_COST_FACTOR", 0.0)
    ticks: list[bool] = []
    real_tick = ScratchPane._on_timer

    def tick(self):
        ticks.append(self.shown)
        real_tick(self)

    monkeypatch.setattr(ScratchPane, "_on_timer", tick)
    t = target_of(home)
    make_entry(t.scratch_dir, "first")
    app = HermesApp(home, Settings(), home_label="~/.hermes")
    async with app.run_test(size=NARROW) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_until_pilot(pilot, lambda: pane.last_survey is not None)
        assert app.active_pane_id == "board" and not pane.shown
        make_entry(t.scratch_dir, "second")
        seen = len(ticks)
        await wait_until_pilot(pilot, lambda: len(ticks) >= seen + 5, what="five timer ticks while hidden")
        assert not any(ticks[seen:])  # hidden at every tick
        assert "e:second" not in pane.table.keys  # and no survey ran
        await pilot.press("3")
        await wait_until_pilot(pilot, lambda: "e:second" in pane.table.keys, what="the new entry, once shown")


async def test_quitting_stops_a_survey_walk_at_once(home, monkeypatch):
    """``q`` while the survey walks: the walk is told to stop (the app's exit would
    otherwise wait for the survey thread), the thread ends, and the app has exited."""
    t = target_of(home)
    make_entry(t.scratch_dir, "slow")
    walking, told = threading.Event(), []
    real_scan = activity.scan_activity

    def scan(path, cutoff, **kw):
        stop = kw.get("stop")
        if str(path).endswith("/slow") and not walking.is_set():
            walking.set()
            # A walk that would go on until told: the stop event is the only way out
            # (a bound, only so a red run ends: it is never reached when green).
            told.append(stop is not None and stop.wait(60))
        return real_scan(path, cutoff, **kw)

    monkeypatch.setattr(activity, "scan_activity", scan)
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until_pilot(pilot, walking.is_set, what="the survey walking")
        survey = next(w for w in app.workers if w.group == "scratch-survey")
        await pilot.press("q")
    assert app.return_code == 0 or app.return_code is None
    wait_until(lambda: told, what="the walk told to stop")
    assert told == [True]
    wait_until(lambda: survey.is_finished, what="the survey thread ended")


async def test_the_prune_dialog_of_a_huge_plan_lists_a_bounded_number_of_lines(home):
    from widgets.scratch.prune_modal import MAX_LISTED, PruneModal

    t = target_of(home)
    for i in range(MAX_LISTED + 30):
        make_entry(t.scratch_dir, f"idle{i:03d}", {"f": "x"}, hours=80)
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_until_pilot(pilot, lambda: pane.last_survey is not None)
        await pilot.press("3", "p")
        await wait_until_pilot(pilot, lambda: screen_shown(app, PruneModal))
        modal = app.screen
        assert len(modal.plan.candidates) == MAX_LISTED + 30  # the plan is whole
        assert f"Quarantine {MAX_LISTED + 30} idle" in modal.dialog_title() or \
            f"Delete {MAX_LISTED + 30} idle" in modal.dialog_title()
        lines = modal.body.splitlines()
        assert sum(1 for line in lines if line.startswith("  - idle")) == MAX_LISTED
        assert "  … and 30 more (hermes-tui prune --dry-run lists every one)" in lines
        await pilot.press("escape")


async def test_the_processes_pane_reads_no_usage_while_it_is_not_shown(home):
    """Narrow, on the board: the session's row is kept up to date (its status) but its
    CPU and memory are not read; shown (2), they are."""
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn(["sleep", "60"], owner="test")
    rss = [c.key for c in PROC_COLUMNS].index("rss")
    try:
        app = _app(home)
        async with app.run_test(size=NARROW) as pilot:
            pane = app.query_one(ProcessesPane)
            await wait_until_pilot(pilot, lambda: pane.row(s.id) is not None and pane.refresh_count >= 3,
                                   what="three samples while hidden")
            assert not pane.shown and pane.row(s.id)[rss] == ""
            await pilot.press("2")
            await wait_until_pilot(pilot, lambda: pane.row(s.id)[rss] != "", what="the memory, once shown")
    finally:
        reg.kill(s.id, grace=0.2)


async def test_with_nothing_running_the_processes_pane_samples_only_when_a_session_comes(home, monkeypatch):
    """No session runs: the timer ticks but reads nothing; a session started from
    elsewhere (its folder appears) is sampled and shown at the next tick."""
    ticks: list[int] = []
    samples: list[float] = []
    real_tick, real_take = ProcessesPane._on_timer, ProcessesPane.take_snapshot

    def tick(self):
        ticks.append(len(samples))
        real_tick(self)

    def take(self, *a, **kw):
        samples.append(1.0)
        return real_take(self, *a, **kw)

    monkeypatch.setattr(ProcessesPane, "_on_timer", tick)
    monkeypatch.setattr(ProcessesPane, "take_snapshot", take)
    reg = ProcessRegistry(home, Settings())
    done = reg.spawn("true", owner="test")
    reg.wait(done.id, timeout=30)
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(ProcessesPane)
        await wait_until_pilot(pilot, lambda: pane.row(done.id) is not None)
        await wait_until_pilot(pilot, lambda: len(ticks) >= 2)
        count = len(samples)
        seen = len(ticks)
        await wait_until_pilot(pilot, lambda: len(ticks) >= seen + 4, what="four more ticks")
        assert len(samples) == count  # nothing ran, nothing changed: no sample
        s = reg.spawn(["sleep", "60"], owner="test")
        try:
            await wait_until_pilot(pilot, lambda: pane.row(s.id) is not None, what="the new session's row")
        finally:
            reg.kill(s.id, grace=0.2)


def test_every_worker_that_takes_arguments_names_its_description():
    """Textual's ``@work`` writes a description of each call from ``repr`` of its arguments,
    on the UI thread, unless one is given: ``s`` on 100,000 scratch entries spent 0.56 s
    writing the repr of the rows it handed to the sorting thread (a prune's plan, a
    session: the same). Every worker method with arguments gives its description."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    missing = []
    for path in sorted([*(repo / "widgets").rglob("*.py"), *(repo / "hermes_tui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            takes = len(node.args.args) + len(node.args.kwonlyargs) > 1 or node.args.vararg or node.args.kwarg
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "work" and takes
                        and not any(k.arg == "description" for k in deco.keywords)):
                    missing.append(f"{path.relative_to(repo)}:{node.lineno} {node.name}")
    assert missing == []


async def test_sorting_a_long_scratch_table_writes_no_repr_of_its_rows(home, monkeypatch):
    """The sort of a long table runs in a thread; handing it the rows costs nothing on the
    UI thread (their repr was 0.56 s at 100,000 entries)."""
    from widgets.scratch.scratch_pane import Rows

    monkeypatch.setattr(scratch_pane, "SORT_IN_THREAD", 2)  # a thread for this short table too
    for i in range(4):
        make_entry(target_of(home).scratch_dir, f"e{i}", {"f.txt": "x" * (i + 1)})
    reprs: list[int] = []
    real_repr = Rows.__repr__
    monkeypatch.setattr(Rows, "__repr__", lambda self: reprs.append(1) or real_repr(self))
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_until_pilot(pilot, lambda: pane.table.row_total == 4, what="the four entries")
        await pilot.press("3")
        first = pane.table.keys
        for _ in range(3):  # name -> state -> idle -> size (biggest first)
            await pilot.press("s")
        await wait_until_pilot(pilot, lambda: pane.table.keys != first, what="the rows sorted by size")
        assert pane.table.keys[0].endswith("e3")
    assert reprs == []


def test_a_message_meant_for_its_own_widget_does_not_bubble():
    """Textual takes ``bubble`` from the class keyword (``class M(Message, bubble=False)``):
    ``bubble = False`` in the class body is overwritten by ``Message.__init_subclass__``,
    and such a message went up through the pane's container, the screen and the app,
    each looking for a handler, several times a second. No class body sets it."""
    import ast
    from pathlib import Path

    from hermes_tui.app import HermesApp as App_
    from widgets.common.help_screen import HelpScreen
    from widgets.processes.output_view import OutputView
    from widgets.prune_log.prune_log_pane import PruneLogPane

    repo = Path(__file__).resolve().parent.parent
    in_body = []
    for path in sorted([*(repo / "widgets").rglob("*.py"), *(repo / "hermes_tui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                        [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                    if any(getattr(t, "id", None) == "bubble" for t in targets):
                        in_body.append(f"{path.relative_to(repo)}:{stmt.lineno} {node.name}")
    assert in_body == []
    own = [ProcessesPane.Sampled, ProcessesPane.SizeRead, ProcessesPane.ForegroundEnded,
           ProcessesPane.KillReported, OutputView.NewLines, OutputView.Restarted, HelpScreen.LaidOut,
           PruneLogPane.Records, ScratchPane.Surveyed, ScratchPane.Sorted, ScratchPane.PruneProgress,
           ScratchPane.PruneFinished, ScratchPane.Planned, ScratchPane.Restored, App_.HomeFilled]
    assert [m.__qualname__ for m in own if m.bubble] == []


class _Queries:
    """Counts the DOM queries made of the app, a screen or a pane (``query()``: a walk
    of the subtree that matches each widget against a selector; hundreds of widgets for
    the app's). A small widget's own (Textual's Tabs asks for its few tabs) is not one."""

    def __init__(self, monkeypatch) -> None:
        from textual.css.query import DOMQuery
        from textual.screen import Screen

        from widgets.common.pane import Pane

        self.made: list[str] = []
        real = DOMQuery.__init__

        def counting(query, node, *args, **kwargs):
            if isinstance(node, App | Screen | Pane):
                self.made.append(f"{type(node).__name__}.query")
            real(query, node, *args, **kwargs)

        monkeypatch.setattr(DOMQuery, "__init__", counting)


async def test_a_dispatch_tick_and_a_pane_switch_walk_no_dom_query(home, monkeypatch):
    """The app keeps its panes by id: a dispatch tick's result reaches the board pane, and
    a pane switch restyles the two panes concerned, without a query of the whole DOM."""
    from engine.kanban.backends.sqlite.store import Board
    from engine.kanban.workers import NullSpawner

    await (await Board.open(home.kanban_db)).close()
    # The test's tick is the only one: a timed tick that ended after it would be the one
    # shown (a paired -n 4 round saw that once).
    s = Settings()
    app = HermesApp(home, replace(s, kanban=replace(s.kanban, dispatch=False)), home_label="~/.hermes")
    async with app.run_test(size=WIDE) as pilot:
        board = app.pane("board")
        await wait_until_pilot(pilot, lambda: board.service is not None, what="the board")
        app.dispatch_loop.spawner = NullSpawner()
        queries = _Queries(monkeypatch)
        result = await app.dispatch_loop.tick()
        assert result is not None
        await wait_until_pilot(pilot, lambda: board.last_result is result, what="the tick shown")
        for key in ("2", "3", "4", "1"):
            await pilot.press(key)
            await pilot.pause()
        assert app.active_pane_id == "board"
        assert queries.made == [], queries.made


async def test_the_scratch_progress_bar_keeps_no_clock(home):
    """Textual's ProgressBar wakes every second for as long as it is mounted (an ETA);
    the scratch pane's bar shows none and has no timer: an idle app does not wake for it."""
    app = _app(home)
    async with app.run_test(size=WIDE) as pilot:
        bar = app.query_one("#scratch-progress")
        await pilot.pause()
        assert bar.is_mounted
        assert [t for t in bar._timers if t._active.is_set()] == []


def test_a_sample_makes_cells_only_for_the_sessions_whose_row_changed(home, monkeypatch):
    """The listing gives back the same session while nothing of it changed: its row's
    cells are kept (with 1,000 sessions, making every row's cells every sample was most
    of it). A session whose status, usage or shown runtime changed gets new cells."""
    from widgets.processes import processes_pane

    made: list[str] = []
    real = processes_pane.row_cells
    monkeypatch.setattr(processes_pane, "row_cells", lambda s, *a: made.append(s.id) or real(s, *a))
    reg = ProcessRegistry(home, Settings())
    sessions = [reg.spawn(["sleep", "120"], owner="test") for _ in range(3)]
    try:
        now = [max(s.started_at for s in sessions) + 600.0]  # ten minutes on: minutes shown
        pane = ProcessesPane(home=home, settings=Settings(), clock=lambda: now[0])
        first = pane.take_snapshot(frozenset())
        assert sorted(made) == sorted(s.id for s in sessions)
        made.clear()
        again = pane.take_snapshot(frozenset())
        assert made == [] and again.rows == first.rows
        now[0] += 60.0  # a minute on: every runtime cell changed
        pane.take_snapshot(frozenset())
        assert sorted(made) == sorted(s.id for s in sessions)
        made.clear()
        reg.kill(sessions[0].id, grace=0.2)
        wait_until(lambda: not reg.get(sessions[0].id).running, what="the kill recorded")
        after = pane.take_snapshot(frozenset())
        assert made == [sessions[0].id]
        assert after.rows[sessions[0].id][1] != first.rows[sessions[0].id][1]  # its status
        assert after.sessions_key != first.sessions_key
        made.clear()
        assert pane.take_snapshot(frozenset()).sessions_key == after.sessions_key and made == []
    finally:
        for s in sessions:
            reg.kill(s.id, grace=0.2)


def test_session_items_mask_only_the_commands_of_the_sessions_they_name(monkeypatch):
    """Masking and cutting a command costs a pass of the secret patterns: only a session
    that makes an item (failed, or its watch matched or stopped) pays it."""
    from pathlib import Path

    from engine.attention import sources
    from engine.processes.session import ProcessSession, SessionSource, SessionStatus

    masked: list[str] = []
    real = sources.outside
    monkeypatch.setattr(sources, "outside", lambda text, *a: masked.append(text) or real(text, *a))

    def session(n: int, status: SessionStatus, code: int | None) -> ProcessSession:
        return ProcessSession(id=f"proc_{n:012d}", pid=100 + n, fingerprint="", command=f"job {n}", cwd="/w",
                              owner="me", started_at=1000.0 + n, status=status, exit_code=code, signal=None,
                              ended_at=None if status is SessionStatus.RUNNING else 2000.0,
                              output_path=Path("/h/out"), notify=False, watch=(), source=SessionSource.OWN)

    sessions = [session(n, SessionStatus.RUNNING, None) for n in range(50)]
    sessions += [session(50, SessionStatus.EXITED, 0), session(51, SessionStatus.EXITED, 3)]
    items = sources.session_items(sessions)
    assert [i.subject for i in items] == [sessions[-1].id]
    assert masked == ["job 51"]
