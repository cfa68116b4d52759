"""The processes pane's notifications list: every event, wrapped (never cut), the newest
at the bottom, and the top line always the start of an event.

A RichLog that scrolls to its end shows whatever line the end leaves at the top: with
events that wrap to several lines in a list a few lines high, that was the middle of one
("hermes-demo (3 targets)"; sleep 0.2…"). This one instead shows the newest events that
fit whole, from the first line of the oldest of them; an event taller than the list on
its own is shown from its first line (the rest scrolls).
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual import events
from textual.geometry import Size

from widgets.common.growing_log import GrowingLog


class NotificationList(GrowingLog):
    def __init__(self, *, max_events: int, **kwargs) -> None:
        # Lines, not events, bound a RichLog: room for the events kept at a few lines each.
        super().__init__(max_lines=max_events * 8, auto_scroll=False, wrap=True, markup=False, **kwargs)
        self._events: deque[Text] = deque(maxlen=max_events)

    def add(self, text: Text) -> None:
        self._events.append(text)
        self.write(text, scroll_end=False)
        self.call_after_refresh(self.show_newest)

    def on_resize(self, event: events.Resize) -> None:
        # Writes made before the list had a size are drawn by RichLog's own handler, after this.
        self.call_after_refresh(self.show_newest)

    def show_newest(self) -> None:
        region = self.scrollable_content_region
        if region.width <= 0 or region.height <= 0 or not self.lines:
            return
        used = 0
        for text in reversed(self._events):
            height = len(text.wrap(self.app.console, region.width))
            if used + height > region.height:
                used = used or height  # the newest alone is taller: from its first line
                break
            used += height
        top = max(0, len(self.lines) - used)
        # Room under the last line (drawn blank) so that the top can be an event's first
        # line even when the events that fit leave the list's last lines empty.
        self.virtual_size = Size(self.virtual_size.width, max(len(self.lines), top + region.height))
        self.scroll_to(y=top, animate=False, immediate=True)
