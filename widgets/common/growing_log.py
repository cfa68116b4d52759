"""A RichLog whose growth repaints the log and its scroll bar, not the screen's layout.

Textual declares a widget's virtual size a layout reactive, so each batch of lines a
RichLog takes (its virtual size grows by their count, or by the width of a longer line)
laid the whole screen out again and repainted every pane: with a session printing twice
a second in the output view, that was most of what the idle app did. A log's virtual size
is only its scrolling extent: its region on screen is its parent's to give. Here a new
extent updates the scroll bars' window and the scroll limits in place; only when a scroll
bar appears or goes (which takes or gives back a column or a row) is there a layout, which
Textual's own scroll bar reactives ask for.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import RichLog


class GrowingLog(RichLog):
    virtual_size = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        # Before its first layout the log has no container size: that layout sets it all.
        if self.container_size:
            self._scroll_update(size)  # scroll bars shown or not, their window, scroll limits
