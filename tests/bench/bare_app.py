"""The reference for bench_app.py: a bare Textual app with a Header, a Footer and a
DataTable, and the same kinds of reaction to the same keys as hermes-tui (``n``,
``enter`` and ``?`` open a modal screen, ``z`` hides part of the layout). Started
the same way as hermes-tui (``python bare_app.py`` in a terminal); ``--clock`` shows the
header's clock (redrawn every second), the reference for idle CPU."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Static


class BareModal(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]
    DEFAULT_CSS = "BareModal { align: center middle; } BareModal > Static { width: 60; height: 10; border: thick $accent; }"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text)


class BareApp(App):
    TITLE = "bare Textual app"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("n", "modal('New card')", "New"),
        Binding("enter", "modal('Details')", "Details", priority=True),  # over the table's own enter
        Binding("question_mark", "modal('Help: every key')", "Help"),
        Binding("z", "zoom", "Zoom"),
    ]
    CSS = "#side { width: 1fr; } #panes.-zoomed #side { display: none; }"

    def __init__(self, clock: bool = False) -> None:
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield Header(show_clock=self.clock)
        with Horizontal(id="panes"):
            with Vertical(id="main"):
                yield DataTable(id="table")
            yield Static("side", id="side")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("ID", "STATUS", "COMMAND")
        table.add_rows([(f"p{i}", "running", f"command number {i}") for i in range(30)])
        table.focus()

    def action_modal(self, text: str) -> None:
        self.push_screen(BareModal(text))

    def action_zoom(self) -> None:
        self.query_one("#panes").toggle_class("-zoomed")

    @property
    def zoomed(self) -> bool:
        return self.query_one("#panes").has_class("-zoomed")


if __name__ == "__main__":
    import sys

    BareApp(clock="--clock" in sys.argv[1:]).run()  # --clock: the header's clock ticks every second
