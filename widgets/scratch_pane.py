"""The Scratch pane: every entry of ``<home>/cache/scratch`` with its state, idle age,
size, why it is kept and which processes work inside; quarantined entries below.

The survey (a walk of every entry plus a /proc scan) runs in a worker thread; the
table is updated by keyed diff. ``p`` previews a prune in a modal (default No) and
runs an approved plan in a thread with progress; ``u`` restores the selected
quarantined entry.
"""

from __future__ import annotations

import enum
import threading
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, ProgressBar, Static

from engine.config import Settings
from engine.home import HomeLayout
from engine.scratch.entries import EntryState
from engine.text import human_bytes, human_duration
from widgets.fit_table import Col, DetailLine, FitTable
from widgets.pane import EmptyState, Pane

STATE_STYLES = {
    EntryState.ACTIVE: "green",
    EntryState.IDLE: "bold yellow",
    EntryState.KEPT: "cyan",
    EntryState.UNKNOWN: "bold red",
}
QUARANTINED_STYLE = "magenta"


class RowKind(enum.Enum):
    """What a row of the table shows: a scratch entry or a quarantined one."""

    ENTRY = enum.auto()
    QUARANTINED = enum.auto()

# The entry's name and why it is kept share what the short columns leave; the process
# list hides first (the detail line under the table names the processes in full).
COLUMNS = (Col("name", "Entry", flex=True, min_width=14), Col("state", "State"), Col("idle", "Idle"),
           Col("size", "Size", hide_rank=2), Col("why", "Why kept", flex=True, min_width=10, hide_rank=1),
           Col("pids", "Procs", hide_rank=3))

# Re-survey at most this often on its own (each survey walks every active entry).
MIN_REFRESH_SECONDS = 10.0


class SortCell(Text):
    """A cell that shows text and sorts by a separate value (numbers sort as numbers)."""

    def __init__(self, text: str, sort_key, style: str = "") -> None:
        super().__init__(text, style=style)
        self.sort_key = sort_key


def _row_cells(row) -> dict[str, SortCell]:
    from engine.text import show_name

    kind, item = row
    if kind is RowKind.QUARANTINED:
        return {
            "name": SortCell(show_name(item.file_name), (1, item.file_name)),  # quarantine rows last
            "state": SortCell("quarantined", "zquarantined", QUARANTINED_STYLE),
            "idle": SortCell("-", -1.0),
            "size": SortCell("-", -1),
            "pids": SortCell("-", ""),
            "why": SortCell("u restores it", "", "dim"),
        }
    pids = ",".join(str(p) for p in item.pids)
    return {
        "name": SortCell(show_name(item.name), (0, item.name)),
        "state": SortCell(item.state, item.state, STATE_STYLES.get(item.state, "")),
        "idle": SortCell(item.age_text,
                         item.idle_seconds if item.idle_seconds is not None else -1.0),
        "size": SortCell(human_bytes(item.size_bytes) if item.size_bytes is not None else "?",
                         item.size_bytes if item.size_bytes is not None else -1),
        "pids": SortCell(pids or "-", pids),
        "why": SortCell(show_name(item.kept_reason or ""), item.kept_reason or ""),
    }


class ScratchPane(Pane):
    PANE_ID = "scratch"
    TITLE = "Scratch"
    NUMBER = 3

    BINDINGS = [
        Binding("p", "preview_prune", "Prune…", id="scratch.prune"),
        Binding("u", "restore", "Restore", id="scratch.restore"),
        Binding("s", "cycle_sort", "Sort", id="scratch.sort"),
        Binding("r", "refresh", "Refresh", id="scratch.refresh"),
    ]

    DEFAULT_CSS = """
    ScratchPane DataTable { height: 1fr; }
    ScratchPane ProgressBar { height: 1; display: none; }
    ScratchPane ProgressBar.-running { display: block; }
    ScratchPane #scratch-progress-label { height: 1; display: none; color: $text-muted; }
    ScratchPane #scratch-progress-label.-running { display: block; }
    ScratchPane .empty-state { display: none; }
    ScratchPane.-empty .empty-state { display: block; }
    """

    class Surveyed(Message):
        """Posted by the survey thread to the pane itself: the ``survey`` of the scratch
        folder and its quarantine, or ``error``, why it could not be taken. A survey
        still waiting is moot once a newer one has been taken (each is the whole folder)."""

        bubble = False

        def __init__(self, survey=None, error: str | None = None) -> None:
            super().__init__()
            self.survey = survey
            self.error = error

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, ScratchPane.Surveyed) and message.error is None

    class PruneProgress(Message):
        """Posted by the prune thread after each entry: ``done`` of ``total`` entries,
        ``freed`` bytes so far, the ``path`` just handled. Only the newest one waiting is shown."""

        bubble = False

        def __init__(self, done: int, total: int, freed: int, path: str) -> None:
            super().__init__()
            self.done, self.total, self.freed, self.path = done, total, freed, path

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, ScratchPane.PruneProgress)

    class PruneFinished(Message):
        """Posted by the prune thread when the pass has ended: its ``result``, or ``error``."""

        bubble = False

        def __init__(self, result=None, error: str | None = None) -> None:
            super().__init__()
            self.result = result
            self.error = error

    class Planned(Message):
        """Posted by the planning thread: the ``plan`` of a prune with the ``target`` and
        ``options`` it was made for (the pane asks the user to approve it), or ``error``."""

        bubble = False

        def __init__(self, plan=None, target=None, options=None, error: str | None = None) -> None:
            super().__init__()
            self.plan, self.target, self.options = plan, target, options
            self.error = error

    class Restored(Message):
        """Posted by the restore thread: the ``name`` an entry got back in scratch, or ``error``."""

        bubble = False

        def __init__(self, name: str = "", error: str | None = None) -> None:
            super().__init__()
            self.name = name
            self.error = error

    def __init__(self, *, home: HomeLayout, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.settings = settings
        self._items: dict[str, tuple] = {}  # row key -> ("e", EntryReport) | ("q", QuarantinedEntry)
        self._sort_index = 0  # into SORTS
        self._sort_reverse = False
        self._pruning = False
        self.last_survey = None
        self._sizes = None  # engine.scratch.entries.SizeCache, made in the worker
        self._survey_lock = threading.Lock()  # a superseded survey thread may still be running

    SORTS = ("name", "state", "idle", "size")

    def compose(self) -> ComposeResult:
        yield FitTable(COLUMNS, id="scratch-table", zebra_stripes=True)
        yield DetailLine(id="scratch-detail")
        yield Static(id="scratch-progress-label", markup=False)
        yield ProgressBar(id="scratch-progress", show_eta=False)
        yield EmptyState("No scratch entries yet. Commands spawned here get <home>/cache/scratch as TMPDIR; "
                         "an entry idle for scratch.idle_hours can be pruned with p.")

    def on_mount(self) -> None:
        self.set_status("scanning…")
        self.refresh_entries()
        every = max(MIN_REFRESH_SECONDS, self.settings.ui.refresh_seconds)
        self.set_interval(every, self.refresh_entries)

    @property
    def table(self) -> FitTable:
        return self.query_one("#scratch-table", FitTable)

    # -- the survey (worker thread) ------------------------------------------------------

    def _target_and_options(self):
        from engine.scratch.target import PruneOptions, PruneTarget

        return PruneTarget.of(self.home), PruneOptions.from_settings(self.home, self.settings)

    def refresh_entries(self) -> None:
        if not self._pruning:
            self._survey()

    @work(thread=True, exclusive=True, group="scratch-survey")
    def _survey(self) -> None:
        from engine.scratch.entries import SizeCache, survey_scratch

        try:
            target, options = self._target_and_options()
            with self._survey_lock:
                if self._sizes is None:
                    self._sizes = SizeCache()
                survey = survey_scratch(target, options, with_sizes=True, size_cache=self._sizes)
        except Exception as exc:  # a thread reports any error: the pane says it in its status
            self.post_message(self.Surveyed(error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Surveyed(survey))

    def on_scratch_pane_surveyed(self, message: Surveyed) -> None:
        if message.error:
            self.set_status(f"cannot read: {message.error}")
            return
        survey = message.survey
        self.last_survey = survey
        rows = {f"e:{e.name}": (RowKind.ENTRY, e) for e in survey.entries}
        rows.update({f"q:{q.file_name}": (RowKind.QUARANTINED, q) for q in survey.quarantine})
        self._items = rows
        self._apply_rows({key: _row_cells(row) for key, row in rows.items()})
        self._show_detail()
        self.set_class(not rows, "-empty")
        counts: dict[str, int] = {}
        for e in survey.entries:
            counts[e.state] = counts.get(e.state, 0) + 1
        parts = [f"{len(survey.entries)} entries"]
        parts += [f"{counts[s]} {s}" for s in (EntryState.IDLE, EntryState.KEPT, EntryState.UNKNOWN) if counts.get(s)]
        if survey.quarantine:
            parts.append(f"{len(survey.quarantine)} quarantined")
        total = sum(e.size_bytes or 0 for e in survey.entries)
        parts.append(human_bytes(total))
        if survey.process_error:
            parts.append("process check failed")
        self.set_status(" · ".join(parts))

    def _apply_rows(self, new: dict[str, dict[str, SortCell]]) -> None:
        """The table's keyed diff, by each cell's text and sort key; re-sorted on a change."""
        seen = {key: tuple((cells[c.key].plain, cells[c.key].sort_key) for c in COLUMNS)
                for key, cells in new.items()}
        with self.app.batch_update():
            if self.table.update_rows(seen, lambda key, _seen: [new[key][c.key] for c in COLUMNS]):
                self._sort()

    # -- the selected row in full ------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        from engine.text import show_name

        detail = self.query_one("#scratch-detail", DetailLine)
        row = self._items.get(self.table.selected_key or "")
        if row is None:
            detail.show("")
            return
        kind, item = row
        if kind is RowKind.QUARANTINED:
            expires = "" if self.last_survey is None else time.strftime(
                "%Y-%m-%d %H:%M", time.localtime(item.expires_at(self.settings.scratch.quarantine_hours)))
            detail.show(f"quarantine/{show_name(item.file_name)} · quarantined {time.strftime('%Y-%m-%d %H:%M', time.localtime(item.quarantined_at))}"
                          f" · deleted after {expires} unless written to · u restores it to scratch/{show_name(item.name)}")
            return
        text = f"scratch/{show_name(item.name)} · {item.state}"
        if item.kept_reason:
            text += f": {show_name(item.kept_reason)}"
        if item.arrived_seconds is not None:
            text += f" · {item.age_text}"
        elif item.idle_seconds is not None:
            text += f" · idle {human_duration(item.idle_seconds)}"
        if item.size_bytes is not None:
            text += f" · {human_bytes(item.size_bytes)}"
        if item.processes:
            procs = ", ".join(f"{j.proc.pid} {show_name(j.proc.name)} ({j.role.value}"
                              f"{' ' + j.label if j.label and j.role.value == 'registered' else ''})"
                              for j in item.processes)
            text += f" · processes inside: {procs}"
        detail.show(text)

    # -- sorting -------------------------------------------------------------------------

    def _sort(self) -> None:
        table = self.table
        column, name = table.column_of(self.SORTS[self._sort_index]), table.column_of("name")
        seen = table.values  # per row, per column: (text, sort key)
        table.order(lambda key: (seen[key][column][1], seen[key][name][1]), reverse=self._sort_reverse)
        table.sync()

    @property
    def sort_column(self) -> str:
        """The column the table is sorted by (one of ``SORTS``)."""
        return self.SORTS[self._sort_index]

    def action_cycle_sort(self) -> None:
        self._sort_index = (self._sort_index + 1) % len(self.SORTS)
        self._sort_reverse = self.SORTS[self._sort_index] in ("idle", "size")  # biggest/oldest first
        self._sort()
        self.notify(f"sorted by {self.SORTS[self._sort_index]}", timeout=1.5)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        col = str(event.column_key.value)
        if col in self.SORTS:
            if self.SORTS[self._sort_index] == col:
                self._sort_reverse = not self._sort_reverse
            else:
                self._sort_index = self.SORTS.index(col)
            self._sort()

    def action_refresh(self) -> None:
        self.set_status("scanning…")
        self.refresh_entries()

    # -- prune: plan, approval, execution -------------------------------------------------

    @property
    def pruning(self) -> bool:
        """Whether an approved prune is running (its progress shown under the table)."""
        return self._pruning

    def action_preview_prune(self) -> None:
        if self._pruning:
            self.notify("a prune is already running", severity="warning")
            return
        self.set_status("planning a prune…")
        self._plan()

    @work(thread=True, exclusive=True, group="scratch-plan")
    def _plan(self) -> None:
        from engine.scratch.plan import plan_prune

        try:
            target, options = self._target_and_options()
            plan = plan_prune(target, options)
        except Exception as exc:  # a thread reports any error
            self.post_message(self.Planned(error=str(exc)))
            return
        self.post_message(self.Planned(plan, target, options))

    def on_scratch_pane_planned(self, message: Planned) -> None:
        if message.error is not None:
            self.notify(f"cannot plan a prune: {message.error}", severity="error")
            return
        self._ask(message.plan, message.target, message.options)

    def _ask(self, plan, target, options) -> None:
        from widgets.prune_modal import PruneModal

        def answered(approved: bool | None) -> None:
            if approved:
                self._pruning = True
                self._execute(plan, target, options)
            else:
                self.notify("prune cancelled: nothing was changed", timeout=2)
                self.refresh_entries()

        self.app.push_screen(PruneModal(plan), answered)

    @work(thread=True, exclusive=True, group="scratch-prune")
    def _execute(self, plan, target, options) -> None:
        from engine.scratch.execute import execute_plan

        def progress(done: int, total: int, freed: int, path: str) -> None:
            self.post_message(self.PruneProgress(done, total, freed, path))

        try:
            result = execute_plan(target, plan, options, progress)
        except Exception as exc:  # a thread reports any error
            self.post_message(self.PruneFinished(error=str(exc)))
            return
        self.post_message(self.PruneFinished(result))

    def on_scratch_pane_prune_progress(self, message: PruneProgress) -> None:
        from engine.text import show_name

        bar = self.query_one("#scratch-progress", ProgressBar)
        label = self.query_one("#scratch-progress-label", Static)
        bar.add_class("-running")
        label.add_class("-running")
        bar.update(total=max(1, message.total), progress=message.done)
        where = f" · {show_name(message.path)}" if message.path else ""
        label.update(f"pruning {message.done}/{message.total} · {human_bytes(message.freed)} freed{where}")
        self.set_status(f"pruning {message.done}/{message.total}")

    def on_scratch_pane_prune_finished(self, message: PruneFinished) -> None:
        self._pruning = False
        self.query_one("#scratch-progress", ProgressBar).remove_class("-running")
        self.query_one("#scratch-progress-label", Static).remove_class("-running")
        if message.error:
            self.notify(f"prune failed: {message.error}", severity="error", timeout=8, markup=False)
        else:
            self.notify(message.result.summary(restore_hint="u restores"), title="Prune done",
                        severity="information" if message.result.ok else "warning", timeout=8, markup=False)
        self.refresh_entries()

    # -- restore ---------------------------------------------------------------------------

    def action_restore(self) -> None:
        table = self.table
        if table.row_count == 0:
            self.notify("nothing to restore", timeout=2)
            return
        row = self._items.get(table.selected_key or "")
        if row is None or row[0] is not RowKind.QUARANTINED:
            self.notify("select a quarantined row (state 'quarantined') to restore it", timeout=3)
            return
        self._restore(row[1].file_name)

    @work(thread=True, exclusive=True, group="scratch-restore")
    def _restore(self, file_name: str) -> None:
        from engine.scratch.execute import restore
        from engine.scratch.target import PruneTarget
        from engine.text import show_name

        try:
            rec = restore(PruneTarget.of(self.home), file_name)
        except Exception as exc:  # a thread reports any error
            self.post_message(self.Restored(error=str(exc)))
            return
        self.post_message(self.Restored(show_name(rec.path)))

    def on_scratch_pane_restored(self, message: Restored) -> None:
        if message.error is not None:
            self.notify(f"cannot restore: {message.error}", severity="error", timeout=6)
            return
        self.notify(f"restored {message.name}", timeout=4)
        self.refresh_entries()

