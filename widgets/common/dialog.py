"""The base of every dialog: a box in the middle of a solid screen (the app's stylesheet
gives every ModalScreen its solid backdrop), with an optional bold title, the body the
dialog composes, and the first control focused on open.

A dialog sets only what is its own: its size (``Dialog > Vertical`` in its DEFAULT_CSS),
its bindings (each with its own id, so keys stay remappable), and its body. Outside
text in a title is plain text, never markup.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

ResultType = TypeVar("ResultType")


class Dialog(ModalScreen[ResultType]):
    """A centred box: ``TITLE_TEXT`` (when set) over :meth:`compose_body`; on open, the
    widget ``FIRST_FOCUS`` names (a selector) takes the focus; ``action_cancel``
    dismisses with None."""

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical {
        width: 80%; height: auto;
        border: thick $accent 60%; background: $surface; padding: 1 2;
    }
    Dialog .title { text-style: bold; }
    Dialog .hint { color: $text-muted; }
    Dialog .buttons { height: auto; align-horizontal: right; margin-top: 1; }
    Dialog Button { margin-left: 2; }
    """

    FIRST_FOCUS: ClassVar[str | None] = None
    # A dialog taller than a short terminal (80x24) scrolls one part, ``SCROLLS`` (a
    # selector), so that the rest (its buttons, an error line) stays on screen: the part
    # is never taller than the screen less ``CHROME_ROWS`` (the box's border and padding
    # and every other row of the dialog), nor than ``SCROLL_MAX_ROWS``. Its box has
    # max-height 100%: a percentage of an auto-height box has nothing to be a share of,
    # so the part's limit is set in rows on each resize.
    SCROLLS: ClassVar[str | None] = None
    CHROME_ROWS: ClassVar[int] = 0
    SCROLL_MAX_ROWS: ClassVar[int | None] = None

    def dialog_title(self) -> str | None:
        """The bold line at the top, or None for none."""
        return None

    def compose(self) -> ComposeResult:
        with Vertical():
            title = self.dialog_title()
            if title is not None:
                yield Static(title, classes="title", markup=False)
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        if self.FIRST_FOCUS is not None:
            self.query_one(self.FIRST_FOCUS).focus()

    def on_resize(self, event: events.Resize) -> None:
        if self.SCROLLS is None:
            return
        rows = max(3, event.size.height - self.CHROME_ROWS)
        if self.SCROLL_MAX_ROWS is not None:
            rows = min(rows, self.SCROLL_MAX_ROWS)
        self.query_one(self.SCROLLS).styles.max_height = rows

    def action_cancel(self) -> None:
        self.dismiss(None)
