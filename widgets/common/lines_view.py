"""A scrollable view of ready-made lines: the lines are laid out elsewhere (in a
thread, as Rich renders them) and a frame draws only the lines in view, as they are.

A Static holding the same text renders every line of it on the UI thread each time it
changes (the help screen's ~150 rows took ~40 ms a frame to arrive)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


def strips_of(lines: Sequence[Sequence[Segment]]) -> list[Strip]:
    """Rich's rendered lines as strips, without their control segments (safe in a thread)."""
    return [Strip([s for s in line if not s.control]) for line in lines]


class LinesView(ScrollView, can_focus=True):
    """Shows ``lines`` (strips); ``placeholder`` until the first lines arrive."""

    DEFAULT_CSS = """
    LinesView { height: 1fr; }
    """

    def __init__(self, placeholder: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Strip] = []
        if placeholder:
            self.set_lines([Strip([Segment(placeholder)])])

    def set_lines(self, lines: list[Strip]) -> None:
        self._lines = lines
        self.virtual_size = Size(max((line.cell_length for line in lines), default=0), len(lines))
        self.refresh()

    @property
    def plain(self) -> str:
        """The lines' text, one per line."""
        return "\n".join(line.text for line in self._lines)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = scroll_y + y
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        return self._lines[index].crop_extend(scroll_x, scroll_x + width, self.rich_style)
