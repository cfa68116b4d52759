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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, ProgressBar, Static
from textual.worker import get_current_worker

from engine.config import Settings
from engine.home import HomeLayout
from engine.scratch.entries import EntryState
from engine.text import human_bytes, human_duration
from widgets.common.fit_table import Col, DetailLine, FitTable
from widgets.common.pane import EmptyState, Pane

if TYPE_CHECKING:
    from engine.scratch.plan import PrunePlan
    from engine.scratch.result import PruneResult
    from engine.scratch.target import PruneOptions, PruneTarget

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


# A row's value, cheap to hold for 100,000 rows and to compare (the table's keyed diff):
#   (RowKind.ENTRY, name, state, idle_seconds, size_bytes, kept_reason, pids, arrived_seconds, newest_mtime)
#   (RowKind.QUARANTINED, file_name)
# Its cells are built only when its page is shown (FitTable.set_rows).


def _entry_value(e) -> tuple:
    return (RowKind.ENTRY, e.name, e.state, e.idle_seconds, e.size_bytes, e.kept_reason,
            ",".join(str(p) for p in e.pids), e.arrived_seconds, e.activity.newest_mtime)


def _age_text(idle: float | None, arrived: float | None) -> str:
    """The Idle column's words (EntryReport.age_text, from a row's value)."""
    if arrived is not None:
        return f"arrived {human_duration(arrived)} ago"
    return human_duration(idle) if idle is not None else "?"


def _row_cells(value, redact: bool = True) -> dict[str, SortCell]:
    """A row's cells; outside text (a name, a reason) masked (``redact``) and escaped."""
    from engine.processes.redact import shown

    if value[0] is RowKind.QUARANTINED:
        file_name = value[1]
        return {
            "name": SortCell(shown(file_name, redact), (1, file_name)),  # quarantine rows last
            "state": SortCell("quarantined", "zquarantined", QUARANTINED_STYLE),
            "idle": SortCell("-", -1.0),
            "size": SortCell("-", -1),
            "pids": SortCell("-", ""),
            "why": SortCell("u restores it", "", "dim"),
        }
    _kind, name, state, idle, size, reason, pids, arrived, _newest = value
    return {
        "name": SortCell(shown(name, redact), (0, name)),
        "state": SortCell(state, state, STATE_STYLES.get(state, "")),
        "idle": SortCell(_age_text(idle, arrived), idle if idle is not None else -1.0),
        "size": SortCell(human_bytes(size) if size is not None else "?", size if size is not None else -1),
        "pids": SortCell(pids or "-", pids),
        "why": SortCell(shown(reason or "", redact), reason or ""),
    }


def _cells(_key: str, value) -> list[SortCell]:
    cells = _row_cells(value)
    return [cells[c.key] for c in COLUMNS]


def _cells_unmasked(_key: str, value) -> list[SortCell]:
    """``_cells`` with ``processes.redact: false``."""
    cells = _row_cells(value, redact=False)
    return [cells[c.key] for c in COLUMNS]


def _sort_value(column: str):
    """The sort key of a row's value for ``column`` (rows of equal keys keep name order)."""
    if column == "name":
        return lambda v: (0 if v[0] is RowKind.ENTRY else 1, v[1])
    if column == "state":
        return lambda v: v[2] if v[0] is RowKind.ENTRY else "zquarantined"
    at = 3 if column == "idle" else 4
    return lambda v: (v[at] if v[at] is not None else -1) if v[0] is RowKind.ENTRY else -1


def sorted_keys(values: dict, base: list[str], column: str, reverse: bool) -> list[str]:
    """``base`` (the keys in name order) sorted by ``column``; ties stay in name order."""
    if column == "name":
        return base[::-1] if reverse else list(base)
    key = _sort_value(column)
    return sorted(base, key=lambda k: key(values[k]), reverse=reverse)


@dataclass(frozen=True)
class Listing:
    """What one survey gave the pane, besides its rows: the counts its status shows."""

    now: float
    entries: int
    counts: dict[str, int]
    total_bytes: int
    quarantine: tuple
    process_error: str | None
    complete: bool  # False: the first entries of a survey still walking


@dataclass(frozen=True)
class Rows:
    """A survey's rows, made in the survey thread: ``values`` (key -> value), ``base``
    (the keys in name order), ``order`` (sorted as ``sort`` = (column, reverse) says),
    the ``processes`` inside entries by name, and the quarantined entries by key."""

    values: dict
    base: list
    order: list
    sort: tuple
    processes: dict
    quarantined: dict


# Re-survey on its own no more often than this many times the last survey's duration
# (and never more often than MIN_REFRESH_SECONDS): the automatic surveys of a folder of
# 100,000 entries cost at most about 1% of a core.
SURVEY_COST_FACTOR = 100.0
SORT_IN_THREAD = 5000  # rows above which the table is sorted in a thread
# While the first survey walks, its first rows are shown after this long.
FIRST_ROWS_SECONDS = 0.5


class SurveyProgress(ProgressBar):
    """Textual's progress bar without its clock: that one wakes every second for as long
    as the bar is mounted, shown or not, to work out an ETA. This bar shows none; it
    changes only when a prune reports its progress."""

    def on_mount(self, event) -> None:
        event.prevent_default()  # ProgressBar.on_mount would start the 1 s interval
        self.update()


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

    @dataclass
    class Surveyed(Message, bubble=False):
        """Posted by the survey thread to the pane itself, with a survey or an error. A
        survey still waiting is moot once a newer one has been taken (each is the whole
        folder, or the first part of it)."""

        survey: Listing | None = None
        """The counts of the scratch folder and its quarantine (None with ``error``)."""
        error: str | None = None
        """Why the survey could not be taken."""
        rows: Rows | None = None
        """The table's rows of the survey."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, ScratchPane.Surveyed) and message.error is None

    @dataclass
    class Sorted(Message, bubble=False):
        """Posted by the sorting thread."""

        rows: Rows
        """The rows that were sorted (the order lands only if the pane still holds them)."""
        sort: tuple
        """(column, reverse) the order follows."""
        order: list[str]
        """The rows' keys in that order."""

    @dataclass
    class PruneProgress(Message, bubble=False):
        """Posted by the prune thread after each entry. Only the newest one waiting is shown."""

        done: int
        """Entries handled so far."""
        total: int
        """Entries the pass handles in all."""
        freed: int
        """Bytes freed so far."""
        path: str
        """The entry just handled."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, ScratchPane.PruneProgress)

    @dataclass
    class PruneFinished(Message, bubble=False):
        """Posted by the prune thread when the pass has ended."""

        result: PruneResult | None = None
        """What the pass did (None with ``error``)."""
        error: str | None = None
        """Why the pass could not run to its end."""

    @dataclass
    class Planned(Message, bubble=False):
        """Posted by the planning thread: a prune's plan, which the pane asks the user to
        approve, or why it could not be made."""

        plan: PrunePlan | None = None
        """What the pass would do (None with ``error``)."""
        target: PruneTarget | None = None
        """The scratch folder the plan was made for."""
        options: PruneOptions | None = None
        """The settings the plan was made with."""
        error: str | None = None
        """Why no plan could be made."""

    @dataclass
    class Restored(Message, bubble=False):
        """Posted by the restore thread."""

        name: str = ""
        """The name the entry got back in scratch."""
        error: str | None = None
        """Why it could not be restored."""

    def __init__(self, *, home: HomeLayout, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.settings = settings
        self._rows: Rows | None = None  # the rows shown
        self._sort_index = 0  # into SORTS
        self._sort_reverse = False
        self._pruning = False
        self.last_survey: Listing | None = None  # the last complete survey's counts
        self._sizes = None  # engine.scratch.entries.SizeCache, made in the worker
        self._survey_lock = threading.Lock()  # a superseded survey thread may still be running
        self._survey_started = 0.0  # time.monotonic() of the newest survey asked for
        self._next_survey_at = 0.0  # no survey on its own before this (time.monotonic())

    SORTS = ("name", "state", "idle", "size")

    def compose(self) -> ComposeResult:
        yield FitTable(COLUMNS, id="scratch-table", zebra_stripes=True)
        yield DetailLine(id="scratch-detail")
        yield Static(id="scratch-progress-label", markup=False)
        # A total from the start: a bar without one is indeterminate, and animates on a
        # 15-a-second timer for as long as it exists, hidden or not.
        yield SurveyProgress(id="scratch-progress", total=1, show_eta=False)
        yield EmptyState("No scratch entries yet. Commands spawned here get <home>/cache/scratch as TMPDIR; "
                         "an entry idle for scratch.idle_hours can be pruned with p.")

    def on_mount(self) -> None:
        self.set_status("scanning…")
        self.refresh_entries()
        self.set_interval(self._every, self._on_timer)

    @property
    def _every(self) -> float:
        return max(MIN_REFRESH_SECONDS, self.settings.ui.refresh_seconds)

    def _on_timer(self) -> None:
        """The timer's survey: only when the pane is shown, and no sooner than the last
        survey's cost allows (see SURVEY_COST_FACTOR)."""
        if self.shown and time.monotonic() >= self._next_survey_at:
            self.refresh_entries()

    def on_show(self, event: events.Show) -> None:
        self._on_timer()  # shown again: catch up if a survey was skipped while hidden

    @property
    def table(self) -> FitTable:
        return self.query_one("#scratch-table", FitTable)

    # -- the survey (worker thread) ------------------------------------------------------

    def _target_and_options(self):
        from engine.scratch.target import PruneOptions, PruneTarget

        return PruneTarget.of(self.home), PruneOptions.from_settings(self.home, self.settings)

    def refresh_entries(self) -> None:
        if not self._pruning:
            self._survey_started = time.monotonic()
            self._next_survey_at = self._survey_started + self._every  # none on its own while this one runs
            self._survey(self.SORTS[self._sort_index], self._sort_reverse, self._rows is None)

    @work(thread=True, exclusive=True, group="scratch-survey", description="survey the entries")
    def _survey(self, column: str, reverse: bool, first: bool) -> None:
        """The thread: stream the survey into rows (one value per entry, never the
        reports), sorted as the pane sorts; the first survey shows its first rows early.
        Cancelled (the app quits, a newer survey), its walks stop at once and it posts nothing."""
        from engine.scratch.entries import SizeCache, stream_survey

        worker = get_current_worker()
        stop = worker.cancelled_event
        try:
            target, options = self._target_and_options()
            with self._survey_lock:
                if self._sizes is None:
                    self._sizes = SizeCache()
                stream = stream_survey(target, options, with_sizes=True, size_cache=self._sizes, stop=stop)
                values: dict[str, tuple] = {}
                processes: dict[str, tuple] = {}
                counts: dict[str, int] = {}
                total = 0
                early = time.monotonic() + FIRST_ROWS_SECONDS if first else None
                for e in stream.entries:
                    if stop.is_set():
                        return
                    values["e:" + e.name] = _entry_value(e)
                    counts[e.state] = counts.get(e.state, 0) + 1
                    total += e.size_bytes or 0
                    if e.processes:
                        processes[e.name] = e.processes
                    if early is not None and time.monotonic() >= early and len(values) < stream.count:
                        early = None  # once: the rows so far, while the walks go on
                        part = dict(values)
                        listing = Listing(stream.now, len(part), dict(counts), total, (), stream.process_error,
                                          complete=False)
                        self.post_message(self.Surveyed(listing, rows=self._make_rows(part, {}, {}, column,
                                                                                      reverse)))
                quarantined = {f"q:{q.file_name}": q for q in stream.quarantine}
                for key, q in quarantined.items():
                    values[key] = (RowKind.QUARANTINED, q.file_name)
        except Exception as exc:  # a thread reports any error: the pane says it in its status
            self.post_message(self.Surveyed(error=f"{type(exc).__name__}: {exc}"))
            return
        if stop.is_set():
            return
        listing = Listing(stream.now, stream.count, counts, total, stream.quarantine, stream.process_error,
                          complete=True)
        self.post_message(self.Surveyed(listing, rows=self._make_rows(values, processes, quarantined, column,
                                                                      reverse)))

    @staticmethod
    def _make_rows(values: dict, processes: dict, quarantined: dict, column: str, reverse: bool) -> Rows:
        base = list(values)  # entries in name order (the survey's), quarantined ones after
        return Rows(values, base, sorted_keys(values, base, column, reverse), (column, reverse), processes,
                    quarantined)

    def idle_entries(self) -> tuple[tuple[str, float, int | None, float], ...]:
        """(name, idle seconds, size, newest mtime) of the entries the last complete survey
        found idle (what the next pass takes): read from the rows the pane holds, no I/O."""
        if self.last_survey is None or self._rows is None:
            return ()
        return tuple((v[1], v[3], v[4], v[8]) for v in self._rows.values.values()
                     if v[0] is RowKind.ENTRY and v[2] == EntryState.IDLE and v[3] is not None
                     and v[8] is not None)

    def on_scratch_pane_surveyed(self, message: Surveyed) -> None:
        if message.error:
            self.set_status(f"cannot read: {message.error}")
            return
        survey, rows = message.survey, message.rows
        if not survey.complete and self._rows is not None:
            return  # the first rows of a survey, but the table already shows a whole one
        if survey.complete:
            self.last_survey = survey
            took = time.monotonic() - self._survey_started
            self._next_survey_at = time.monotonic() + max(self._every, SURVEY_COST_FACTOR * took)
        self._rows = rows
        table = self.table
        with self.app.batch_update():
            table.set_rows(rows.values, _cells if self._redact else _cells_unmasked, rows.order)
            if rows.sort != (self.sort_column, self._sort_reverse):
                self._sort()  # the sort changed while the survey ran
            table.sync()
        self._show_detail()
        self.set_class(not rows.values, "-empty")
        parts = [f"{survey.entries} entries" if survey.complete else f"scanning… {survey.entries} entries so far"]
        parts += [f"{survey.counts[s]} {s}" for s in (EntryState.IDLE, EntryState.KEPT, EntryState.UNKNOWN)
                  if survey.counts.get(s)]
        if survey.quarantine:
            parts.append(f"{len(survey.quarantine)} quarantined")
        parts.append(human_bytes(survey.total_bytes))
        if survey.process_error:
            parts.append("process check failed")
        self.set_status(" · ".join(parts))

    # -- the selected row in full ------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @property
    def _redact(self) -> bool:
        """Mask secrets in outside text (names, reasons, paths), as outputs are."""
        return self.settings.processes.redact

    def _shown(self, text: str) -> str:
        from engine.processes.redact import shown

        return shown(text, self._redact)

    def _show_detail(self) -> None:
        shown = self._shown
        detail = self.query_one("#scratch-detail", DetailLine)
        key = self.table.selected_key or ""
        rows = self._rows
        value = rows.values.get(key) if rows is not None else None
        page = self.table.page_text()
        where = f" · {page}" if page else ""
        if value is None:
            detail.show(page)
            return
        if value[0] is RowKind.QUARANTINED:
            item = rows.quarantined.get(key)
            if item is None:
                detail.show(f"quarantine/{shown(value[1])}{where}")
                return
            expires = time.strftime("%Y-%m-%d %H:%M",
                                    time.localtime(item.expires_at(self.settings.scratch.quarantine_hours)))
            detail.show(f"quarantine/{shown(item.file_name)} · quarantined {time.strftime('%Y-%m-%d %H:%M', time.localtime(item.quarantined_at))}"
                          f" · deleted after {expires} unless written to · u restores it to scratch/{shown(item.name)}"
                          f"{where}")
            return
        _kind, name, state, idle, size, reason, _pids, arrived, _newest = value
        text = f"scratch/{shown(name)} · {state}"
        if reason:
            text += f": {shown(reason)}"
        if arrived is not None:
            text += f" · {_age_text(idle, arrived)}"
        elif idle is not None:
            text += f" · idle {human_duration(idle)}"
        if size is not None:
            text += f" · {human_bytes(size)}"
        processes = rows.processes.get(name, ())
        if processes:
            procs = ", ".join(f"{j.proc.pid} {shown(j.proc.name)} ({j.role.value}"
                              f"{' ' + j.label if j.label and j.role.value == 'registered' else ''})"
                              for j in processes)
            text += f" · processes inside: {procs}"
        detail.show(text + where)

    # -- sorting -------------------------------------------------------------------------

    def _sort(self) -> None:
        """Order the table by the current sort: a long one in a thread (100,000 keys
        take a tenth of a second or more to sort, which the UI must not wait for)."""
        rows = self._rows
        if rows is None:
            return
        if len(rows.base) > SORT_IN_THREAD:
            self._sort_in_thread(rows, self.sort_column, self._sort_reverse)
            return
        self._show_order(sorted_keys(rows.values, rows.base, self.sort_column, self._sort_reverse))

    def _show_order(self, order: list[str]) -> None:
        table = self.table
        table.set_order(order)
        table.sync()

    @work(thread=True, exclusive=True, group="scratch-sort", description="sort the rows")
    def _sort_in_thread(self, rows: Rows, column: str, reverse: bool) -> None:
        order = sorted_keys(rows.values, rows.base, column, reverse)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Sorted(rows, (column, reverse), order))

    def on_scratch_pane_sorted(self, message: Sorted) -> None:
        """A thread's order lands only if the rows and the sort are still the ones it sorted."""
        if message.rows is self._rows and message.sort == (self.sort_column, self._sort_reverse):
            self._show_order(message.order)

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

        stop = get_current_worker().cancelled_event  # the app quits: the walks stop, nothing is asked
        try:
            target, options = self._target_and_options()
            plan = plan_prune(target, options, stop=stop)
        except Exception as exc:  # a thread reports any error
            self.post_message(self.Planned(error=str(exc)))
            return
        if not stop.is_set():
            self.post_message(self.Planned(plan, target, options))

    def on_scratch_pane_planned(self, message: Planned) -> None:
        if message.error is not None:
            self.notify(f"cannot plan a prune: {self._shown(message.error)}", severity="error", markup=False)
            return
        self._ask(message.plan, message.target, message.options)

    def _ask(self, plan, target, options) -> None:
        from widgets.scratch.prune_modal import PruneModal

        def answered(approved: bool | None) -> None:
            if approved:
                self._pruning = True
                self._execute(plan, target, options)
            else:
                self.notify("prune cancelled: nothing was changed", timeout=2)
                self.refresh_entries()

        self.app.push_screen(PruneModal(plan, redact=self._redact), answered)

    @work(thread=True, exclusive=True, group="scratch-prune", description="the approved prune")
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
        shown = self._shown
        bar = self.query_one("#scratch-progress", SurveyProgress)
        label = self.query_one("#scratch-progress-label", Static)
        bar.add_class("-running")
        label.add_class("-running")
        bar.update(total=max(1, message.total), progress=message.done)
        where = f" · {shown(message.path)}" if message.path else ""
        label.update(f"pruning {message.done}/{message.total} · {human_bytes(message.freed)} freed{where}")
        self.set_status(f"pruning {message.done}/{message.total}")

    def on_scratch_pane_prune_finished(self, message: PruneFinished) -> None:
        self._pruning = False
        self.query_one("#scratch-progress", SurveyProgress).remove_class("-running")
        self.query_one("#scratch-progress-label", Static).remove_class("-running")
        if message.error:
            self.notify(f"prune failed: {self._shown(message.error)}", severity="error", timeout=8, markup=False)
        else:
            self.notify(message.result.summary(restore_hint="u restores"), title="Prune done",
                        severity="information" if message.result.ok else "warning", timeout=8, markup=False)
        self.refresh_entries()

    # -- restore ---------------------------------------------------------------------------

    def action_restore(self) -> None:
        table = self.table
        if table.row_total == 0:
            self.notify("nothing to restore", timeout=2)
            return
        value = self._rows.values.get(table.selected_key or "") if self._rows is not None else None
        if value is None or value[0] is not RowKind.QUARANTINED:
            self.notify("select a quarantined row (state 'quarantined') to restore it", timeout=3)
            return
        self._restore(value[1])

    @work(thread=True, exclusive=True, group="scratch-restore", description="restore an entry")
    def _restore(self, file_name: str) -> None:
        from engine.scratch.execute import restore
        from engine.scratch.target import PruneTarget

        try:
            rec = restore(PruneTarget.of(self.home), file_name)
        except Exception as exc:  # a thread reports any error
            self.post_message(self.Restored(error=self._shown(str(exc))))
            return
        self.post_message(self.Restored(self._shown(rec.path)))

    def on_scratch_pane_restored(self, message: Restored) -> None:
        if message.error is not None:
            self.notify(f"cannot restore: {message.error}", severity="error", timeout=6, markup=False)
            return
        self.notify(f"restored {message.name}", timeout=4, markup=False)
        self.refresh_entries()

