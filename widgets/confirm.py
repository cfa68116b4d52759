"""A confirmation modal for destructive actions: it shows exactly what will happen
and its default answer is No (Enter on open = No; Escape = No)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmModal(ModalScreen[bool]):
    """Dismisses with True only when the user picks the destructive button."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
    ]

    DEFAULT_CSS = """
    ConfirmModal { align: center middle; }
    ConfirmModal > Vertical {
        width: 80%;
        max-width: 110;
        height: auto;
        max-height: 90%;
        border: thick $error 60%;
        background: $surface;
        padding: 1 2;
    }
    ConfirmModal .title { text-style: bold; margin-bottom: 1; }
    ConfirmModal VerticalScroll { height: auto; max-height: 30; }
    ConfirmModal .buttons { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmModal Button { margin-left: 2; }
    """

    def __init__(self, title: str, body: str, yes_label: str = "Yes", no_label: str = "No") -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._yes = yes_label
        self._no = no_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._title, classes="title", markup=False)
            with VerticalScroll():
                yield Static(self._body, classes="body", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(self._no, id="no", variant="primary")
                yield Button(self._yes, id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
