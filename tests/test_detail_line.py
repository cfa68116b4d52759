"""DetailLine keeps the height of the longest text since its width last changed: moving
the selection between a long and a short row resized the table above it at each step (a
layout of the screen, and three more frames for the scroll bars)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from tests.support import wait_until_pilot as wait_for
from widgets.common.fit_table import DetailLine

LONG = "what keeps it: " + "a long reason " * 8


class Host(App):
    def compose(self) -> ComposeResult:
        yield DetailLine(id="detail")


async def test_the_height_grows_for_a_long_text_stays_for_a_short_one_and_refits_on_resize():
    app = Host()
    async with app.run_test(size=(40, 10)) as pilot:
        detail = app.query_one(DetailLine)
        detail.show("short")
        await wait_for(pilot, lambda: detail.size.height == 1, what="one line")
        detail.show(LONG)
        await wait_for(pilot, lambda: detail.size.height == 3, what="three lines (max-height)")
        assert detail.shown_text == LONG
        tall = detail.styles.height
        detail.show("short again")
        await pilot.pause()
        assert detail.styles.height == tall and detail.size.height == 3  # no layout for a shorter text
        await pilot.resize_terminal(200, 10)  # a new width: fitted again to the text shown
        await wait_for(pilot, lambda: detail.size.height == 1, what="one line at the new width")
