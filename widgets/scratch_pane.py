"""The scratch entries pane."""

from __future__ import annotations

from textual.app import ComposeResult

from widgets.pane import EmptyState, Pane


class ScratchPane(Pane):
    PANE_ID = "scratch"
    TITLE = "Scratch"
    NUMBER = 3

    def compose(self) -> ComposeResult:
        yield EmptyState("Scratch entries are not part of this build yet: nothing is listed or pruned.")
