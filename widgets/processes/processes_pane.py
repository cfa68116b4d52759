"""The background processes pane: the sessions table, the selected session's output,
and the notifications list; plus foreground runs from the command bar.

All process work is an engine call (``engine.processes``), made in a worker thread:
the table is refreshed by keyed diff from one sample of our own sessions per tick,
the output view follows its file by byte offset, and notifications come from the
engine's :class:`NotificationCenter`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import DataTable

from engine.config import Settings
from engine.home import HomeError, HomeLayout
from engine.processes import ProcessLookupFailed, ProcessRegistry, ProcessSession, SpawnFailed
from engine.processes.notify import NotificationCenter, ProcessEvent
from engine.processes.redact import maybe_redact
from engine.processes.session import KillOutcome, SessionSource, SessionStatus
from engine.processes.tree import describe
from engine.text import coarse_duration, escape_text, human_bytes
from widgets.common.confirm import ConfirmModal
from widgets.common.fit_table import Col, DetailLine, FitTable
from widgets.common.pane import EmptyState, Pane
from widgets.processes.notification_list import NotificationList
from widgets.processes.output_view import OutputView
from widgets.processes.toast_groups import ToastGrouper

if TYPE_CHECKING:
    from pathlib import Path

    from engine.processes.sampler import SessionSampler, Usage

# The table's columns, in order. COMMAND takes what the others leave and never drops
# below 24 cells: when the pane is narrow, the columns with the highest hide_rank go first.
COLUMNS = (
    Col("id", "ID"),
    Col("status", "STATUS"),
    Col("pid", "PID", hide_rank=3),
    Col("runtime", "RUNTIME", hide_rank=2),
    Col("cpu", "CPU%", hide_rank=5),
    Col("rss", "RSS", hide_rank=6),
    Col("command", "COMMAND", flex=True, min_width=24),
    Col("owner", "OWNER", hide_rank=4),
)
STATUS_COLUMN = 1
STATUS_STYLES = {SessionStatus.RUNNING: "green", SessionStatus.KILLED: "yellow", SessionStatus.LOST: "magenta"}
FOREGROUND_CHECK_SECONDS = 0.2
NOTIFICATIONS_KEPT = 200
STUCK_REFRESH_SECONDS = 30.0
# The timer samples no sooner than this many times the last sample's cost after it: with
# 1,000 sessions the listing is read less often than every second, a small home's is not.
# The cost is the sampling thread's own CPU time, not its wall time: on a loaded machine
# the wall time is mostly waiting for a core, and a gap grown from it (20 x 3 s) left the
# table a minute behind. Never more than MAX_SAMPLE_GAP_SECONDS between samples.
SAMPLE_COST_FACTOR = 20.0
MAX_SAMPLE_GAP_SECONDS = 5.0
# The first sample comes before any row is laid out: it reads the usage of the newest
# running sessions only (they are the rows shown first), not of every one.
FIRST_USAGE_ROWS = 100
NO_OUTPUT_NOTE = "output not available: hermes-agent keeps no output of its sessions that hermes-tui can read"


@dataclass(frozen=True)
class Snapshot:
    """One refresh worth of data, built in a thread and applied on the UI thread.

    ``rows`` holds each session's cells as plain strings (cheap to compare), and
    ``styles`` the status cell's style; Rich objects are made only for changed cells.
    """

    sessions: tuple[ProcessSession, ...]
    rows: dict[str, tuple[str, ...]]
    styles: dict[str, str]
    events: tuple[ProcessEvent, ...]
    taken_at: float
    took: float = 0.0  # CPU seconds the thread spent taking it
    stored: dict[str, int] = field(default_factory=dict)  # bytes of output on disk, by session
    sessions_key: tuple = ()  # each session's id, status and exit code: equal, nothing to look at again


def status_style(s: ProcessSession) -> str:
    if s.status == SessionStatus.EXITED:  # == : a status read back from the finished index is plain text
        return "red" if s.exit_code else "dim"
    return STATUS_STYLES.get(s.status, "")


def runtime_key(s: ProcessSession, now: float) -> tuple[bool, int] | None:
    """What the RUNTIME cell shows of ``s`` at ``now``, as a cheap value: equal keys,
    equal cells (seconds in the first minute, whole minutes after it)."""
    seconds = s.runtime(now)
    if seconds is None:
        return None
    return (True, int(seconds)) if seconds < 60 else (False, int(seconds // 60))


def row_cells(s: ProcessSession, usage: Usage | None, now: float, command: str) -> tuple[str, ...]:
    """The table cells of a session, in COLUMNS order (``command`` already masked)."""
    status = s.status_text()
    if s.restart != "no":
        from engine.processes.restart import restart_summary

        status = f"{status} · {restart_summary(s, time.time())}"
    return (
        s.name or s.short_id,
        status,
        str(s.pid),
        coarse_duration(s.runtime(now)),  # minutes past the first: a row does not change every second
        f"{usage.cpu_percent:.0f}" if usage else "",
        human_bytes(usage.rss) if usage else "",
        command,
        s.owner,
    )


def _stored_size(s: ProcessSession) -> int | None:
    """The session's output on disk, in bytes (a stat; thread side), None when unreadable."""
    from engine.processes.output_bound import stored_bytes

    try:
        return stored_bytes(os.stat(s.output_path))
    except OSError:
        return None


def shown_command(s: ProcessSession, redact: bool) -> str:
    """The command on one line, masked, its control characters shown as escapes (in full:
    the table cuts it to its column, the detail line shows all of it)."""
    return escape_text(maybe_redact(" ".join(s.command.split()), redact), keep_lines=True)


class ProcessesPane(Pane):
    PANE_ID = "processes"
    TITLE = "Processes"
    NUMBER = 2

    BINDINGS = [
        Binding("k", "kill", "Kill", id="processes.kill"),
        Binding("f", "toggle_follow", "Follow", id="processes.follow"),
        Binding("w", "toggle_wrap", "Wrap", id="processes.wrap"),
        Binding("slash", "search", "Search", id="processes.search"),
        Binding("n", "next_match", "Next match", show=False, id="processes.next_match"),
        Binding("N", "previous_match", "Previous match", show=False, id="processes.previous_match"),
        Binding("c", "copy_output", "Copy", show=False, id="processes.copy"),
        Binding("e", "open_in_editor", "Editor", show=False, id="processes.editor"),
        Binding("a", "toggle_finished", "All/running", id="processes.toggle_finished"),
        Binding("r", "restart", "Restart", show=False, id="processes.restart"),
    ]

    DEFAULT_CSS = """
    ProcessesPane > #proc-table { height: 2fr; min-height: 5; }
    ProcessesPane > #proc-detail { max-height: 3; }
    ProcessesPane > OutputView { height: 3fr; }
    ProcessesPane > #proc-notifications { height: 4; display: none; border-top: solid $panel-lighten-2; }
    ProcessesPane.-has-notifications > #proc-notifications { display: block; }
    ProcessesPane > .empty-state { height: auto; }
    ProcessesPane.-has-rows > .empty-state { display: none; }
    """

    @dataclass
    class ForegroundChanged(Message):
        """Posted by the pane when what runs in the foreground changes. The app shows it
        in the command bar."""

        command: str | None
        """The run that started, or None once it moved to the background or ended."""
        detail: str = ""
        """With None: how the last one ended."""

    @dataclass
    class Sampled(Message, bubble=False):
        """Posted by the sampling thread to the pane itself. Not replaceable: a snapshot
        carries notifications that must all be shown."""

        snapshot: Snapshot | None = None
        """One refresh's sessions and rows (None with ``error``)."""
        error: str = ""
        """Why the sessions could not be read (the last table stays)."""

    class SizeRead(Message, bubble=False):
        """Posted by the thread that read a selected session's output size on disk."""

        def __init__(self, session_id: str, size: int) -> None:
            super().__init__()
            self.session_id = session_id
            self.size = size

    class ForegroundEnded(Message, bubble=False):
        """Posted by the thread that reads a finished foreground run back: ``session`` as
        it ended (its exit recorded). The pane then lets go of it."""

        def __init__(self, session: ProcessSession) -> None:
            super().__init__()
            self.session = session

    class KillReported(Message, bubble=False):
        """Posted by the kill thread to the pane itself: the outcome in one line and its
        severity for the notification; the pane then refreshes the table."""

        def __init__(self, text: str, severity: str) -> None:
            super().__init__()
            self.text = text
            self.severity = severity

    def __init__(self, *, home: HomeLayout, settings: Settings, clock=time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.settings = settings
        self.clock = clock
        self.registry = ProcessRegistry(home, settings)
        # Made when a session first runs: a home with nothing running
        # never pays for it, and a new sampler with nothing to sample has nothing cached.
        self.sampler: SessionSampler | None = None
        self.center = NotificationCenter(self.registry, redact=settings.processes.redact)
        self.redact = settings.processes.redact
        self.show_finished = True
        self.foreground: ProcessSession | None = None
        self.sessions: dict[str, ProcessSession] = {}
        self.notifications: list[ProcessEvent] = []
        self._commands: dict[str, str] = {}  # session id -> masked, shortened command
        self._row_memo: dict[str, tuple] = {}  # session id -> (what its cells show, cells, style); thread side
        self._sessions_key: tuple = ()
        self.sessions_version = 0  # goes up when a session came, went, or changed status
        self._stored: dict[str, int] = {}  # session id -> bytes of output on disk (the last snapshot's)
        self._sorted_once = False
        self._wanted_selection: str | None = None  # show_session() of a row not in the table yet
        self._refreshing = False
        self._refresh_started = 0.0
        self._next_sample_at = 0.0  # the timer's next sample no sooner (time.monotonic())
        self._asked_key: tuple | None = None  # registry.change_key() when the sample in flight was asked
        self._quiet_key: tuple | None = None  # the key of the last sample if nothing was running then
        self.refresh_count = 0  # refreshes applied, or found to have nothing to change
        self._toasts = ToastGrouper()

    def compose(self) -> ComposeResult:
        yield EmptyState(
            "No process sessions yet. Type a command in the bar below and press Enter, "
            "or start one with: hermes-tui run --bg -- CMD"
        )
        yield FitTable(COLUMNS, id="proc-table", zebra_stripes=False)
        yield DetailLine(id="proc-detail")
        yield OutputView(max_lines=self.settings.ui.output_max_lines, tail_chars=self.settings.processes.tail_bytes,
                         redact=self.redact)
        # Wrapped, never cut: a watch match or a completion is read in full where it lands.
        yield NotificationList(id="proc-notifications", max_events=NOTIFICATIONS_KEPT, min_width=20)

    @property
    def table(self) -> FitTable:
        return self.query_one("#proc-table", FitTable)

    @property
    def _rows(self) -> dict[str, tuple[str, ...]]:
        """The sessions in the table, by id: their cells as plain text (the table's values)."""
        return self.table.values

    @property
    def output(self) -> OutputView:
        return self.query_one(OutputView)

    @property
    def focus_target(self):
        return self.table

    def on_mount(self) -> None:
        self.set_status("idle")
        self.refresh_sessions()
        self.set_interval(self.settings.ui.refresh_seconds, self._on_timer)
        # Checked only while a foreground command runs: an idle app has no reason to wake.
        self._foreground_timer = self.set_interval(FOREGROUND_CHECK_SECONDS, self._check_foreground, pause=True)

    async def on_unmount(self) -> None:
        # Awaited in a thread: the UI thread does no file work, and Textual waits for this
        # handler before the app's shutdown goes on, so it is done when the app has exited.
        fg, self.foreground = self.foreground, None
        await asyncio.to_thread(self._let_go, fg)

    def _let_go(self, fg: ProcessSession | None) -> None:
        """Thread side of closing the pane. Quitting never stops a command: a foreground
        run becomes a background session (notify-on-complete), exactly as if ctrl+b had
        been pressed. Then the watch state of every followed session is saved."""
        if fg is not None:
            try:
                self.registry.move_to_background(fg.id)
            except (ProcessLookupFailed, OSError):
                pass
        self.center.close()

    # -- refresh ------------------------------------------------------------------------

    def _on_timer(self) -> None:
        """The timer's sample: skipped while nothing runs and no session folder (nor
        hermes-agent's list) changed since the last one, and no sooner than its cost allows."""
        if time.monotonic() < self._next_sample_at:
            return
        if self._quiet_key is not None and self.foreground is None and self.registry.change_key() == self._quiet_key:
            self.refresh_count += 1  # a refresh that found nothing changed
            return
        self.refresh_sessions()

    def _usage_wanted(self) -> frozenset[str]:
        """The sessions whose CPU and memory are worth reading: the rows on screen and a
        screenful either side (a scroll shows them at once), and the one selected; none
        while the pane is not shown. Not the whole page: it holds 200 rows, and reading
        each one's processes every second was most of the pane's idle cost."""
        if not self.shown:
            return frozenset()
        table = self.table
        wanted = set(table.keys_in_view(margin=table.scrollable_content_region.height))
        if table.selected_key:
            wanted.add(table.selected_key)
        return frozenset(wanted)

    def refresh_sessions(self) -> None:
        now = time.monotonic()
        if self._refreshing and now - self._refresh_started < STUCK_REFRESH_SECONDS:
            return  # the previous sample is still being taken: skip a tick, never pile up
        self._refreshing = True
        self._refresh_started = now
        self._asked_key = self.registry.change_key()
        self._sample(self._usage_wanted() if self.table.row_total else None, self._size_wanted())

    def _size_wanted(self) -> str | None:
        """The session whose output size on disk is worth reading: the selected one (its
        detail line is the only place the size shows), none while the pane is not shown."""
        return self.table.selected_key if self.shown and self._rows else None

    @work(thread=True, exclusive=True, group="processes-sample", description="sample the sessions")
    def _sample(self, usage_of: frozenset[str] | None = None, size_of: str | None = None) -> None:
        try:
            snap = self.take_snapshot(usage_of, size_of)
        except Exception as exc:  # any error of the thread is reported: an unreadable processes dir, ...
            self.post_message(self.Sampled(error=str(exc)))
            return
        self.post_message(self.Sampled(snap))  # refused (False) once the pane is closing: nothing to update

    def on_processes_pane_sampled(self, message: Sampled) -> None:
        if message.snapshot is None:
            self._sample_failed(message.error)
        else:
            self.apply_snapshot(message.snapshot)

    def take_snapshot(self, usage_of: frozenset[str] | None = None, size_of: str | None = None) -> Snapshot:
        """Everything one refresh needs (thread side): sessions, usage, cells, events.
        ``usage_of``: the sessions whose usage is read (None: every running one);
        ``size_of``: the session whose output size is read (the others keep theirs)."""
        started = time.thread_time()
        sessions = list(self.registry.list_with_hermes(include_finished=True).sessions)  # hermes-agent's too
        running = [s for s in sessions if s.running]
        if self.sampler is None and running:
            from engine.processes.sampler import SessionSampler

            self.sampler = SessionSampler()
        if usage_of is not None:
            running = [s for s in running if s.id in usage_of]
        elif len(running) > FIRST_USAGE_ROWS:  # no row laid out yet: the newest, shown first
            running = sorted(running, key=lambda s: s.started_at)[-FIRST_USAGE_ROWS:]
        usage = self.sampler.sample(running) if self.sampler is not None else {}
        events = self.center.poll([s for s in sessions if s.output_available])  # ours: hermes's are read-only
        now = self.clock()
        rows: dict[str, tuple[str, ...]] = {}
        styles: dict[str, str] = {}
        commands = self._commands
        # A session the listing gives back as the same object (nothing of it changed),
        # with the same usage and the same shown runtime, keeps the cells made last time:
        # with 1,000 sessions, making every row's cells was most of a sample.
        memo, made = self._row_memo, {}
        for s in sessions:
            use = usage.get(s.id)
            key = (s, (use.cpu_percent, use.rss) if use is not None else None, runtime_key(s, now))
            held = memo.get(s.id)
            if held is not None and held[0] == key and s.restart == "no":  # a restart's status counts down
                cells, style = held[1], held[2]
            else:
                command = commands.get(s.id)
                if command is None:
                    command = commands[s.id] = shown_command(s, self.redact)
                cells, style = row_cells(s, use, now, command), status_style(s)
            made[s.id] = (key, cells, style)
            rows[s.id] = cells
            styles[s.id] = style
        self._row_memo = made
        sessions_key = tuple((s.id, s.status, s.exit_code) for s in sessions)
        return Snapshot(tuple(sessions), rows, styles, tuple(events), now, time.thread_time() - started,
                        self._stored_sizes(sessions, size_of), sessions_key)

    def _stored_sizes(self, sessions: list[ProcessSession], size_of: str | None) -> dict[str, int]:
        """Output sizes on disk (thread side): one stat, of the shown session (a running
        one's grows, a finished one's is taken once); the others keep the size last read."""
        known = self._stored
        out = {s.id: known[s.id] for s in sessions if s.id in known and s.output_available}
        shown = next((s for s in sessions if s.id == size_of), None)
        if shown is not None and shown.output_available and (shown.running or shown.id not in known):
            size = _stored_size(shown)
            if size is not None:
                out[shown.id] = size
        return out

    @work(thread=True, group="processes-size", description="read an output's size")
    def _read_size(self, session: ProcessSession) -> None:
        """A row selected whose output size was never read: read it now (thread side)."""
        size = _stored_size(session)
        if size is not None:
            self.post_message(self.SizeRead(session.id, size))

    def on_processes_pane_size_read(self, message: SizeRead) -> None:
        self._stored = {**self._stored, message.session_id: message.size}
        self._show_detail()

    def _sample_failed(self, why: str) -> None:
        self._refreshing = False
        self.set_status(f"cannot read sessions: {why}")

    def apply_snapshot(self, snap: Snapshot) -> None:
        """The UI side: keyed diff of the table (update_cell only where a value changed,
        add_row for new sessions, remove_row for gone ones), status, events."""
        self._refreshing = False
        if not self.is_attached:
            return  # unmounted while the sample was being taken
        try:
            self._apply_snapshot(snap)
        except NoMatches:  # the app is tearing the pane down while the sample arrived
            pass

    def _apply_snapshot(self, snap: Snapshot) -> None:
        self.refresh_count += 1
        listed = {x.id for x in snap.sessions}  # a size read while the sample ran is kept
        self._stored = {k: v for k, v in {**self._stored, **snap.stored}.items() if k in listed}
        self._next_sample_at = time.monotonic() + min(MAX_SAMPLE_GAP_SECONDS, SAMPLE_COST_FACTOR * snap.took)
        self.sessions = {s.id: s for s in snap.sessions}
        if snap.sessions_key != self._sessions_key:
            self._sessions_key = snap.sessions_key
            self.sessions_version += 1
        fg = self.foreground.id if self.foreground is not None else None
        wanted = {
            s.id: snap.rows[s.id]
            for s in snap.sessions
            if s.id != fg and (self.show_finished or s.running)
        }
        table = self.table
        with self.app.batch_update():
            changes = table.update_rows(wanted, lambda key, cells: self._cells(cells, snap.styles[key]))
            reorder = bool(changes.added) or any(
                (old[STATUS_COLUMN] == SessionStatus.RUNNING) != (wanted[key][STATUS_COLUMN] == SessionStatus.RUNNING)
                for key, old in changes.changed.items())
            if reorder and len(self._rows) > 1:
                self._sort(snap)
            else:
                table.sync()
        self.set_class(bool(self._rows), "-has-rows")
        running = sum(1 for s in snap.sessions if s.running)
        self._quiet_key = self._asked_key if not running else None
        self.set_status(f"{running} running" if running else "idle")
        if self.output.session_id is None and self._rows:
            selected = self.selected
            self._show_row(selected.id if selected is not None else next(iter(self._rows)))
        shown = self.sessions.get(self.output.session_id or "")
        if (shown is not None and shown.id != fg and not shown.running
                and self.output.state != self._state_of(shown)):
            self.output.set_state(self._state_of(shown))  # it ended, or was lost, while shown
        for event in snap.events:
            self._deliver(event)
        self._toast(snap.events, snap.taken_at)
        if self._wanted_selection is not None and self._wanted_selection in self._rows:
            self._select(self._wanted_selection)
        self._show_detail()

    def _sort(self, snap: Snapshot) -> None:
        """Running sessions first, newest first; only when a row came or a status flipped.
        The cursor stays on the session it was on (the view does not jump)."""
        order = {s.id: (not s.running, -s.started_at, s.id) for s in snap.sessions}
        table = self.table
        selected = self.selected if self._sorted_once else None  # at first, start at the top
        if self._wanted_selection in self._rows:  # a row asked for goes first (no detour)
            selected = self.sessions.get(self._wanted_selection, selected)
        self._sorted_once = True
        table.order(lambda key: order.get(key, (True, 0.0, key)))
        table.sync()
        if selected is not None and selected.id in self._rows:
            table.select_key(selected.id)
        else:
            table.move_cursor(row=0, animate=False)
            top = self.selected
            if top is not None and self.foreground is None:
                self._show_row(top.id)

    @classmethod
    def _cells(cls, cells: tuple[str, ...], style: str) -> list[Text]:
        return [cls._cell(i, value, style) for i, value in enumerate(cells)]

    @staticmethod
    def _cell(column: int, value: str, style: str) -> Text:
        """Every cell is plain Text: a command such as ``awk -F'[/]'`` is shown as typed
        (a str cell would be parsed as markup, and that one raises MarkupError)."""
        return Text(value, style=style) if column == STATUS_COLUMN else Text(value)

    # -- selection and output -------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#proc-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()
        chosen = self.selected
        if chosen is not None and chosen.output_available and chosen.id not in self._stored:
            self._read_size(chosen)
        # A row added to an empty table is highlighted without the user asking: that must
        # not take the view away from a foreground run the user is watching (nor from one
        # that just ended: its row is about to be selected).
        if self._wanted_selection is not None and not self.table.has_focus:
            return
        if self.foreground is not None and not self.table.has_focus:
            return
        # The event may be stale (rows were sorted since it was posted): follow the cursor.
        selected = self.selected
        if selected is not None:
            self._show_row(selected.id)
        self._show_detail()

    def show_session(self, session_id: str) -> None:
        """Select a session and show its output (a kanban worker opened from the board).

        A session not in the table yet (just spawned, or finished while finished ones are
        hidden) is selected as soon as a refresh brings it."""
        self._wanted_selection = session_id
        if session_id in self._rows:
            self._select(session_id)
            return
        if not self.show_finished:
            self.show_finished = True
        self.refresh_sessions()

    def show_file(self, key: str, path: Path, title: str, state: str) -> None:
        """Follow a file that is no session's output (hermes-agent's worker log of a
        card) in the output view, until another session is selected."""
        self.output.show(key, path, title)
        self.output.set_state(state)

    def _select(self, session_id: str) -> None:
        self._wanted_selection = None
        self.table.select_key(session_id)
        self._show_row(session_id)

    def _show_row(self, session_id: str) -> None:
        s = self.sessions.get(session_id)
        if s is None:
            return
        fresh = self.output.session_id != s.id
        self.output.show(s.id, s.output_path, self._title_of(s))
        self.output.set_state(self._state_of(s))
        if fresh and not s.output_available:
            self.output.append_note(NO_OUTPUT_NOTE)

    @staticmethod
    def _state_of(s: ProcessSession) -> str:
        """The output title's state: how the session stands now."""
        return s.exit_text() if s.output_available else f"{s.exit_text()} · output not available"

    def _title_of(self, s: ProcessSession) -> str:
        return f"{s.id} · pid {s.pid} · {shown_command(s, self.redact)}"

    def _show_detail(self) -> None:
        """The selected row in full under the table: whatever its columns cut or hide;
        while the output view shows the foreground run (not a row), that run."""
        s = self.selected
        detail = self.query_one("#proc-detail", DetailLine)
        fg = self.foreground
        if fg is not None and self.output.session_id == fg.id:
            detail.show(Text(shown_command(fg, self.redact)).append(
                f" · foreground · pid {fg.pid} · {fg.id}", style="dim"))
            return
        if s is None:
            detail.show("")
            return
        cells = self._rows.get(s.id)
        if cells is None:
            detail.show("")
            return
        # The command first (the cell most often cut), then every other column by name.
        text = Text(shown_command(s, self.redact))
        for (col, value) in zip(COLUMNS, cells, strict=True):
            if value and col.key not in ("command", "id"):
                text.append(f" · {col.label.lower()} {value}", style="dim")
        text.append(f" · {s.id}", style="dim")
        if s.name:
            text.append(f" · name {s.name}", style="dim")
        if s.restarted_from:
            text.append(f" · restarted from {s.restarted_from}", style="dim")
        stored = self._stored.get(s.id)
        if stored is not None:
            text.append(f" · output {human_bytes(stored)} stored"
                        + (f" (bound {human_bytes(s.max_output_bytes)})" if s.max_output_bytes else ""), style="dim")
        owner = s.hermes_owner.words() if s.hermes_owner is not None else ""
        if owner:  # hermes-agent's: who it is for (outside text: escaped)
            text.append(f" · for {escape_text(owner, keep_lines=True)}")
        detail.show(text)

    @property
    def row_ids(self) -> tuple[str, ...]:
        """The ids of the sessions the table shows (a foreground run is not a row), in
        the order their rows were added."""
        return tuple(self._rows)

    def row(self, session_id: str) -> tuple[str, ...] | None:
        """The cells of a session's row as plain text, in ``COLUMNS`` order (uncut);
        None when the table does not show it."""
        return self._rows.get(session_id)

    @property
    def selected(self) -> ProcessSession | None:
        key = self.table.selected_key if self._rows else None
        return self.sessions.get(key) if key else None

    # -- notifications --------------------------------------------------------------------

    def _deliver(self, event: ProcessEvent) -> None:
        self.notifications.append(event)
        del self.notifications[:-NOTIFICATIONS_KEPT]
        stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
        line = Text(f"{stamp} ", style="dim")
        line.append(event.kind.replace("_", " "), style="bold")
        line.append(f" {event.text}")
        self.query_one("#proc-notifications", NotificationList).add(line)
        self.add_class("-has-notifications")

    def _toast(self, events: tuple[ProcessEvent, ...], now: float) -> None:
        """At most one toast per refresh; alike events are grouped (widgets/processes/toast_groups.py)."""
        toast = self._toasts.offer(events, now)
        if toast is not None and self.settings.ui.notifications:
            self.app.notify(toast.body, title=toast.title, severity=toast.severity, markup=False)

    # -- foreground runs ------------------------------------------------------------------

    async def run_foreground(self, command: str) -> ProcessSession | None:
        """Run ``command`` in the foreground; a running one yields first (redirect)."""
        redirected = None
        if self.foreground is not None:
            redirected = await self.move_foreground_to_background(announce=False)
        try:
            s = await asyncio.to_thread(
                self.registry.spawn, command, owner="app", background=False, cwd=self._default_cwd()
            )
        except (SpawnFailed, HomeError, OSError) as exc:
            self.app.notify(str(exc), title="cannot run", severity="error", markup=False)
            return None
        self.foreground = s
        if redirected is not None and self._wanted_selection == redirected.id:
            # The view follows the new run: the moved one's row, when a refresh brings it,
            # must not take the view back to it (that refresh may come before or after this).
            self._wanted_selection = None
        self._foreground_timer.resume()
        self.sessions[s.id] = s
        self.output.show(s.id, s.output_path, self._title_of(s))
        self.output.set_state("foreground")
        self._show_detail()
        self.post_message(self.ForegroundChanged(command))
        if redirected is not None:
            self.app.notify(
                f"redirect: {redirected.id} moved to background; now running {command}",
                title="redirected", markup=False,
            )
        self.refresh_sessions()
        return s

    def _default_cwd(self) -> str:
        return os.getcwd()

    async def move_foreground_to_background(self, announce: bool = True) -> ProcessSession | None:
        """Yield: the foreground run becomes a background session. Never a signal."""
        fg = self.foreground
        if fg is None:
            if announce:
                self.app.notify("nothing runs in the foreground", severity="warning")
            return None
        self.foreground = None
        try:
            moved = await asyncio.to_thread(self.registry.move_to_background, fg.id)
        except (ProcessLookupFailed, OSError) as exc:
            self.app.notify(f"cannot move {fg.id} to background: {exc}", severity="error", markup=False)
            return None
        self.sessions[moved.id] = moved
        # The view stays on the run just moved: its row, new in the table, is selected once
        # a refresh brings it (not the row the cursor was on before it ran).
        self._wanted_selection = moved.id
        self.post_message(self.ForegroundChanged(None))
        if self.output.session_id == moved.id:
            self.output.set_state("background")
        if announce:
            self.app.notify(f"moved to background as {moved.id}", title="background", markup=False)
        self.refresh_sessions()
        return moved

    def _check_foreground(self) -> None:
        fg = self.foreground
        if fg is None:
            self._foreground_timer.pause()
            return
        popen = self.registry.popen_of(fg.id)
        if popen is not None and popen.poll() is None:
            return
        self._finish_foreground(fg)

    @work(thread=True, group="processes-foreground", description="the foreground run ends")
    def _finish_foreground(self, fg: ProcessSession) -> None:
        try:
            done = self.registry.get(fg.id)
        except ProcessLookupFailed:
            return
        if done.running:
            return
        self.post_message(self.ForegroundEnded(done))

    def on_processes_pane_foreground_ended(self, message: ForegroundEnded) -> None:
        done = message.session
        if self.foreground is None or self.foreground.id != done.id:
            return
        self.foreground = None
        # The view stays on the run that just ended (its exit shown): its row, new in the
        # table, is selected once a refresh brings it, not whichever session is on top.
        self._wanted_selection = done.id
        self.post_message(self.ForegroundChanged(
            None, detail=f"last: {done.exit_text()} · {' '.join(done.command.split())[:40]}"))
        if self.output.session_id == done.id:
            self.output.set_state(done.exit_text())
        self.refresh_sessions()

    # -- actions ---------------------------------------------------------------------------

    def action_kill(self) -> None:
        s = self.selected
        if s is None:
            self.app.notify("no session selected", severity="warning")
            return
        hermes = s.source is SessionSource.HERMES  # hermes-agent's, from its processes.json
        left = {} if hermes or s.running else self._left_running(s)
        if not s.running and s.status != SessionStatus.LOST and not left:
            self.app.notify(f"{s.id} already {s.exit_text()}", markup=False)
            return
        grace = self.settings.processes.kill_grace_seconds
        if hermes and not s.running:
            self.app.notify(f"{s.id} is not running: nothing to kill", markup=False)
            return
        if hermes:
            how = (f"hermes-agent started it. Sends SIGTERM to pid {s.pid} (to its group if it leads one), waits "
                   f"{grace:g}s, then SIGKILL to whatever is left, only if hermes-agent's processes.json still "
                   "names it and the start time recorded there matches the live process: a reused pid is never "
                   "signalled. processes.json is not changed.")
        elif s.status == SessionStatus.LOST:  # its wrapper is gone; its command may still run on
            how = (f"Its supervising wrapper is gone. Sends SIGTERM to each process left of it that is verified "
                   f"as this session's (its own fingerprint; its group, session or HERMES_PROCESS_ID), waits "
                   f"{grace:g}s, then SIGKILL to whatever is left. Nothing else is signalled.")
        elif not s.running:  # it ended, but what it started runs on
            how = (f"Its command ended ({s.exit_text()}), but it left {describe(left, 'running')}. Sends SIGTERM "
                   f"to each (verified by its own fingerprint), waits {grace:g}s, then SIGKILL to whatever is "
                   "left. Its exit stays as it was.")
        else:
            how = (f"Sends SIGTERM to everything it runs: its group and every process it started, also one that "
                   f"moved to another group or session (timeout, setsid); waits {grace:g}s, then SIGKILL to "
                   "whatever is left. Each pid is checked against its fingerprint first: a recycled pid is never "
                   "signalled.")
        body = (
            f"Command: {maybe_redact(s.command, self.redact)}\n"
            f"PID {s.pid}{'' if hermes else f' (it leads process group {s.pid})'}, owner {s.owner}\n\n{how}"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._kill(s.id)

        self.app.push_screen(ConfirmModal(f"Kill {s.id} (pid {s.pid})?", body, yes_label="Kill"), answered)

    @staticmethod
    def _left_running(s) -> dict:
        """What a session that ended left running (its tree: one pass over /proc)."""
        from engine.processes import tree

        return tree.members(tree.Root(s.id, s.pid, s.fingerprint))

    def action_restart(self) -> None:
        s = self.selected
        if s is None:
            self.app.notify("no session selected", severity="warning")
            return
        if s.source is SessionSource.HERMES or s.owner.startswith("kanban:"):
            whose = "hermes-agent restarts its own processes" if s.source is SessionSource.HERMES else (
                "a kanban worker is started by the board's retry rules: reclaim its card instead")
            self.app.notify(f"{s.id} is not restarted here: {whose}", severity="warning", markup=False)
            return
        if not s.running:
            self._restart(s.id)
            return
        grace = self.settings.processes.kill_grace_seconds
        body = (f"Command: {maybe_redact(s.command, self.redact)}\nPID {s.pid}, owner {s.owner}\n\n"
                f"Stops it first: SIGTERM to its group, {grace:g}s grace, then SIGKILL (the pid verified against "
                "its fingerprint). Then runs the same command in the same directory with the same environment "
                "as a new session; this one stays in the list.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._restart(s.id)

        self.app.push_screen(ConfirmModal(f"Restart {s.id} (pid {s.pid})?", body, yes_label="Restart"), answered)

    @work(thread=True, group="processes-kill", description="restart a session")
    def _restart(self, session_id: str) -> None:
        try:
            done = self.registry.restart(session_id)
        except (ProcessLookupFailed, SpawnFailed) as exc:
            self.post_message(self.KillReported(f"not restarted: {exc}", "error"))
            return
        self.post_message(self.KillReported(f"{done.old.id} restarted as {done.new.id}", "information"))

    @work(thread=True, group="processes-kill", description="kill a session")
    def _kill(self, session_id: str) -> None:
        try:
            report = self.registry.kill(session_id)
        except ProcessLookupFailed as exc:
            self.post_message(self.KillReported(str(exc), "error"))
            return
        if report.ok:
            message, severity = f"{report.id} {report.status}", "information"
            if report.detail and report.outcome in (KillOutcome.KILLED, KillOutcome.LEFTOVERS_KILLED):
                message += f": {report.detail}"
        else:
            message, severity = f"{report.id}: {report.outcome} ({report.detail})", "error"
        if report.survivors:
            message += f"; still alive: {', '.join(map(str, report.survivors))}"
        self.post_message(self.KillReported(message, severity))

    def on_processes_pane_kill_reported(self, message: KillReported) -> None:
        self.app.notify(message.text, title="kill", severity=message.severity, markup=False)
        self.refresh_sessions()

    def action_toggle_follow(self) -> None:
        on_ = self.output.toggle_follow()
        self.app.notify(f"follow {'on' if on_ else 'off'}", timeout=1.5)

    def action_toggle_wrap(self) -> None:
        on_ = self.output.toggle_wrap()
        self.app.notify(f"wrap {'on' if on_ else 'off'}", timeout=1.5)

    def action_search(self) -> None:
        self.output.start_search()

    @on(OutputView.SearchClosed)
    def _search_closed(self) -> None:
        self.table.focus()  # the arrow keys go back to the list; n / N still jump

    def action_next_match(self) -> None:
        if self.output.next_match(1) is None:
            self.app.notify("no matches (/ to search)", timeout=2)

    def action_previous_match(self) -> None:
        if self.output.next_match(-1) is None:
            self.app.notify("no matches (/ to search)", timeout=2)

    def action_copy_output(self) -> None:
        text = self.output.text()
        if not text:
            self.app.notify("nothing to copy", severity="warning")
            return
        # Textual sends it to the terminal (OSC 52): whether it lands is the terminal's
        # business (and tmux's: its default set-clipboard external drops it), so say so.
        self.app.copy_to_clipboard(text)
        n = len(self.output.lines)
        where = "sent to the terminal's clipboard"
        if os.environ.get("TMUX"):
            where += " (tmux may need set-clipboard on)"
        elif os.environ.get("STY"):
            where += " (screen may not pass it on)"
        self.app.notify(f"{n} line{'s' if n != 1 else ''} of output (secrets masked) {where}", timeout=4)

    def action_toggle_finished(self) -> None:
        self.show_finished = not self.show_finished
        self.app.notify("showing all sessions" if self.show_finished else "showing running sessions only",
                        timeout=1.5)
        self.refresh_sessions()

    def action_open_in_editor(self) -> None:
        path = self.output.path
        if path is None:
            self.app.notify("no session selected", severity="warning")
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.app.notify("set $EDITOR (or $VISUAL) to open the output in an editor", severity="warning")
            return
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(editor), str(path)], check=False)
        except Exception as exc:  # SuspendNotSupported (e.g. headless), a missing editor binary
            self.app.notify(f"cannot open the editor: {exc}", severity="error", markup=False)
