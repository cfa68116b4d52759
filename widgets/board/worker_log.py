"""A card's worker log, when its worker is no process session of this app (hermes's
gateway started it, and wrote ``kanban/logs/<id>.log``): its tail, kept current while
shown, scrolled to the end. The log is outside text: its control characters are shown
as visible escapes, never acted on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.kanban.workers import read_tail
from engine.text import escape_text
from widgets.common.dialog import Dialog

TAIL_BYTES = 64 * 1024
REFRESH_SECONDS = 2.0


class WorkerLogScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q", "dismiss(None)", "Close", id="board.log.close")]

    DEFAULT_CSS = """
    WorkerLogScreen > Vertical { width: 90%; max-width: 140; height: 90%; padding: 0 1; }
    WorkerLogScreen VerticalScroll { height: 1fr; }
    WorkerLogScreen .hint { height: 1; }
    """

    def __init__(self, task_id: str, path: Path, shown_path: str) -> None:
        super().__init__()
        self.task_id = task_id
        self._path = path
        self._shown_path = shown_path
        self.shown = ""  # the text shown now (the tests read it)

    def dialog_title(self) -> str:
        return f"{self.task_id}: worker log ({self._shown_path})"

    def compose_body(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("Loading…"), id="log-body")
        yield Static(f"the last {TAIL_BYTES // 1024} KiB, kept current · escape close", classes="hint")

    def on_mount(self) -> None:
        super().on_mount()
        self.load()
        self.set_interval(REFRESH_SECONDS, self.load)

    @work(exclusive=True, group="worker-log")
    async def load(self) -> None:
        raw = await asyncio.to_thread(read_tail, self._path, TAIL_BYTES)
        text = escape_text(raw.decode("utf-8", errors="replace"), keep_lines=True) or "(the log is empty)"
        if text != self.shown:
            self.shown = text
            self.query_one("#log-body", Static).update(Text(text))
            self.query_one(VerticalScroll).scroll_end(animate=False)
