"""The background processes pane: sessions and the selected one's output."""

from __future__ import annotations

from textual.app import ComposeResult

from widgets.pane import EmptyState, Pane


class ProcessesPane(Pane):
    PANE_ID = "processes"
    TITLE = "Processes"
    NUMBER = 2

    def compose(self) -> ComposeResult:
        yield EmptyState("Process sessions are not part of this build yet: nothing is running here.")
