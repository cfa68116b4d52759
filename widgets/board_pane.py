"""The kanban board pane."""

from __future__ import annotations

from textual.app import ComposeResult

from widgets.pane import EmptyState, Pane


class BoardPane(Pane):
    PANE_ID = "board"
    TITLE = "Board"
    NUMBER = 1

    def compose(self) -> ComposeResult:
        yield EmptyState("The kanban board is not part of this build yet: no cards to show.")
