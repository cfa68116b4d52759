"""widgets/common/textual_fixes.py: Textual repainted a widget's scroll bars each time a
scroll bar colour rule was set, changed or not, so every focus change into a table cost a
second frame for its scroll bar. Pins Textual's behaviour too: if Textual stops doing
this, the fix can go."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.css._style_properties import ScrollbarColorProperty
from textual.scrollbar import ScrollBar
from textual.widgets import DataTable, Input

from widgets.common import textual_fixes


class Host(App):
    CSS = "DataTable { height: 8; }"

    def compose(self) -> ComposeResult:
        yield Input()
        yield DataTable()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("a", "b")
        table.add_rows([(str(i), "row") for i in range(100)])  # taller than the table: a scroll bar


def focus_moves(app, table) -> None:
    table.focus()
    app.query_one(Input).focus()
    table.focus()


async def _scroll_bar_refreshes(monkeypatch, change) -> int:
    """Scroll bar repaints that ``change`` causes, after a round of focus moves (the scroll
    bar's first styling: every rule new)."""
    app = Host()
    async with app.run_test(size=(40, 20)) as pilot:
        table = app.query_one(DataTable)
        await pilot.pause()
        assert table.show_vertical_scrollbar
        focus_moves(app, table)
        await pilot.pause()
        refreshed = []
        refresh = ScrollBar.refresh
        monkeypatch.setattr(ScrollBar, "refresh", lambda self, *a, **k: (refreshed.append(self), refresh(self, *a, **k))[1])
        change(app, table)
        await pilot.pause()
        return len(refreshed)


async def test_a_focus_change_repaints_no_scroll_bar_a_colour_change_still_does(monkeypatch):
    textual_fixes.install()
    assert await _scroll_bar_refreshes(monkeypatch, focus_moves) == 0
    assert await _scroll_bar_refreshes(monkeypatch, lambda app, table: setattr(
        table.styles, "scrollbar_color", "red")) >= 1


async def test_textual_alone_still_repaints_the_scroll_bar_on_a_focus_change(monkeypatch):
    """Without the fix (Textual's own setter), the same focus changes repaint it."""
    monkeypatch.setattr(ScrollbarColorProperty, "__set__", textual_fixes.TEXTUAL_SETTER)
    assert await _scroll_bar_refreshes(monkeypatch, focus_moves) > 0
