"""The start-up path kept cheap without changing what the user sees: the Footer names the
focused pane's everyday keys from the first frame and follows focus and remapping; the
board's columns have their widths before the first frame; modals still get focus back."""

from __future__ import annotations

import pytest

from engine.config import Settings
from engine.home import HomeLayout
from hermes_tui.app import HermesApp
from widgets.board.board_pane import BoardColumn, BoardPane
from widgets.common.help_screen import HelpScreen
from widgets.common.keys_footer import KeysFooter

WIDE = (160, 48)


def make_app(home: HomeLayout) -> HermesApp:
    return HermesApp(home, Settings(), home_label="~/.hermes")


def footer_keys(app: HermesApp) -> dict[str, str]:
    """description -> key shown, for every key in the Footer."""
    return {k.description: k.key_display for k in app.query_one(KeysFooter).entries}


async def test_first_frame_footer_names_the_board_keys_once(home, monkeypatch):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        keys = footer_keys(app)
        assert {"New card", "Move right", "Move left", "Assign", "Archive"} <= set(keys)
        assert {"Quit", "Help", "Command"} <= set(keys)
        # Secondary keys stay in ? help and the palette, not in the Footer.
        assert not {"Reclaim", "Unblock", "Dispatch now", "Zoom"} & set(keys)
        # Nothing about the bindings changes any more: a signal rebuilds nothing.
        rebuilds = []
        original = KeysFooter._build

        def counting(self):
            rebuilds.append(self)
            return original(self)

        monkeypatch.setattr(KeysFooter, "_build", counting)
        app.screen.refresh_bindings()
        await pilot.pause()
        assert rebuilds == []
        assert footer_keys(app) == keys


async def test_footer_follows_focus_and_remapped_keys(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        keys = footer_keys(app)
        assert {"Kill", "Follow", "Wrap", "Search", "All/running"} <= set(keys)
        assert "New card" not in keys and not {"Copy", "Editor"} & set(keys)
        app.set_keymap({"processes.kill": "K"})
        await pilot.pause()
        assert footer_keys(app)["Kill"] == "K"
        await pilot.press("1")
        await pilot.pause()
        assert "New card" in footer_keys(app) and "Kill" not in footer_keys(app)


@pytest.mark.parametrize("size", [WIDE, (80, 24)])
async def test_board_columns_are_sized_at_mount_for_their_real_width(home, size):
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        board = app.query_one(BoardPane)
        # The width the board sizes its columns for at mount (before any layout) is the
        # content width it then really has, so the first frame had the final widths.
        assert app.size.width - board.styles.gutter.width == board.size.width
        widths = {c.styles.width.value for c in board.query(BoardColumn)}
        assert len(widths) == 1 and widths.pop() >= 22


async def test_focus_comes_back_after_a_modal(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        before = app.focused
        assert before is not None and app.query_one(BoardPane) in before.ancestors
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is before


async def test_a_click_on_a_footer_key_presses_it_and_its_tooltip_shows_on_hover(home):
    """The footer is one line now: a click finds the key under the pointer (as Textual's
    key widgets did), a gap between keys does nothing."""
    from tests.support import screen_shown
    from tests.support import wait_until_pilot as wait_for

    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        footer = app.query_one(KeysFooter)
        await wait_for(pilot, lambda: footer.entries, what="the footer's keys")
        line = footer.render().plain
        command = next(e for e in footer.entries if e.description == "Command")
        await pilot.hover(KeysFooter, offset=(line.index(": Command") + 2, 0))
        await wait_for(pilot, lambda: footer.tooltip == command.tooltip == "Type a command to run", what="the tooltip")
        await pilot.click(KeysFooter, offset=(line.rindex(" " * 3), 0))  # past the keys: nothing
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.click(KeysFooter, offset=(line.index("? Help") + 3, 0))
        await wait_for(pilot, lambda: screen_shown(app, HelpScreen), what="the help screen")
