"""The frame every pane of the console shares: a bordered, focusable container with
a numbered title, a subtitle for live state, and an honest empty state."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.message import Message
from textual.walk import walk_depth_first
from textual.widgets import Static


class Pane(Vertical, can_focus=True):
    """A pane of the main screen. Subclasses set PANE_ID, TITLE and compose their body.

    Focusing the pane itself forwards focus to its main widget (``focus_target``), so
    number keys land somewhere useful and the Footer shows that widget's keys.
    """

    PANE_ID = "pane"
    TITLE = "Pane"
    NUMBER = 0

    DEFAULT_CSS = """
    Pane {
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        height: 1fr;
        width: 1fr;
        padding: 0 1;
    }
    Pane.-active {
        border: round $accent;
    }
    Pane .empty-state {
        color: $text-muted;
        padding: 1 1;
        width: 1fr;
        height: auto;
    }
    """

    class StatusChanged(Message):
        """A pane's one-line status for the header (e.g. '3 running')."""

        def __init__(self, pane_id: str, text: str) -> None:
            super().__init__()
            self.pane_id = pane_id
            self.text = text

    def __init__(self, *children, **kwargs) -> None:
        kwargs.setdefault("id", self.PANE_ID)
        super().__init__(*children, **kwargs)
        self._status: str | None = None
        self._title = f"{self.NUMBER} {self.TITLE}" if self.NUMBER else self.TITLE
        self.border_title = self._title

    def set_title_detail(self, detail: str) -> None:
        """What the pane shows, after its name in the title (``1 Board · research``); ""
        for nothing. Outside text: escaped for the title's markup."""
        from rich.markup import escape

        base = f"{self.NUMBER} {self.TITLE}" if self.NUMBER else self.TITLE
        title = f"{base} · {escape(detail)}" if detail else base
        if title != self._title:
            self._title = title
            self.mark_active(self.has_class("-active"), update=False)

    def mark_active(self, active: bool, *, update: bool = True) -> None:
        """Show the pane as the one the keys act on (or not): an accent border and title,
        and in the narrow layout the one pane displayed. ``update=False`` before mount.

        Only the pane is restyled, never what is inside it, and the title's colour is in
        the title itself: a colour rule for it (``border-title-color``) makes Textual
        repaint every widget in the pane, which was most of a pane switch's time."""
        self.set_class(active, "-active", update=False)
        # The title is the pane's own words, never outside text.
        self.border_title = f"[$accent]{self._title}[/]" if active else self._title
        if update and self.is_mounted:
            # The border changes colour, not size: no layout unless the narrow layout
            # shows or hides the pane.
            shown = self.display
            self.app.stylesheet.apply(self)
            if self.display != shown:
                self.refresh(layout=True)

    @property
    def focus_target(self):
        """The widget that should hold focus when this pane is chosen (None: the pane)."""
        # A walk that stops at the first focusable widget; a query would list and match
        # the pane's every widget on each pane switch.
        for child in walk_depth_first(self, with_root=False):
            if child.focusable:
                return child
        return None

    def on_focus(self) -> None:
        target = self.focus_target
        if target is not None:
            target.focus()

    @property
    def shown(self) -> bool:
        """Whether the user can see the pane now: not hidden by the narrow layout or a
        zoom, and its screen not covered by a dialog. A pane skips refreshing what is
        not shown, and catches up when it is shown again."""
        return self.is_attached and self.display and self.screen.is_current

    def set_status(self, text: str) -> None:
        """Panes call this on every refresh; only a change reaches the header."""
        if text == self._status:
            return
        self._status = text
        self.border_subtitle = Text(text)  # a str would be parsed as markup: statuses carry names
        self.post_message(self.StatusChanged(self.PANE_ID, text))


class EmptyState(Static):
    """A short, honest sentence about why a pane has nothing to show."""

    def __init__(self, text: str, **kwargs) -> None:
        super().__init__(text, classes="empty-state", **kwargs)
