"""The ``?`` screen: every binding of every pane, with the keys currently in effect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


@dataclass(frozen=True)
class HelpRow:
    section: str
    keys: str
    description: str
    binding_id: str
    action: str | None = None
    namespace: str | None = None  # "app", or the id of the pane whose action it is


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 90%;
        max-width: 100;
        height: 90%;
        border: thick $accent 60%;
        background: $surface;
        padding: 0 2;
    }
    HelpScreen .title { text-style: bold; padding: 1 0; }
    HelpScreen .hint { color: $text-muted; padding: 1 0 0 0; }
    """

    def __init__(self, rows: Sequence[HelpRow], title: str = "Keys") -> None:
        super().__init__()
        self._rows = list(rows)
        self._title = title

    def compose(self) -> ComposeResult:
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_column(style="dim")
        section = None
        for row in self._rows:
            if row.section != section:
                if section is not None:
                    table.add_row("", "", "")
                table.add_row(Text(row.section, style="bold underline"), "", "")
                section = row.section
            table.add_row(Text(row.keys), Text(row.description), Text(row.binding_id))  # keys come from config
        with Vertical():
            yield Static(self._title, classes="title")
            with VerticalScroll():
                yield Static(table)
            yield Static(
                "Remap any key in config.yaml under 'keys:' by its id (right column), "
                "e.g.  keys: {processes.background: ctrl+g}.  Esc closes.",
                classes="hint",
            )

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
