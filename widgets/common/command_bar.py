"""The command bar: type a shell command, Enter runs it in the foreground.

While a foreground command runs, the bar's title says what runs and which key moves
it to the background; Enter on a new command then redirects (the running one yields
first). Up/down walk the commands entered before.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from engine.text import one_line

HISTORY_LIMIT = 200
IDLE_TITLE = ""  # idle, the placeholder says it all
RUNNING_TITLE_CHARS = 40  # of the running command, in the title


class CommandBar(Input):
    """An Input that posts :class:`CommandBar.Submitted` with the command text."""

    DEFAULT_CSS = """
    CommandBar { dock: bottom; margin: 0 0; border-title-color: $text-muted; }
    CommandBar.-running { border: tall $warning; border-title-color: $warning; }
    """

    BINDINGS = [
        Binding("up", "history(-1)", "Previous command", show=False, id="command-bar.history_previous"),
        Binding("down", "history(1)", "Next command", show=False, id="command-bar.history_next"),
        Binding("escape", "leave", "Back to the panes", id="command-bar.leave"),
    ]

    class Submitted(Message):
        """Posted when Enter is pressed on a command that is not blank: ``command``, trimmed.
        The app runs it in the foreground (through the processes pane)."""

        def __init__(self, command: str) -> None:
            super().__init__()
            self.command = command

    class Left(Message):
        """The user is done typing: focus should go back to the panes."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("placeholder", "Type a command and press Enter to run it in the foreground")
        kwargs.setdefault("id", "command-bar")
        super().__init__(**kwargs)
        self.history: list[str] = []
        self._history_pos: int | None = None
        self._draft = ""

    def on_mount(self) -> None:
        self.border_title = IDLE_TITLE

    async def action_submit(self) -> None:
        command = self.value.strip()
        if not command:
            return
        if not self.history or self.history[-1] != command:
            self.history.append(command)
            del self.history[:-HISTORY_LIMIT]
        self._history_pos = None
        self._draft = ""
        self.value = ""
        self.post_message(self.Submitted(command))

    def action_leave(self) -> None:
        self.post_message(self.Left())

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._history_pos is None:
            if step > 0:
                return
            self._draft = self.value
            pos = len(self.history) - 1
        else:
            pos = self._history_pos + step
        if pos >= len(self.history):
            self._history_pos = None
            self.value = self._draft
        else:
            self._history_pos = max(0, pos)
            self.value = self.history[self._history_pos]
        self.cursor_position = len(self.value)

    def set_running(self, command: str | None, background_key: str = "ctrl+b", detail: str = "") -> None:
        """Say what runs in the foreground (None: nothing) and how to background it."""
        self.set_class(command is not None, "-running")
        if command is None:
            self.border_title = Text(detail or IDLE_TITLE)
            self.placeholder = "Type a command and press Enter to run it in the foreground"
            return
        shown = one_line(command, RUNNING_TITLE_CHARS)
        # Text, not a str: a str title is parsed as markup, and the command is outside text.
        self.border_title = Text(f"running: {shown} · {background_key} moves it to the background")
        self.placeholder = "Enter a new command to redirect (the running one moves to the background)"
