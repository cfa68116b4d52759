"""The prune log pane."""

from __future__ import annotations

from textual.app import ComposeResult

from widgets.pane import EmptyState, Pane


class PruneLogPane(Pane):
    PANE_ID = "prune-log"
    TITLE = "Prune log"
    NUMBER = 4

    def compose(self) -> ComposeResult:
        yield EmptyState("The prune log is not part of this build yet: no records are read.")
