"""GrowingLog: a log taking lines repaints itself and its scroll bars, and lays out the
screen only when a scroll bar appears or goes (Textual's RichLog laid out the whole screen
for each batch of lines: most of the idle demo's work while a session printed); a frame
works out the log's style once, not for each line."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.dom import DOMNode
from textual.geometry import Region
from textual.widgets import RichLog, Static

from tests.support import wait_until_pilot as wait_for
from tests.support.drawing import count_layouts
from widgets.common.growing_log import GrowingLog


class Host(App):
    CSS = """
    #log { height: 6; overflow-x: auto; overflow-y: auto; }
    """

    def __init__(self, log_class: type[RichLog]) -> None:
        super().__init__()
        self.log_class = log_class

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("above")
            yield self.log_class(id="log", max_lines=50, wrap=False, markup=False, auto_scroll=True)
            yield Static("below")


def shown_lines(log: RichLog) -> list[str]:
    return [log.render_line(y).text.rstrip() for y in range(log.scrollable_content_region.height)]


async def test_lines_that_only_lengthen_the_log_lay_nothing_out(monkeypatch):
    app = Host(GrowingLog)
    async with app.run_test(size=(40, 12)) as pilot:
        log = app.query_one(GrowingLog)
        await pilot.pause()
        log.write("first")
        await pilot.pause()
        assert not log.show_vertical_scrollbar
        for i in range(10):  # more than fit: the scroll bar comes (one layout, Textual's)
            log.write(f"line {i}")
        await wait_for(pilot, lambda: log.show_vertical_scrollbar, what="the scroll bar")
        await wait_for(pilot, lambda: shown_lines(log)[-1] == "line 9", what="the end in view")
        layouts = count_layouts(monkeypatch)
        for i in range(10, 30):
            log.write(f"line {i}")
            await pilot.pause()
        await wait_for(pilot, lambda: shown_lines(log)[-1] == "line 29", what="the end followed")
        assert log.scroll_y == log.max_scroll_y
        assert log.vertical_scrollbar.window_virtual_size == 31  # the bar's thumb knows the new extent
        assert layouts == []
        # A line wider than the log: the horizontal bar comes, and the width is scrollable.
        log.write("x" * 100)
        await wait_for(pilot, lambda: log.show_horizontal_scrollbar, what="the horizontal bar")
        assert log.max_scroll_x > 0
        log.clear()
        await wait_for(pilot, lambda: not log.show_vertical_scrollbar and not log.show_horizontal_scrollbar,
                       what="the bars gone")


async def test_textuals_own_log_lays_the_screen_out_for_each_line(monkeypatch):
    """What GrowingLog corrects, pinned: when Textual stops it, the class can go."""
    app = Host(RichLog)
    async with app.run_test(size=(40, 12)) as pilot:
        log = app.query_one(RichLog)
        for i in range(11):
            log.write(f"line {i}")
        await wait_for(pilot, lambda: log.show_vertical_scrollbar, what="the scroll bar")
        await pilot.pause()
        layouts = count_layouts(monkeypatch)
        for i in range(11, 16):
            log.write(f"line {i}")
            await pilot.pause()
        assert len(layouts) >= 5


async def one_frame(log_class: type[RichLog], monkeypatch) -> tuple[list, int]:
    """A full frame of a log of 20 lines (more than fit): what it drew, and how many times
    it worked out its own style meanwhile."""
    app = Host(log_class)
    async with app.run_test(size=(40, 12)) as pilot:
        log = app.query_one(RichLog)
        for i in range(20):
            log.write(f"line {i}" + " ·" * i)
        await wait_for(pilot, lambda: log.show_vertical_scrollbar, what="the scroll bar")
        await pilot.pause()
        walks: list[DOMNode] = []
        real = DOMNode.rich_style

        def counting(node):
            walks.append(node)
            return real.fget(node)

        monkeypatch.setattr(DOMNode, "rich_style", property(counting))
        log.refresh()
        lines = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        monkeypatch.setattr(DOMNode, "rich_style", real)
        return [(line.text, [s.style for s in line]) for line in lines], sum(n is log for n in walks)


async def test_a_frame_works_out_the_logs_style_once_and_draws_what_richlog_draws(monkeypatch):
    theirs, their_walks = await one_frame(RichLog, monkeypatch)
    ours, our_walks = await one_frame(GrowingLog, monkeypatch)
    assert ours == theirs and len(ours) == 6
    assert our_walks == 1
    assert their_walks >= len(theirs)  # Textual's: at least once a line
