"""The command bar: type a shell command, Enter runs it in the foreground."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Input


class CommandBar(Input):
    """An Input that posts :class:`CommandBar.Submitted` with the command text."""

    DEFAULT_CSS = """
    CommandBar { dock: bottom; margin: 0 0; }
    """

    class Submitted(Message):
        def __init__(self, command: str) -> None:
            super().__init__()
            self.command = command

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("placeholder", "Type a command and press Enter to run it in the foreground")
        kwargs.setdefault("id", "command-bar")
        super().__init__(**kwargs)

    async def action_submit(self) -> None:
        command = self.value.strip()
        if not command:
            return
        self.value = ""
        self.post_message(self.Submitted(command))
