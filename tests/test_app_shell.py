"""The app shell driven through Pilot: pane focus keys, zoom, help, palette, narrow
layout, remapped keys and quitting; SVG snapshots at both sizes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from textual.command import CommandList, CommandPalette
from textual.events import DescendantFocus
from textual.message import Message
from textual.widgets import Tab, Tabs

from engine.config import Settings
from engine.home import HomeLayout
from hermes_tui import app as app_module
from hermes_tui.app import HermesApp
from hermes_tui.keymap import known_binding_ids
from tests.support import wait_settled, wait_until_async, wait_until_pilot, wait_workers
from widgets.common.help_screen import HelpScreen
from widgets.common.pane import Pane

WIDE = (160, 48)
NARROW = (80, 24)


def make_app(home: HomeLayout, **settings_changes) -> HermesApp:
    settings = replace(Settings(), **settings_changes) if settings_changes else Settings()
    return HermesApp(home, settings, home_label="~/.hermes")


def displayed_panes(app: HermesApp) -> list[str]:
    return [p.id for p in app.query(Pane) if p.display and p.region.area > 0]


async def test_all_four_panes_visible_when_wide(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert displayed_panes(app) == ["board", "processes", "scratch", "prune-log"]
        assert not app.narrow
        assert not app.query_one("#pane-tabs", Tabs).display


async def test_number_keys_focus_panes(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        for key, pane_id in (("2", "processes"), ("3", "scratch"), ("4", "prune-log"), ("1", "board")):
            await pilot.press(key)
            await pilot.pause()
            assert app.active_pane.id == pane_id
            assert app.active_pane.has_class("-active")
            focused = app.focused
            assert focused is not None
            assert focused is app.active_pane or app.active_pane in focused.ancestors
            assert sum(p.has_class("-active") for p in app.query(Pane)) == 1


async def test_zoom_shows_only_the_focused_pane_and_toggles_back(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("3")
        await pilot.press("z")
        await pilot.pause()
        assert app.zoomed
        assert displayed_panes(app) == ["scratch"]
        assert app.pane("scratch").region.width == WIDE[0]
        await pilot.press("2")  # switching pane while zoomed keeps the zoom
        await pilot.pause()
        assert displayed_panes(app) == ["processes"]
        await pilot.press("z")
        await pilot.pause()
        assert not app.zoomed
        assert len(displayed_panes(app)) == 4


async def test_narrow_terminal_shows_one_pane_with_tabs(home):
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert app.narrow
        assert app.query_one("#pane-tabs", Tabs).display
        assert displayed_panes(app) == ["board"]
        await pilot.press("4")
        await pilot.pause()
        assert displayed_panes(app) == ["prune-log"]
        assert app.query_one("#pane-tabs", Tabs).active == "tab-prune-log"


async def test_clicking_a_tab_moves_to_its_pane_and_a_late_report_of_an_old_tab_moves_nobody(home):
    app = make_app(home)
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        tabs = app.query_one("#pane-tabs", Tabs)
        await pilot.click("#tab-scratch")
        await wait_until_pilot(pilot, lambda: app.active_pane_id == "scratch", what="the clicked tab's pane")
        assert displayed_panes(app) == ["scratch"]
        await pilot.press("2")
        await pilot.pause()
        assert app.active_pane_id == "processes" and tabs.active == "tab-processes"
        # The tabs' report of an activation can arrive after the user moved on (their first
        # activation, at mount, reaches the app a few hops later): it is stale, not a move.
        tabs.post_message(Tabs.TabActivated(tabs, tabs.query_one("#tab-board", Tab)))
        await pilot.pause()
        await pilot.pause()
        assert app.active_pane_id == "processes" and displayed_panes(app) == ["processes"]


class Hold(Message):
    """Keeps the app's message loop in one handler until ``release`` is set."""

    def __init__(self, entered: asyncio.Event, release: asyncio.Event) -> None:
        super().__init__()
        self.entered, self.release = entered, release


class HoldingApp(HermesApp):
    CSS_PATH = str(Path(app_module.__file__).with_name(HermesApp.CSS_PATH))

    async def on_hold(self, message: Hold) -> None:
        message.entered.set()
        await message.release.wait()


async def test_a_tab_report_that_arrives_while_the_app_closes_is_dropped(home):
    """A fresh-clone CI run failed with NoMatches('#panes'): Pilot's run_test tears the
    screens down while the app's loop still handles what is queued, and a tab report
    (here a click on a tab just before the end) then switched panes that were gone."""
    app = HoldingApp(home, Settings(), home_label="~/.hermes")
    entered, release = asyncio.Event(), asyncio.Event()

    async def release_once_the_screens_are_gone() -> None:
        await wait_until_async(lambda: not app.screen_stack, what="the screens torn down")
        release.set()

    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("2")
        await pilot.pause()
        tabs = app.query_one("#pane-tabs", Tabs)
        app.post_message(Hold(entered, release))
        await entered.wait()
        tabs.active = "tab-board"  # what a click on the tab does
        app.post_message(Tabs.TabActivated(tabs, tabs.query_one("#tab-board", Tab)))
        app.post_message(DescendantFocus(app.pane("board")))
        releaser = asyncio.create_task(release_once_the_screens_are_gone())
    await releaser  # the context's exit raised nothing: the late reports were dropped


async def test_resizing_switches_between_layouts(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert app.narrow and len(displayed_panes(app)) == 1
        await pilot.resize_terminal(120, 36)  # exactly the threshold: wide
        await pilot.pause()
        assert not app.narrow and len(displayed_panes(app)) == 4


async def test_help_screen_lists_every_binding(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = {row.binding_id for row in app.screen.rows}
        assert set(known_binding_ids()) <= shown
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_palette_offers_every_action(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for needed in ("Everywhere: Zoom", "Everywhere: Help", "Everywhere: Go to the prune log"):
            assert needed in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"zoom")
        palette = app.screen
        await wait_until_pilot(pilot, lambda: palette.query_one(CommandList).option_count, what="zoom offered")
        await wait_workers(app, [CommandPalette._GATHER_COMMANDS_GROUP])  # the search for "zoom" has ended
        await pilot.press("enter")
        await pilot.pause()
        assert app.zoomed


async def test_keys_in_config_remap_bindings(home):
    app = make_app(home, keys=MappingProxyType({"app.zoom": "x", "app.pane.scratch": "s"}))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s")
        await pilot.press("x")
        await pilot.pause()
        assert app.active_pane.id == "scratch" and app.zoomed
        await pilot.press("z")  # the old key no longer zooms
        await pilot.pause()
        assert app.zoomed


async def test_colon_focuses_the_command_bar_and_q_types_there(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("colon")
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running
        assert app.focused.id == "command-bar" and app.focused.value == "q"


async def test_q_quits(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)
    assert not app.is_running


async def test_header_names_the_home(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        header = str(app.query_one("#header").render())
        assert "~/.hermes" in header and "hermes-tui" in header


async def _settled(pilot) -> None:
    """Every pane has looked at the empty home once (the board found there is none,
    the processes and scratch panes read their folders): what the picture shows no
    longer depends on how fast those threads ran."""
    app = pilot.app
    board = app.pane("board")
    await wait_until_pilot(pilot, lambda: board.service is None and board.db_path is not None, what="no board yet")
    await wait_until_pilot(pilot, lambda: app.pane("processes").refresh_count >= 1, what="processes read")
    await wait_until_pilot(pilot, lambda: app.pane("scratch").last_survey is not None, what="scratch surveyed")
    await wait_settled(pilot)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["160x48", "80x24"])
def test_shell_snapshot(snap_compare, tmp_path, size):
    home = HomeLayout(tmp_path / "home").ensure()
    assert snap_compare(make_app(home), terminal_size=size, run_before=_settled)


async def test_escape_leaves_the_command_bar_for_the_pane_it_came_from(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("3", "colon")
        await pilot.pause()
        assert app.focused.id == "command-bar"
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is not None and app.focused.id != "command-bar"
        assert app.active_pane.id == "scratch"
        await pilot.press("2")  # keys reach the app again instead of the bar
        await pilot.pause()
        assert app.active_pane.id == "processes"
        assert app.query_one("#command-bar").value == ""


async def test_focus_dropped_to_nowhere_returns_to_the_active_pane(home):
    """Seen once after an approved prune: focus ended on no widget, so the pane's keys
    were dead until a number key. Whatever drops it, it comes back to the active pane."""
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert app.focused is not None
        app.screen.set_focus(None)
        await wait_until_pilot(pilot, lambda: app.focused is not None, what="the focus back")
        assert app.active_pane.id == "scratch"
        assert app.focused is app.pane("scratch") or app.pane("scratch") in app.focused.ancestors


def test_every_binding_id_in_the_widgets_is_known_to_help_and_keys():
    """Every Binding with an id anywhere in widgets/ is listed by ? and remappable."""
    import re

    from tests.conftest import REPO

    declared = set()
    for path in (REPO / "widgets").rglob("*.py"):
        declared |= set(re.findall(r'Binding\([^)]*?id="([^"]+)"', path.read_text(), flags=re.S))
    assert declared and declared <= set(known_binding_ids())
