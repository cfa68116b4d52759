"""Issue 12, fast: the demo is on screen before its home is built, with a visible
"starting…", and its panes fill in as the builders (in a thread) write the home."""

from __future__ import annotations

import threading

from engine.config import load_config
from hermes_tui.app import HermesApp
from hermes_tui.demo.home import cleanup_demo_home, fill_demo_home, prepare_demo_home
from tests.support import screen_shown, wait_until_pilot
from widgets.board.board_pane import BoardPane
from widgets.processes.processes_pane import ProcessesPane

GENEROUS = 120.0  # seconds: the builders start real workers on a loaded machine


def _header(app) -> str:
    return str(app.query_one("#header").render())


async def test_the_demo_draws_before_its_home_is_built_and_fills_in(tmp_path):
    gate = threading.Event()  # the builders wait behind it: the test decides when they run

    def fill(home) -> None:
        if not gate.wait(GENEROUS):
            raise AssertionError("the test never opened the gate")
        fill_demo_home(home)

    home = prepare_demo_home(tmp_path / "hermes-demo-test")
    app = HermesApp(home, load_config(home.config_file), demo=True, fill_home=fill)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            # Drawn, with nothing built yet: the header says the demo is starting.
            assert "starting…" in _header(app)
            assert not app.home_filled.is_set()
            board, processes = app.query_one(BoardPane), app.query_one(ProcessesPane)
            assert not board.cards and not processes.sessions
            gate.set()
            await wait_until_pilot(pilot, app.home_filled.is_set, GENEROUS, "the home filled")
            await wait_until_pilot(pilot, lambda: "starting…" not in _header(app), GENEROUS,
                                   "the header lost its 'starting…'")
            await wait_until_pilot(pilot, lambda: len(board.cards) >= 6, GENEROUS, "the board's cards shown")
            await wait_until_pilot(pilot, lambda: any(s.running for s in processes.sessions.values()), GENEROUS,
                                   "the demo's running processes shown")
            await wait_until_pilot(pilot, lambda: app.dispatch_loop.ticks > 0, GENEROUS,
                                   "the app's own dispatcher ticking")
    finally:
        gate.set()
        app.home_filled.wait(GENEROUS)
        cleanup_demo_home(home)


def test_a_demo_quit_before_its_fill_started_waits_for_no_fill_and_starts_none(tmp_path):
    """q at once (pressed as the first frame came up): the app ended before its fill's
    thread started, and the clean-up waited 90 s for a fill that never ran."""
    ran = []
    home = prepare_demo_home(tmp_path / "hermes-demo-test")
    try:
        app = HermesApp(home, load_config(home.config_file), demo=True, fill_home=ran.append)
        app.wait_for_fill(GENEROUS)  # returns at once: no fill started
        assert app.home_filled.is_set()
        app._start_filling()  # a late start (the UI's callback after the clean-up): none
        assert not app.home_filling.is_set() and ran == []
    finally:
        cleanup_demo_home(home)


async def test_a_cell_update_repaints_its_row_only_and_shows_what_a_datatable_shows():
    """The processes table changes a few cells a second: the CellTable keeps the other
    rows' renders (the table's update counter stays), and what it draws is what a plain
    DataTable draws for the same rows and updates, cursor and styles included."""
    from rich.text import Text
    from textual.app import App
    from textual.containers import Horizontal
    from textual.widgets import DataTable

    from widgets.common.partial_repaint import CellTable

    class Twin(App):
        def compose(self):
            with Horizontal():
                yield DataTable(id="plain", cursor_type="row")
                yield CellTable(id="cells", cursor_type="row")

    app = Twin()
    async with app.run_test(size=(120, 20)) as pilot:
        tables = [app.query_one("#plain", DataTable), app.query_one("#cells", CellTable)]
        for table in tables:
            table.add_column("ID", key="id")
            table.add_column("AGE", key="age")
            for i in range(8):
                table.add_row(Text(f"p{i}"), Text(f"{i}s"), key=f"p{i}")
            table.move_cursor(row=2)
        await pilot.pause()

        def drawn(table) -> list[str]:
            return [table.render_line(y).text for y in range(table.size.height)]

        assert drawn(tables[0]) == drawn(tables[1])
        counter = tables[1]._update_count
        for step in range(3):
            for table in tables:
                table.update_cell("p2", "age", Text(f"{10 + step}s", style="bold"))  # the cursor's row
                table.update_cell("p5", "age", Text(f"{step}z"))
            await pilot.pause()
            assert drawn(tables[0]) == drawn(tables[1])
            assert f" p5  {step}z" in drawn(tables[1])[6]
        assert tables[1]._update_count == counter  # no full repaint for a cell
        for table in tables:
            table.move_cursor(row=5)
        await pilot.pause()
        assert drawn(tables[0]) == drawn(tables[1])


async def test_the_help_dialog_opens_then_lists_every_key_laid_out_for_its_width(home):
    """`?` shows its frame at once; the table of every key is laid out in a thread and
    arrives as ready lines that fit the dialog, and again after a resize."""
    from hermes_tui.keymap import known_binding_ids
    from widgets.common.help_screen import HelpScreen

    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await wait_until_pilot(pilot, lambda: screen_shown(app, HelpScreen), what="the help dialog shown")
        keys = app.screen.query_one("#help-keys")

        def listed() -> str:
            return keys.plain

        await wait_until_pilot(pilot, lambda: "app.quit" in listed(), what="the keys listed")
        assert all(binding_id in listed() for binding_id in known_binding_ids())
        width = keys.size.width
        assert max(len(line) for line in listed().splitlines()) <= width
        await pilot.resize_terminal(100, 40)
        await wait_until_pilot(pilot, lambda: keys.size.width < width, what="the dialog narrower")
        await wait_until_pilot(pilot, lambda: max(len(line) for line in listed().splitlines()) <= keys.size.width,
                               what="the keys laid out again for the new width")
        assert all(binding_id in listed() for binding_id in known_binding_ids())


async def test_zoom_restyles_no_pane_and_agrees_with_the_narrow_layout(home):
    """`z` sets inline styles on the panes instead of a class the stylesheet reads (that
    restyled every widget of every pane); zoom and the narrow layout still agree through
    every order of zoom, resize and unzoom."""
    from widgets.common.pane import Pane

    app = HermesApp(home, load_config(home.config_file))

    def shown() -> list[str]:
        return [p.id for p in app.query(Pane) if p.display and p.region.area > 0]

    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        await wait_until_pilot(pilot, lambda: app.active_pane.id == "processes", what="the processes pane active")
        await pilot.pause()
        restyled = []
        update_styles = app.update_styles
        app.update_styles = lambda node=None, *a, **k: (restyled.append(node), update_styles(node, *a, **k))[1]
        await pilot.press("z")
        await wait_until_pilot(pilot, lambda: shown() == ["processes"], what="only the zoomed pane shown")
        assert not [n for n in restyled if n is app.query_one("#panes") or isinstance(n, Pane)]
        await pilot.resize_terminal(80, 24)  # narrow while zoomed
        await wait_until_pilot(pilot, lambda: app.narrow and shown() == ["processes"], what="one pane, narrow")
        await pilot.press("z")  # unzoom while narrow: still one pane (the narrow layout's)
        await wait_until_pilot(pilot, lambda: not app.zoomed, what="unzoomed")
        await pilot.pause()
        assert shown() == ["processes"]
        await pilot.press("z", "3")  # zoom again, switch pane: the new one is the one shown
        await wait_until_pilot(pilot, lambda: shown() == ["scratch"], what="the switched-to pane shown")
        await pilot.resize_terminal(160, 48)
        await wait_until_pilot(pilot, lambda: not app.narrow, what="wide again")
        await pilot.pause()
        assert shown() == ["scratch"]  # still zoomed
        await pilot.press("z")
        await wait_until_pilot(pilot, lambda: len(shown()) == 4, what="all four panes back")
        assert shown() == ["board", "processes", "scratch", "prune-log"]


async def test_the_fit_table_is_the_keyed_diff_a_pane_hands_its_rows_to():
    """update_rows builds cells only for new and changed rows and drops the gone ones;
    sync then adds, removes and updates only those on screen (the processes and scratch
    panes keep no diff of their own)."""
    from rich.text import Text
    from textual.app import App

    from widgets.common.fit_table import Col, FitTable

    class One(App):
        def compose(self):
            yield FitTable((Col("id", "ID"), Col("state", "State", flex=True)), id="t")

    built: list[str] = []
    calls: list[tuple] = []

    def cells_of(key: str, state: str) -> list[Text]:
        built.append(key)
        return [Text(key), Text(state)]

    app = One()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(FitTable)
        changes = table.update_rows({"a": "running", "b": "running", "c": "idle"}, cells_of)
        assert changes.added == ("a", "b", "c") and not changes.removed and not changes.changed
        table.sync()
        await pilot.pause()
        for name in ("add_row", "remove_row", "update_cell"):
            real = getattr(table, name)
            setattr(table, name, lambda *a, _n=name, _r=real, **k: calls.append((_n, a[0])) or _r(*a, **k))
        built.clear()
        changes = table.update_rows({"a": "running", "b": "exited", "d": "new"}, cells_of)
        assert changes.added == ("d",) and changes.removed == ("c",) and changes.changed == {"b": "running"}
        assert built == ["b", "d"]  # "a" did not change: its cells were not built again
        assert table.values == {"a": "running", "b": "exited", "d": "new"}
        table.sync()
        await pilot.pause()
        assert sorted(calls) == [("add_row", Text("d")), ("remove_row", "c"), ("update_cell", "b")]
        assert not table.update_rows({"a": "running", "b": "exited", "d": "new"}, cells_of)  # no change
