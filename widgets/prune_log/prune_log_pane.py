"""The Prune log pane: ``logs/scratch-prune.log`` (and its rotated files) as a table
of time, action, path and detail, coloured by action, filterable, followed live.

The file is read in a worker thread by byte offset (engine.scratch.audit.LogTail);
new records are appended as rows, never re-rendering the whole table on a timer.
A real Hermes home's log reads the same: the record shapes are shared.
"""

from __future__ import annotations

import os
import threading

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Input

from engine.config import Settings
from engine.home import HomeLayout
from widgets.common.fit_table import Col, DetailLine, FitTable
from widgets.common.pane import EmptyState, Pane

ACTION_STYLES = {
    "removed": "bold red",
    "removing": "red",
    "quarantined": "magenta",
    "restored": "green",
    "TERM": "yellow",
    "KILL": "bold yellow",
    "error": "bold white on red",
    "rescued": "bold green",
    "kept": "cyan",
    "vanished": "dim",
    "failed": "bold white on red",
    "skipped": "dim",
    "other": "dim",
}

FILTER_CYCLE = ("", "removed", "quarantined", "restored", "TERM", "KILL", "kept", "rescued", "error", "failed")
MAX_ROWS = 5000
# Path and Detail share the width the short columns leave; Detail hides before Path,
# Time before both (the detail line under the table shows the selected record in full).
COLUMNS = (Col("time", "Time", hide_rank=2), Col("action", "Action"),
           Col("path", "Path", flex=True, min_width=16), Col("detail", "Detail", flex=True, min_width=12, hide_rank=1))


class PruneLogPane(Pane):
    PANE_ID = "prune-log"
    TITLE = "Prune log"
    NUMBER = 4

    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", id="prune_log.filter"),
        Binding("a", "cycle_action", "Action filter", id="prune_log.action"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="prune_log.clear"),
        Binding("G", "jump_end", "Newest", id="prune_log.end"),
    ]

    DEFAULT_CSS = """
    PruneLogPane Input { height: 3; border: round $panel-lighten-2; }
    PruneLogPane DataTable { height: 1fr; }
    PruneLogPane #prune-log-detail { max-height: 3; }
    PruneLogPane .empty-state { display: none; }
    PruneLogPane.-empty .empty-state { display: block; }
    """

    class Records(Message, bubble=False):
        """Posted by the reading thread to the pane itself: the log ``records`` new since
        the last read (``initial``: the first read, the file's tail). Every batch is
        appended, so none replaces another."""

        def __init__(self, records: list, initial: bool) -> None:
            super().__init__()
            self.records = records
            self.initial = initial

    def __init__(self, *, home: HomeLayout, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.settings = settings
        self.records: list = []
        self._tail = None
        self._tail_lock = threading.Lock()  # a superseded worker may still be reading
        self._action = ""
        self._text = ""
        self._next_key = 0
        self._read_key: tuple | None = None  # the log's stat when it was last read
        self.reads = 0  # times the log was read (tests read these counters)
        self.skipped_reads = 0  # timer ticks that found the log as last read
        self._shown_records: dict[str, object] = {}  # row key -> the record it shows

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter by text · a: by action", id="prune-log-filter")
        yield FitTable(COLUMNS, id="prune-log-table", zebra_stripes=True)
        yield DetailLine(id="prune-log-detail")
        yield EmptyState("No prune has been logged yet (<home>/logs/scratch-prune.log).")

    @property
    def table(self) -> FitTable:
        return self.query_one("#prune-log-table", FitTable)

    @property
    def focus_target(self):
        return self.table

    def on_mount(self) -> None:
        self._read(initial=True)
        self.set_interval(max(0.5, self.settings.ui.refresh_seconds), self._on_timer)

    def _log_key(self) -> tuple | None:
        """The log file's identity, size and change time (one stat): equal to the last
        read's, nothing was appended, rotated or cut since."""
        try:
            st = os.stat(self.home.prune_log)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _on_timer(self) -> None:
        """Read the log's new records only when the pane is shown and the file changed
        since the last read (a stat here; the read itself in a thread)."""
        if not self.shown:
            return
        if self._tail is not None and self._log_key() == self._read_key:
            self.skipped_reads += 1
            return
        self._read()

    def on_show(self) -> None:
        self._on_timer()  # shown again: catch up with what was appended meanwhile

    @work(thread=True, exclusive=True, group="prune-log-read", description="read the prune log")
    def _read(self, initial: bool = False) -> None:
        from engine.scratch.audit import LogTail

        with self._tail_lock:
            self._read_key = self._log_key()  # before the read: a change after it is read next time
            self.reads += 1
            if self._tail is None:
                self._tail = LogTail(self.home.prune_log, limit=MAX_ROWS)
                records = self._tail.start()
                initial = True
            else:
                records = self._tail.poll()
            if records or initial:
                self.post_message(self.Records(records, initial))

    def on_prune_log_pane_records(self, message: Records) -> None:
        self.records.extend(message.records)
        overflow = len(self.records) - MAX_ROWS
        if overflow > 0:
            self.records = self.records[overflow:]
            self._rebuild()
        else:
            self._append([r for r in message.records if self._matches(r)])
        self._update_status()

    # -- filtering ---------------------------------------------------------------------------

    def _matches(self, rec) -> bool:
        if self._action and rec.action != self._action:
            return False
        if self._text:
            hay = f"{rec.action} {self._short_path(rec.path)} {self._short_text(rec.detail)}".lower()
            return self._text in hay
        return True

    def _masked(self, text: str) -> str:
        """An entry's name is outside text: its secrets are masked as outputs are
        (``processes.redact``); the log file keeps the raw name."""
        from engine.processes.redact import maybe_redact

        return maybe_redact(text, self.settings.processes.redact)

    def _short_path(self, path: str) -> str:
        """Paths inside this home's scratch or quarantine, shown relative to them (masked)."""
        for prefix, label in ((str(self.home.scratch_dir), "scratch"),
                              (str(self.home.quarantine_dir), "quarantine")):
            if path.startswith(prefix + "/"):
                return self._masked(f"{label}/{path[len(prefix) + 1:]}")
        return self._masked(path)

    def _short_text(self, text: str) -> str:
        text = text.replace(str(self.home.scratch_dir) + "/", "scratch/")
        return self._masked(text.replace(str(self.home.quarantine_dir) + "/", "quarantine/"))

    def _append(self, records: list) -> None:
        if not records:
            return
        table = self.table
        at_end = table.selected_index >= table.row_total - 1
        with self.app.batch_update():
            for rec in records:
                style = ACTION_STYLES.get(rec.action, "")
                key = str(self._next_key)
                table.put(key, (
                    Text(rec.time.split(",")[0], style="dim"),
                    Text(rec.action, style=style),
                    Text(self._short_path(rec.path)),
                    Text(self._short_text(rec.detail), style="dim" if rec.action in ("kept", "vanished") else ""),
                ))
                self._shown_records[key] = rec
                self._next_key += 1
            table.sync()
        if at_end:
            table.go_to(table.row_total - 1)  # the newest record, on the last page when the log pages
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        """The selected record in full: its whole path and detail, never cut."""
        rec = self._shown_records.get(self.table.selected_key or "")
        detail = self.query_one("#prune-log-detail", DetailLine)
        if rec is None:
            detail.show("")
            return
        detail.show(Text(f"{rec.time.split(',')[0]} · {rec.action} · {self._short_path(rec.path)}"
                         + (f" · {self._short_text(rec.detail)}" if rec.detail else "")))

    def _rebuild(self) -> None:
        self.table.drop_all()
        self._shown_records = {}
        self._append([r for r in self.records if self._matches(r)])
        self.table.sync()
        self._show_detail()
        self._update_status()

    def _update_status(self) -> None:
        table = self.table
        self.set_class(not self.records, "-empty")
        shown = table.row_total
        text = f"{len(self.records)} records"
        if self._action or self._text:
            what = " ".join(x for x in (self._action, repr(self._text) if self._text else "") if x)
            text = f"{shown} of {len(self.records)} records · filter {what}"
        self.set_status(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "prune-log-filter":
            self._text = event.value.strip().lower()
            self._rebuild()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.table.focus()

    def action_focus_filter(self) -> None:
        self.query_one("#prune-log-filter", Input).focus()

    def action_cycle_action(self) -> None:
        i = FILTER_CYCLE.index(self._action) if self._action in FILTER_CYCLE else 0
        self._action = FILTER_CYCLE[(i + 1) % len(FILTER_CYCLE)]
        self._rebuild()
        self.notify(f"action filter: {self._action or 'all'}", timeout=1.5)

    def action_clear_filter(self) -> None:
        self._action = ""
        self._text = ""
        self.query_one("#prune-log-filter", Input).value = ""
        self._rebuild()

    def action_jump_end(self) -> None:
        table = self.table
        if table.row_total:
            table.go_to(table.row_total - 1)
