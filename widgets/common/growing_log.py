"""A RichLog whose growth repaints the log and its scroll bar, not the screen's layout,
and whose frames work out the log's style once.

Textual declares a widget's virtual size a layout reactive, so each batch of lines a
RichLog takes (its virtual size grows by their count, or by the width of a longer line)
laid the whole screen out again and repainted every pane: with a session printing twice
a second in the output view, that was most of what the idle app did. A log's virtual size
is only its scrolling extent: its region on screen is its parent's to give. Here a new
extent updates the scroll bars' window and the scroll limits in place; only when a scroll
bar appears or goes (which takes or gives back a column or a row) is there a layout, which
Textual's own scroll bar reactives ask for. This holds for a log whose height its
stylesheet fixes (``1fr``, a number of lines), as both of the app's are: one sized by its
content (``height: auto``) needs the layout to grow.

A log that scrolls draws every line in view again, and RichLog asks for the log's style
(a walk of its ancestors' styles, blending their backgrounds) once or twice per line. It
cannot change within one frame: a frame works it out once.
"""

from __future__ import annotations

from rich.style import Style
from textual.dom import DOMNode
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import RichLog


class GrowingLog(RichLog):
    virtual_size = Reactive(Size(0, 0), layout=False)
    _frame_style: Style | None = None

    def watch_virtual_size(self, size: Size) -> None:
        # Before its first layout the log has no container size: that layout sets it all.
        if self.container_size:
            self._scroll_update(size)  # scroll bars shown or not, their window, scroll limits

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_style = DOMNode.rich_style.fget(self)
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    @property
    def rich_style(self) -> Style:
        style = self._frame_style
        return style if style is not None else super().rich_style
