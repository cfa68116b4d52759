"""A confirmation modal for destructive actions: it shows exactly what will happen
and its default answer is No (Enter on open = No; Escape = No)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Static

from widgets.common.dialog import Dialog


class ConfirmModal(Dialog[bool]):
    """Dismisses with True only when the user picks the destructive button."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
    ]

    DEFAULT_CSS = """
    ConfirmModal > Vertical { max-width: 110; max-height: 100%; border: thick $error 60%; }
    ConfirmModal .title { margin-bottom: 1; }
    ConfirmModal VerticalScroll { height: auto; max-height: 30; }
    """
    FIRST_FOCUS = "#no"
    # The body scrolls; besides it: border and padding (4), the title and its margin (2),
    # the buttons and their margin (4), and a row for a title that wraps to two.
    SCROLLS = "VerticalScroll"
    CHROME_ROWS = 11
    SCROLL_MAX_ROWS = 30

    def __init__(self, title: str, body: str, yes_label: str = "Yes", no_label: str = "No") -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._yes = yes_label
        self._no = no_label

    def dialog_title(self) -> str:
        return self._title

    @property
    def body(self) -> str:
        """The question's text, as shown."""
        return self._body

    def compose_body(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._body, classes="body", markup=False)
        with Horizontal(classes="buttons"):
            yield Button(self._no, id="no", variant="primary")
            yield Button(self._yes, id="yes", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
