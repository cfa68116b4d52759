"""The board switcher: every board of the home (hermes-agent's named boards and
hermes-tui's own), with its counts, to pick the one the board pane shows.

It only shows and picks: the board pane lists the boards (off the UI thread, through
:func:`engine.kanban.boards.list_boards`) and opens the chosen one. Board names are
outside text: plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine.kanban.boards import BoardInfo
from engine.text import escape_text
from widgets.common.dialog import Dialog


def board_line(board: BoardInfo, shown: bool) -> Text:
    """One board as the switcher lists it: which one is shown, slug, name, whose, counts."""
    text = Text()
    text.append("● " if shown else "  ", style="green")
    text.append(escape_text(board.slug), style="bold")
    text.append(f"  {escape_text(board.name)}")
    text.append(f"  ({'hermes-agent' if board.kind == 'hermes' else 'hermes-tui'})", style="dim")
    if board.error:
        text.append(f"  {escape_text(board.error)}", style="yellow")
    else:
        counts = ", ".join(f"{status} {n}" for status, n in sorted(board.counts.items())) or "no cards"
        text.append(f"  {counts}", style="dim")
    if board.usage and board.usage.get("input_tokens") is not None:
        text.append(f"  {board.usage['input_tokens']:,} in / {board.usage['output_tokens']:,} out tokens", style="dim")
    if board.hermes_current:
        text.append("  hermes's current board", style="dim italic")
    return text


class BoardSwitchScreen(Dialog[Path | None]):
    """Pick a board. Dismisses with the chosen board's database path, or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="board.switcher.cancel")]

    DEFAULT_CSS = """
    BoardSwitchScreen > Vertical { max-width: 110; }
    BoardSwitchScreen OptionList { height: auto; max-height: 20; margin-top: 1; }
    BoardSwitchScreen .hint { margin-top: 1; }
    """
    FIRST_FOCUS = "OptionList"

    def __init__(self, boards: Sequence[BoardInfo], shown: Path | None) -> None:
        super().__init__()
        self.boards = list(boards)
        self._shown = shown

    def dialog_title(self) -> str:
        return "Switch board"

    def compose_body(self) -> ComposeResult:
        options = [Option(board_line(b, b.path == self._shown), id=str(i)) for i, b in enumerate(self.boards)]
        yield OptionList(*options, id="boards")
        yield Static(Text("Enter shows the board, Escape keeps this one. Changes to hermes-agent's boards go "
                          "through `hermes kanban --board SLUG` (without `hermes` on PATH they are read-only)."),
                     classes="hint")

    def on_mount(self) -> None:
        super().on_mount()
        boards = self.query_one(OptionList)
        shown = next((i for i, b in enumerate(self.boards) if b.path == self._shown), 0)
        if self.boards:
            boards.highlighted = shown

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        board = self.boards[int(event.option.id or 0)]
        if board.error:  # e.g. a hermes board with no database yet: nothing to show, nothing to create here
            self.notify(f"board {escape_text(board.slug)} cannot be shown: {escape_text(board.error)}",
                        severity="warning", timeout=5, markup=False)
            return
        self.dismiss(board.path)
