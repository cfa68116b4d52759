"""Every word readable, at 80x24, 120x36 and 160x48.

The whole app on one home with content in every pane (a seeded board, finished process
sessions with long commands, scratch entries, prune-log records with long details):
snapshots at the three sizes the layout is designed for, and, for every table, the rule
that no cell is cut silently: a cell either shows its whole value or ends in "…", and
the selected row's full value is in the detail line under the table.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from rich.text import Text
from test_kanban_pane import CONFIG, fixed_clock, seed  # noqa: F401  (fixed_clock is a fixture)
from test_processes_app import write_session
from test_scratch_app import build

from engine.config import Settings, load_config
from engine.home import HomeLayout
from engine.processes import ProcessRegistry
from engine.scratch.audit import AuditLog
from hermes_tui.app import HermesApp
from tests.support import wait_settled
from tests.support import wait_until_pilot as wait_for
from widgets.common.fit_table import DetailLine, FitTable
from widgets.common.keys_footer import KeysFooter

SIZES = {"80x24": (80, 24), "120x36": (120, 36), "160x48": (160, 48)}
T0 = 1_700_000_000.0
LONG_COMMAND = ("python -m pytest tests/test_processes_app.py tests/test_layouts.py -k 'focus and not slow' "
                "--maxfail=1 -q --durations=5")


def make_sessions(home: HomeLayout) -> None:
    write_session(home, "proc_0a1b2c3d4e5f", LONG_COMMAND, T0, 75, 0, "collected 12 items\n12 passed\n")
    write_session(home, "proc_1b2c3d4e5f60", "npm run build -- --mode production --sourcemap", T0 + 10, 3, 2,
                  "> build\nerror: missing module 'left-pad'\n")
    write_session(home, "proc_2c3d4e5f6071", "make test", T0 + 20, 1, 0, "ok\n", owner="kanban:t_00000003")


async def make_home(tmp_path, with_scratch: bool = False) -> HomeLayout:
    home = HomeLayout(tmp_path / "home").ensure()
    home.ensure_dir(home.own_dir)  # where hermes-tui keeps its board
    await seed(home)
    home.config_file.write_text(CONFIG)
    make_sessions(home)
    if with_scratch:  # ages follow the real clock: for the behaviour tests, not the pictures
        build(home)
        home.prune_log.parent.mkdir(parents=True, exist_ok=True)
        with AuditLog(home.prune_log) as audit:
            audit.removed(str(home.scratch_dir / "old-run-with-a-rather-long-name-for-the-path-column"), 2000)
            audit.kept(str(home.scratch_dir / "parked"),
                       ".scratch-keep marker (the entry's owner asked for it to stay; 856 bytes in 2 files)")
    return home


def make_app(home: HomeLayout) -> HermesApp:
    return HermesApp(home, load_config(home.config_file), home_label="~/.hermes")


async def _loaded(pilot) -> None:
    app = pilot.app
    board, processes = app.pane("board"), app.pane("processes")
    await wait_for(pilot, lambda: len(board.cards) == 7 and len(processes.row_ids) >= 3)
    await wait_for(pilot, lambda: app.pane("scratch").last_survey is not None)
    await wait_settled(pilot)


async def _loaded_on_processes(pilot) -> None:
    await _loaded(pilot)
    await pilot.press("2")  # at 80x24 one pane shows at a time: picture the busiest one
    await wait_for(pilot, lambda: pilot.app.pane("processes").table.region.width > 0)
    await wait_settled(pilot)


@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
def test_layout_snapshot(snap_compare, tmp_path, fixed_clock, size):  # noqa: F811
    home = asyncio.run(make_home(tmp_path))
    before = _loaded_on_processes if size == (80, 24) else _loaded
    assert snap_compare(make_app(home), terminal_size=size, run_before=before)


def _words(value: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", value) if w]


async def _check_every_row(pilot, table: FitTable, detail: DetailLine) -> int:
    """Each cut or hidden cell of each row: its ending says so, and the detail line has it."""
    cut_seen = 0
    shown_keys = table.plan.keys
    for row, key in enumerate(table.keys):
        table.move_cursor(row=row, animate=False)
        await wait_for(pilot, lambda: table.selected_key == key)  # noqa: B023 (awaited at once)
        shown = dict(zip(shown_keys, table.get_row(key), strict=True))
        cut = [(col, full) for col, full in zip(table.cols, table.row_cells(key), strict=True)
               if (cell := shown.get(col.key)) is None or cell.plain != full.plain]
        for col, full in cut:
            cell: Text | None = shown.get(col.key)
            if cell is not None:
                assert cell.plain.endswith("…"), f"{col.key} cut silently: {cell.plain!r} of {full.plain!r}"
                assert full.plain.startswith(cell.plain[:-1])
        cut_seen += len(cut)
        # The detail line follows the cursor (a message later): it shows every word of the cut cells.
        words = [word for _col, full in cut for word in _words(full.plain)]
        await wait_for(pilot, lambda: all(word in detail.shown_text for word in words),  # noqa: B023
                       what=f"every word of {key}'s cut cells in the detail line")
    return cut_seen


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
async def test_no_cell_is_cut_silently_and_the_full_text_is_one_key_away(tmp_path, fixed_clock, size):  # noqa: F811
    home = await make_home(tmp_path, with_scratch=True)
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        await _loaded(pilot)
        await wait_for(pilot, lambda: len(app.pane("prune-log").records) == 2)
        cut = 0
        for pane_id, table_id, detail_id in (("processes", "#proc-table", "#proc-detail"),
                                             ("scratch", "#scratch-table", "#scratch-detail"),
                                             ("prune-log", "#prune-log-table", "#prune-log-detail")):
            await pilot.press({"processes": "2", "scratch": "3", "prune-log": "4"}[pane_id])
            pane = app.pane(pane_id)
            table = pane.query_one(table_id, FitTable)
            await wait_for(pilot, lambda: table.plan is not None and table.row_count == table.row_total > 0)  # noqa: B023
            cut += await _check_every_row(pilot, table, pane.query_one(detail_id, DetailLine))
        assert cut > 0  # the home's long values did not fit: the rule was exercised


async def test_command_column_never_drops_below_a_useful_width(tmp_path, fixed_clock):  # noqa: F811
    """At 120x36 the processes pane is half the screen: less important columns hide, the
    command keeps its room (it was two characters wide)."""
    app = make_app(await make_home(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        table = app.pane("processes").table
        widths = dict(table.plan.widths)
        assert widths["command"] >= 24
        assert "rss" not in widths and "id" in widths and "status" in widths


async def test_footer_shows_whole_keys_at_80_columns(tmp_path, fixed_clock):  # noqa: F811
    app = make_app(await make_home(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot)
        footer = app.query_one(KeysFooter)
        keys = footer.entries
        # Every key is drawn whole (was "? He": the last keys ran off the screen).
        line = footer.render().plain
        assert len(line) == footer.size.width == 80
        for key in keys:
            assert f"{key.key_display} {key.description}" in line, key.description
        assert {"help", "quit"} <= {k.action for k in keys}


async def test_the_processes_list_shows_enough_rows_at_80x24(tmp_path, fixed_clock):  # noqa: F811
    """It showed two rows at 80x24: the list must show at least four sessions at once."""
    home = await make_home(tmp_path)  # (its old finished sessions are past retention: gone)
    reg = ProcessRegistry(home, Settings())
    for i in range(6):  # real runs that notify: the notifications list takes its rows too
        reg.wait(reg.spawn(f"echo {i}", notify=True).id, timeout=10)
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot)
        await pilot.press("2")
        pane = app.pane("processes")
        table = pane.table
        await wait_for(pilot, lambda: table.row_count == 6 and len(pane.notifications) == 6)
        await wait_settled(pilot)
        rows_shown = table.scrollable_content_region.height - table.header_height
        assert rows_shown >= 4
