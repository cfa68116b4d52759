"""The ``?`` screen: every binding of every pane, with the keys currently in effect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from widgets.common.dialog import Dialog
from widgets.common.lines_view import LinesView, strips_of


@dataclass(frozen=True)
class HelpRow:
    section: str
    keys: str
    description: str
    binding_id: str
    action: str | None = None
    namespace: str | None = None  # "app", or the id of the pane whose action it is


def help_lines(rows: Sequence[HelpRow], width: int) -> list:
    """Every row in three columns (keys, what, id) at ``width`` cells, as ready-made
    lines (strips). Rich lays the table out; a thread may call this."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_column(style="dim")
    section = None
    for row in rows:
        if row.section != section:
            if section is not None:
                table.add_row("", "", "")
            table.add_row(Text(row.section, style="bold underline"), "", "")
            section = row.section
        table.add_row(Text(row.keys), Text(row.description), Text(row.binding_id))  # keys come from config
    console = Console(width=width, force_terminal=True, color_system="truecolor", legacy_windows=False)
    return strips_of(console.render_lines(table, console.options.update_width(width), pad=False))


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen > Vertical { width: 90%; max-width: 100; height: 90%; padding: 0 2; }
    HelpScreen .title { padding: 1 0; }
    HelpScreen .hint { padding: 1 0 0 0; }
    HelpScreen #help-keys { overflow-y: scroll; }
    """

    class LaidOut(Message, bubble=False):
        """Posted by the layout thread to the screen itself: ``lines``, every row laid out
        for the width the screen had. One laid out for an older width is moot."""

        def __init__(self, lines: list) -> None:
            super().__init__()
            self.lines = lines

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, HelpScreen.LaidOut)

    def __init__(self, rows: Sequence[HelpRow], title: str = "Keys") -> None:
        super().__init__()
        self._rows = list(rows)
        self._title = title
        self._laid_for: int | None = None  # the width the rows were last laid out for

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._title, classes="title")
            yield LinesView("listing the keys…", id="help-keys")
            yield Static(
                "Remap any key in config.yaml under 'keys:' by its id (right column), "
                "e.g.  keys: {processes.background: ctrl+g}.  Esc closes.",
                classes="hint",
            )

    def on_mount(self) -> None:
        # The dialog is shown at once; its long table is laid out in a thread and
        # arrives as ready lines, of which a frame draws those in view. The layout
        # starts now, for the width the box will have (the CSS above: 90% of the
        # screen, at most 100, less its border, padding and the scroll bar, which is
        # always shown so the lines' arrival moves nothing); once laid out, a box of
        # another width lays the rows out again.
        self._lay_out_for(max(20, min(int(self.app.size.width * 0.9), 100) - 2 - 4 - 2))
        self.call_after_refresh(self._lay_out)

    def on_resize(self) -> None:
        self.call_after_refresh(self._lay_out)  # the lines were cut for the old width

    def _lay_out(self) -> None:
        self._lay_out_for(max(20, self.query_one(LinesView).scrollable_content_region.width))

    def _lay_out_for(self, width: int) -> None:
        if width != self._laid_for:
            self._laid_for = width
            self._render_rows(width)

    @property
    def rows(self) -> tuple[HelpRow, ...]:
        """The rows the screen lists."""
        return tuple(self._rows)

    @work(thread=True, exclusive=True, group="help-layout", description="lay the keys out")
    def _render_rows(self, width: int) -> None:
        self.post_message(self.LaidOut(help_lines(self._rows, width)))

    def on_help_screen_laid_out(self, message: LaidOut) -> None:
        if self.is_attached:
            self.query_one("#help-keys", LinesView).set_lines(message.lines)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
