"""LinesView: ready-made lines, of which a frame draws only those in view (the help
screen's list arrived in ~40 ms of UI-thread rendering as a Static)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult

from tests.support import wait_until_pilot as wait_for
from widgets.common.lines_view import LinesView, strips_of


class Host(App):
    def compose(self) -> ComposeResult:
        yield LinesView("waiting…", id="view")


async def test_a_frame_draws_only_the_lines_in_view_and_scrolling_shows_the_others(monkeypatch):
    app = Host()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LinesView)
        assert view.plain == "waiting…"
        drawn = []
        render_line = LinesView.render_line
        monkeypatch.setattr(LinesView, "render_line", lambda self, y: (drawn.append(y), render_line(self, y))[1])
        control = Segment("\x1b[2J", None, [(1,)])  # a control segment: never drawn
        lines = strips_of([[Segment(f"line {i} "), Segment("bold", Style(bold=True)), control] for i in range(10_000)])
        view.set_lines(lines)
        await wait_for(pilot, lambda: drawn, what="a frame")
        await pilot.pause()
        assert 0 < len(drawn) <= 3 * view.size.height  # not 10,000
        assert view.plain.splitlines()[9_999] == "line 9999 bold"  # the control segment dropped
        view.scroll_end(animate=False)
        await pilot.pause()
        line = view.render_line(view.size.height - 1)
        assert line.text.startswith("line 9999 bold")
