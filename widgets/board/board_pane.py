"""The kanban board pane: one column per status, cards with their worker's pid and a
live marker, and keys for every move.

The pane renders and handles keys; it does not dispatch. The app's dispatch loop
(``hermes_tui/dispatch_loop.py``) ticks the board and sends each result here as a
:class:`BoardPane.TickDone` message; "dispatch now" asks the app with
:class:`BoardPane.DispatchRequested`. The board is found, opened, listened to and
retried by an :class:`engine.kanban.link.BoardLink` (whose service is the process's shared
:class:`engine.kanban.service.BoardService`); the pane renders the link's state.

Nothing here blocks the UI: the board is read and changed on its connection's own
thread, the cards are built, checked for liveness and compared in a thread, and the
columns are updated by keyed diff: an unchanged card keeps its view object, and a
column (:class:`widgets.board.card_list.CardList`) draws only the cards in view, so only
changed cards in view are redrawn. Every outside text (titles, paths, errors) is
shown as plain text, never parsed as markup.

Work is done when something changed. Every refresh asks the board its data version
first (a SQLite board: ``PRAGMA data_version`` with the connection's own change count;
hermes's board: its files' change times; a PostgreSQL board announces changes with
NOTIFY) and reads the cards only when it moved. A refresh is never cancelled: one
asked while another runs runs once after it, so a read slower than the timer still
lands. A pane not shown (another pane zoomed, or the narrow layout showing another)
is not refreshed; it is read when it is shown again.

The columns share the width, none narrower than MIN_COLUMN_WIDTH: when they do not
all fit, the board shows the columns around the selected one and a strip at each side
says how many more there are (``◂ 2`` / ``3 ▸``); ``h``/``l`` move across the shown
columns and stop at the ends.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Label, Static

from engine.coalesce import Coalesced
from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.describe import mask_task
from engine.kanban.link import BoardLink, LinkState
from engine.kanban.statuses import ARCHIVED, BLOCKED, DONE, READY, RUNNING, STATUSES
from engine.kanban.wording import (
    Confirm,
    archive_confirm,
    assign_words,
    cannot_move_words,
    change_words,
    held_back_words,
    move_done_confirm,
    move_running_confirm,
    reclaim_confirm,
    refused_words,
    skip_reason,
    unblock_confirm,
)
from engine.processes.redact import maybe_redact
from engine.text import count_of, escape_text
from widgets.board.card_list import CardList, CardView, card_age
from widgets.common.fit_table import DetailLine
from widgets.common.pane import EmptyState, Pane

# The store, the transitions, the workers' checks and the dialogs are
# imported where they are first used: a home without a board never needs them, and
# the first frame does not wait for them.
if TYPE_CHECKING:
    from engine.kanban.models import NewTask, Task
    from engine.kanban.service import BoardService
    from engine.kanban.tick_result import DispatchResult

MIN_COLUMN_WIDTH = 22
RECENT_FINISHED = 100  # the done/archived columns show their newest cards only
_MACHINE_CLOCK = time.time  # the default clock of the pane (see _open_locked)
LISTENING_REFRESH_EVERY = 10  # a board that announces changes is re-read in full this rarely
# The actions that change the board: unavailable (shown dimmed) on a board that is read-only here.
CHANGES = frozenset({"new_card", "move", "assign", "reclaim", "archive", "unblock"})


class BoardColumn(Vertical):
    def __init__(self, status: str, clock) -> None:
        super().__init__(id=f"column-{status}", classes="board-column")
        self.status = status
        self._clock = clock

    def compose(self) -> ComposeResult:
        yield Label(self.status.upper(), classes="column-title")
        yield CardList(self.status, self._clock)


class BoardPane(Pane):
    PANE_ID = "board"
    TITLE = "Board"
    NUMBER = 1

    BINDINGS = [
        Binding("n", "new_card", "New card", id="board.new"),
        Binding("enter", "details", "Details", id="board.details", show=False),
        Binding("left,h", "column(-1)", "Column left", id="board.column_left", show=False),
        Binding("right,l", "column(1)", "Column right", id="board.column_right", show=False),
        Binding("greater_than_sign", "move(1)", "Move right", id="board.move_right"),
        Binding("less_than_sign", "move(-1)", "Move left", id="board.move_left"),
        Binding("e", "assign", "Assign", id="board.assign"),
        Binding("r", "reclaim", "Reclaim", id="board.reclaim", show=False),
        Binding("a", "archive", "Archive", id="board.archive"),
        Binding("u", "unblock", "Unblock", id="board.unblock", show=False),
        Binding("D", "dispatch_now", "Dispatch now", id="board.dispatch", show=False),
        Binding("A", "toggle_archived", "Show archived", id="board.toggle_archived", show=False),
        Binding("o", "open_output", "Worker output", id="board.output", show=False),
        Binding("b", "switch_board", "Switch board", id="board.switch", show=False),
    ]

    DEFAULT_CSS = """
    BoardPane #board-info { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    BoardPane #board-detail { max-height: 2; }
    BoardPane #board-columns { height: 1fr; }
    BoardPane .board-column { width: 1fr; min-width: 18; height: 1fr; margin-right: 1; }
    BoardPane .column-title {
        width: 1fr; height: 1; text-style: bold; color: $text-muted; background: $panel; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    /* More columns to a side: a strip says how many (the board shows whole columns only). */
    BoardPane .board-more { width: 1; height: 1fr; color: $accent; text-style: bold; display: none; }
    BoardPane #board-more-left { margin-right: 1; }
    BoardPane CardList { background: $surface; }
    BoardPane CardList:focus { background: $boost; }
    BoardPane EmptyState { display: none; }
    BoardPane.-failed EmptyState { display: block; }
    BoardPane.-failed #board-columns { display: none; }
    """

    # The clock the ages are computed with (tests pin it for snapshots).
    clock: Callable[[], float] = staticmethod(time.time)

    class OpenWorkerOutput(Message):
        """Show a worker's process session in the processes pane."""

        def __init__(self, session_id: str, task_id: str) -> None:
            super().__init__()
            self.session_id = session_id
            self.task_id = task_id

    class OpenWorkerLog(Message):
        """Follow a card's worker log file live (hermes-agent's ``kanban/logs/<id>.log``)."""

        def __init__(self, path: Path, task_id: str) -> None:
            super().__init__()
            self.path = path
            self.task_id = task_id

    class TickDone(Message):
        """A dispatch tick ended: sent to the pane by the app's dispatch loop; it bubbles
        on to the app, whose attention monitor counts the tick."""

        def __init__(self, result: DispatchResult, board: object = None, slug: str | None = None) -> None:
            super().__init__()
            self.result = result
            self.board = board  # which board was ticked (its file or server); None: the default board
            self.slug = slug  # its slug, for a named board (None: the default board)

    class DispatchStopped(Message):
        """The board refuses the app's dispatch ticks (``reason``, one line; "" once it
        takes them again): another machine holds this host id's lease."""

        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    class DispatchRequested(Message):
        """The user asked for a tick now of the board shown (the app's dispatch loop runs it)."""

        def __init__(self, board: object = None) -> None:
            super().__init__()
            self.board = board

    def __init__(self, *, home: HomeLayout, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.settings = settings
        # Finds, opens, listens and retries (the pane only shows its state). A pinned clock
        # (tests) is the board's too; this machine's is not a server board's.
        self.link = BoardLink(home, settings, clock=None if self.clock is _MACHINE_CLOCK else self.clock,
                              on_change=self._board_changed)
        self._service: BoardService | None = None  # the link's service, once its columns are made
        self._open_lock = asyncio.Lock()
        self.cards: dict[str, CardView] = {}
        self.counts: dict[str, int] = {}  # status -> cards on the board (columns may show fewer)
        self._prompts: dict[str, str] = {}  # card id -> the text its option shows now
        self._columns: dict[str, list[str]] = {s: [] for s in STATUSES}
        self.statuses: tuple[str, ...] = STATUSES  # the board's columns (hermes's board has more)
        self.show_archived = False
        self.last_result: DispatchResult | None = None
        self.last_held_back = ""  # the tick's code line (held_back); the words are made when shown
        self._held_back: dict = {}  # card id -> its Skip in the last tick
        self._held_back_words = ""  # the last tick's held-back line in words (made once per tick)
        self._workers: tuple[str, ...] = ()  # the cards that have a worker pid (their markers are rechecked)
        self.last_tick_at: float | None = None
        self.dispatch_stopped = ""  # why the board refuses the app's ticks, when it does
        self._timer_ticks = 0
        self._info: str | None = None  # what the info line shows
        self.gateway = None  # hermes-agent's board: whether hermes's gateway (its dispatcher) runs
        self._first_column = 0  # the first shown column when they do not all fit
        self._window: tuple[str, ...] = ()  # the columns shown now
        self._laid_out: tuple = ()  # what _size_columns last laid out
        # Refreshing (see the module doc): one at a time, again once when asked meanwhile.
        self._refresher = self._new_refresher()
        self._must_read = True  # read the cards whatever the version says
        self._version: object = None  # the board's data version of the cards shown
        self.profiles: tuple[str, ...] = tuple(sorted(settings.kanban.profiles))  # assignable names
        self.reads = 0  # times the cards were read (tests and the bench read these counters)
        self.skipped_hidden = 0  # refreshes skipped because the pane was not shown
        self._missing_key: tuple | None = None  # where a missing board would appear, as last looked at
        self.skipped_missing = 0  # timer ticks that did not look again for a board still missing
        # Following the card a change acted on (see _run_change): its id, the first read that
        # shows the change (reads are numbered as they start), and the keys pressed meanwhile.
        self._follow: str | None = None
        self._follow_from: int | None = None
        self._reads_started = 0
        self._read_shown = 0  # the number of the read whose cards are shown
        self._deferred: list = []

    def _new_refresher(self) -> Coalesced:
        return Coalesced(lambda refreshes: self.run_worker(refreshes, group="board-refresh", exit_on_error=False),
                         self._refresh_once)

    # -- the board link's state, as the pane's readers knew it -------------------------------

    @property
    def service(self) -> BoardService | None:
        """The open board (None until it is open and its columns are made)."""
        return self._service

    @property
    def db_path(self):
        """Which board: a file, a server's URL (no password), or None while not known."""
        return self.link.location

    @property
    def board_override(self) -> Path | None:
        """The board the switcher chose (None: the default one)."""
        return self.link.override

    @property
    def error(self) -> str | None:
        """Why the board cannot be used (the link failed), else None."""
        return self.link.reason if self.link.state is LinkState.FAILED else None

    @property
    def unreachable(self) -> str | None:
        """Why the board's server is away (every refresh retries), else None."""
        return self.link.reason if self.link.state is LinkState.UNREACHABLE else None

    @property
    def listening(self) -> bool:
        """A server board announces its changes (no need to wait for the timer)."""
        return self.link.listening

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("", id="board-info")
        yield EmptyState("", id="board-error")
        with Horizontal(id="board-columns"):
            yield Static("", id="board-more-left", classes="board-more")
            for status in STATUSES:
                yield BoardColumn(status, self.clock)
            yield Static("", id="board-more-right", classes="board-more")
        yield DetailLine(id="board-detail")

    def column_ids(self, status: str) -> tuple[str, ...]:
        """The ids of the cards shown in a status's column, top to bottom."""
        return tuple(self._columns.get(status, ()))

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The statuses whose columns are on screen now, left to right."""
        return self._window

    @property
    def focus_target(self):
        focused = self.app.focused if self.is_attached else None
        if isinstance(focused, CardList) and self in focused.ancestors:
            return focused
        for status in self._window or self._shown_statuses(False):
            if self._columns[status]:
                return self.query_one(f"#cards-{status}", CardList)
        return self.query_one(f"#cards-{READY if READY in self._window or not self._window else self._window[0]}",
                              CardList)

    async def on_mount(self) -> None:
        # The board spans the screen's width in every layout of the app: size the columns
        # for that before the first frame, not after it (which costs a second layout);
        # on_resize corrects any other case, and changes nothing when this was right.
        self._size_columns(self.app.size.width - self.styles.gutter.width)
        self._show_info()
        self.open_board()

    def on_resize(self) -> None:
        self._size_columns(self.size.width)

    def _size_columns(self, width: int, reveal: str | None = None) -> None:
        """Columns share the width, each at least MIN_COLUMN_WIDTH. When they do not all
        fit, the columns from ``_first_column`` are shown (moved so that ``reveal``, or the
        focused column, is among them) between two strips saying how many more there are."""
        shown = self._shown_statuses(self.show_archived)
        fits = max(1, (width + 1) // (MIN_COLUMN_WIDTH + 1))
        if fits >= len(shown):
            count, first = len(shown), 0
            column_width = max(MIN_COLUMN_WIDTH, (width - 1) // count - 1)
        else:
            room = width - 3  # the two strips and the left one's margin
            count = max(1, (room + 1) // (MIN_COLUMN_WIDTH + 1))
            column_width = max(MIN_COLUMN_WIDTH, room // count - 1)
            first = min(self._first_column, len(shown) - count)
            focused = self._focused_list()
            keep = reveal or (focused.status if focused is not None and self in focused.ancestors else None)
            if keep in shown:
                at = shown.index(keep)
                first = at if at < first else at - count + 1 if at >= first + count else first
        self._first_column = max(0, first)
        window = shown[self._first_column:self._first_column + count]
        if (window, column_width, shown) == self._laid_out:
            return  # a column switch inside the shown columns: nothing to lay out again
        self._laid_out = (window, column_width, shown)
        for column in self.query(BoardColumn):
            column.styles.width = column_width
            column.display = column.status in window
        hidden_left, hidden_right = self._first_column, len(shown) - self._first_column - len(window)
        windowed = len(window) < len(shown)
        for strip_id, hidden, sign in (("#board-more-left", hidden_left, "◂"),
                                       ("#board-more-right", hidden_right, "▸")):
            strip = self.query_one(strip_id, Static)
            strip.display = windowed
            strip.update(Text(f"{sign}\n{hidden}") if hidden else Text(""), layout=False)  # fixed size
        self._window = window

    async def on_unmount(self) -> None:
        try:
            await self.link.close()
        except Exception:
            pass

    @work(exclusive=True, group="board-open")
    async def open_board(self) -> None:
        """Open the board if it exists (a home that never used the board gets no file
        until the first card is created), then keep it fresh."""
        await self._ensure_board(create=False)
        self.set_interval(max(0.2, self.settings.ui.refresh_seconds), self._refresh_on_timer)
        if self.service is not None:
            self.refresh_board()

    async def _ensure_board(self, create: bool) -> BoardService | None:
        if self._service is not None or self.error:
            return self._service
        async with self._open_lock:  # refresh and create may both ask at once
            return await self._open_locked(create)

    async def _open_locked(self, create: bool) -> BoardService | None:
        if self._service is not None or self.error:
            return self._service
        service = await self.link.open(create)
        if service is None:
            self._show_link()
            return None
        await self._use_statuses(self.link.statuses)
        self._service = service
        if service.capabilities.read_only:  # said once, when the board opens; its keys are shown unavailable
            self.notify(service.read_only_reason, severity="warning", timeout=8, markup=False)
        self.profiles = self.link.profiles
        self.refresh_bindings()
        self._show_info()
        self._name_board()
        return service

    @work(exclusive=True, group="board-name", description="which board is shown")
    async def _name_board(self) -> None:
        """The shown board's name in the pane's title, never cut off as the info line may
        be (issue 36): its slug when the home has more than one board or it is not the
        default one (listing the boards is stats and small reads: in a thread)."""
        from engine.kanban.boards import _refs, board_slug

        location = self.db_path
        slug = board_slug(self.home, location) if isinstance(location, Path) else None
        if slug is None:
            self.set_title_detail("")
            return
        others = await asyncio.to_thread(lambda: len(_refs(self.home, self.settings)))
        if location == self.db_path:  # not switched meanwhile
            self.set_title_detail(slug if slug != "default" or others > 1 else "")

    async def _use_statuses(self, statuses: tuple[str, ...]) -> None:
        """Give every status of the board a column (hermes's board has triage, scheduled
        and whatever else its cards hold), in the board's order."""
        missing = [s for s in statuses if s not in self._columns]
        for status in missing:
            self._columns[status] = []
        self.statuses = tuple(statuses) + tuple(s for s in STATUSES if s not in statuses)
        if not missing:
            return
        holder = self.query_one("#board-columns", Horizontal)
        for status in missing:
            following = [s for s in statuses[statuses.index(status) + 1:] if s not in missing]
            before = self.query_one(f"#column-{following[0]}") if following else "#board-more-right"
            await holder.mount(BoardColumn(status, self.clock), before=before)
        self.on_resize()

    def _shown_statuses(self, with_archived: bool) -> tuple[str, ...]:
        return tuple(s for s in self.statuses if with_archived or s != ARCHIVED)

    def _refresh_on_timer(self) -> None:
        """Every timer tick: a board that announces its changes is read in full only
        every LISTENING_REFRESH_EVERY-th tick (a missed announcement), and while its
        server is away, every tick (each one retries); any other board is asked its
        data version. Ages and worker markers are brought up to date in every case."""
        self._timer_ticks += 1
        if self.service is None and self._missing_key is not None and self._missing_key == self._board_missing_key():
            self.skipped_missing += 1  # no board yet, and none of the places it would appear in changed
            return
        if self.listening and self.unreachable is None and self._timer_ticks % LISTENING_REFRESH_EVERY == 0:
            self._must_read = True
        self._request_refresh()

    def _board_missing_key(self) -> tuple | None:
        """Stats of where a missing board file would appear (the file, its folder, the
        home, whose ``kanban.db`` would be hermes's board): equal, it is still missing.
        None for a server board, or one whose place is not known yet."""
        where = self.db_path
        if not isinstance(where, Path):
            return None

        def stamp(path: Path) -> tuple | None:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return st.st_ino, st.st_mtime_ns

        return self.board_override, where, stamp(where), stamp(where.parent), stamp(self.home.root)

    def _board_changed(self) -> None:
        if self.is_attached:
            self._must_read = True
            self._request_refresh()

    def on_show(self) -> None:
        """Shown again (the narrow layout, a zoom): catch up at once if a refresh was skipped."""
        if self.skipped_hidden and self.service is not None:
            self._request_refresh()

    def _show_link(self) -> None:
        """Show what the link says: a failed board in place of the columns, else
        the info line (missing, unreachable, ready)."""
        message = self.error
        if message is None:
            self._show_info()
            return
        try:
            self.query_one("#board-error", EmptyState).update(Text(message))
        except NoMatches:
            return
        self.add_class("-failed")
        self.set_status("board removed" if self._gone() else "board unusable")

    def _gone(self) -> bool:
        """The board shown was removed or replaced since it was opened (the link failed so)."""
        from engine.kanban.backend import BoardGone

        return isinstance(self.link.failure, BoardGone)

    def _board_gone(self, exc: Exception) -> None:
        """The board's file was removed or replaced: said in one line in place of the
        columns; nothing is read or written there again (switch boards with b)."""
        text = str(exc)
        self.link.fail(text[:1].upper() + text[1:] + " (b: switch boards)", exc)
        self._show_link()

    # -- reading the board ------------------------------------------------------------------

    def refresh_board(self) -> None:
        """Read the board now, or right after the refresh under way (never cancelling
        it): a change made here, a dispatch tick, the archived column toggled."""
        self._must_read = True
        self._request_refresh()

    def _request_refresh(self) -> None:
        self._refresher.request()

    def _is_shown(self) -> bool:
        """Whether any of the pane is on the screen (not display:none, not zoomed away)."""
        return self.is_attached and self.display and self.region.area > 0

    async def _refresh_once(self) -> None:
        if not self._is_shown():
            self.skipped_hidden += 1
            return
        self.skipped_hidden = 0
        missing_key = self._board_missing_key() if self.service is None else None  # before looking
        if await self._ensure_board(create=False) is None:  # someone may have created it since
            self._missing_key = missing_key if self.unreachable is None and not self.error else None
            return
        self._missing_key = None
        import sqlite3

        from engine.kanban.backend import BoardGone, StoreError
        from engine.kanban.backends.postgres.errors import BoardUnreachable

        statuses = self._shown_statuses(self.show_archived)
        must_read, self._must_read = self._must_read, False
        self._reads_started += 1
        read_number = self._reads_started
        try:
            version = await self.service.data_version()
            if not must_read and version is not None and version == self._version \
                    and self.unreachable is None:
                await self._recheck_workers()
                self._tick_ages()
                return
            view = await self.service.view(statuses, RECENT_FINISHED)
        except BoardUnreachable as exc:  # the last cards stay shown; every refresh retries
            self._give_up_following("the board cannot be reached")
            self.link.lost(exc)
            self._show_info()
            return
        except BoardGone as exc:
            self._board_gone(exc)
            return
        except StoreError as exc:
            self._give_up_following("the board cannot be read")
            self.link.fail(f"The board cannot be read: {exc}", exc)
            self._show_link()
            return
        except (sqlite3.Error, OSError) as exc:  # a file changed under us
            self._must_read = True
            self.notify(f"board refresh failed: {exc}", severity="error", timeout=5, markup=False)
            return
        if await self.link.reached():  # back from an outage: say so (it listens again)
            self.notify("board reachable again", timeout=3)
        reasons = None
        if self.service.capabilities.reports_reasons:  # hermes-agent's board: hermes's own reasons, its gateway
            try:
                found = await self.service.reasons(view.tasks)
                self.gateway = await self.service.gateway()
            except StoreError:
                found = {}
            redact = self.settings.processes.redact  # hermes's words may quote a worker's output
            reasons = {task_id: (tuple(maybe_redact(escape_text(r.words), redact) for r in rs),
                                 " · ".join(maybe_redact(escape_text(r.short), redact) for r in rs))
                       for task_id, rs in found.items()}
        self.reads += 1
        prepared = await asyncio.to_thread(_prepare, self.cards, list(view.tasks), self.statuses, None, reasons,
                                           self.settings.processes.redact)
        self._version = version  # read before the cards: a change in between is read next time
        self._read_shown = read_number
        self._apply_prepared(prepared, view.counts)

    async def _recheck_workers(self) -> None:
        """The board did not change, but a worker may have died: check the cards that have
        one (in a thread: it reads /proc) and redraw those whose marker changed."""
        checked = [self.cards[i] for i in self._workers if i in self.cards]
        if not checked:
            return
        fresh = await asyncio.to_thread(_with_liveness_views, checked)
        changed = {v.task.id: v for v in fresh if self.cards.get(v.task.id) is not None
                   and self.cards[v.task.id].live != v.live}
        if changed:
            cards = {**self.cards, **changed}
            columns = {s: (tuple(self._columns[s]), None) for s in self.statuses}
            self._apply_prepared((cards, columns, None), self.counts)

    def _tick_ages(self) -> None:
        """Ages in view read to the minute: a column repaints only when one reads differently."""
        for status in self._window:
            try:
                self.query_one(f"#cards-{status}", CardList).tick()
            except NoMatches:
                pass

    def apply(self, views: list[CardView], counts: dict[str, int] | None = None) -> None:
        """Show these cards (keyed diff: a card equal to the one shown keeps its drawing)."""
        self._apply_prepared(_prepare(self.cards, [v.task for v in views], self.statuses, views), counts)

    def _apply_prepared(self, prepared, counts) -> None:
        try:
            self._apply(prepared, counts)
        except NoMatches:  # a refresh finishing while the pane is being torn down
            pass

    def _apply(self, prepared, counts: dict[str, int] | None) -> None:
        cards, columns, workers = prepared
        self.cards = cards
        if workers is not None:
            self._workers = workers
        self.counts = dict(counts) if counts is not None else {}
        with self.app.batch_update():
            for status in self.statuses:
                ids, index = columns.get(status, ((), None))
                self._columns[status] = ids
                self.query_one(f"#cards-{status}", CardList).set_cards(ids, cards, index)
                title = self.query_one(f"#column-{status} .column-title", Label)
                total = (counts or {}).get(status, len(ids))
                shown = f"{len(ids)} of {total}" if total > len(ids) else f"{len(ids)}"
                text = f"{status.upper()} ({shown})"
                if title.content != text:  # fixed one-line size: a repaint, never a layout
                    title.update(text, layout=False)
        self._follow_shown()
        self._show_info()

    # -- following the card a change acted on ------------------------------------------------

    def _follow_shown(self) -> None:
        """Once the cards shown are read after a change, select the card it acted on in
        its new column and bring that column into view; then run the keys pressed while
        the change was under way, on that card."""
        if self._follow is None or self._follow_from is None or self._read_shown < self._follow_from:
            return
        card_id, self._follow, self._follow_from = self._follow, None, None
        view = self.cards.get(card_id)
        status = view.task.status if view is not None else None
        if status in self._shown_statuses(self.show_archived):
            cards = self.query_one(f"#cards-{status}", CardList)
            self._size_columns(self.size.width, reveal=status)
            self.screen.set_focus(cards)
            cards.highlighted = cards.get_option_index(card_id)
            deferred, self._deferred = self._deferred, []
            for key in deferred:
                self.call_later(key)
        else:  # gone from view (archived and hidden): a key pressed meanwhile must not act on another card
            self._drop_deferred(f"{card_id} is no longer shown")

    def _drop_deferred(self, why: str) -> None:
        if self._deferred:
            self._deferred = []
            self.notify(f"{why}: the keys pressed meanwhile were not applied", severity="warning", timeout=4,
                        markup=False)

    def _busy_with_change(self, key) -> bool:
        """While a change is under way, a key that acts on the selection waits for the
        selection to follow the card the change acted on (else a second `>` pressed at
        once would move the card that slid into the cursor's place)."""
        if self._follow is None:
            return False
        self._deferred.append(key)
        return True

    def _show_info(self) -> None:
        try:
            self._update_info()
        except NoMatches:  # a worker finishing while the pane is being torn down
            pass

    def _shown_db_path(self) -> str:
        """The board file as a user reads it: relative to the home when it lives there
        (a server board: its URL without the password)."""
        if self.db_path is None or not isinstance(self.db_path, Path):
            return str(self.db_path or "the board")
        try:
            return str(Path(self.db_path or self.home.kanban_db).relative_to(self.home.root))
        except ValueError:
            return str(self.db_path)

    def _shown_home_path(self, path: Path) -> str:
        """A file as a user reads it: relative to the home when it lives there."""
        try:
            return str(path.relative_to(self.home.root))
        except ValueError:
            return str(path)

    def _update_info(self) -> None:
        k = self.settings.kanban
        running = len(self._columns[RUNNING])
        if self.error:
            return
        if self.unreachable is not None:
            self._set_info(f"{self.link.away_words}, retrying: {self.unreachable}")
            self.set_status(f"{self.link.away_words}, retrying")
            return
        if self.service is None and self.db_path is None:
            self._set_info("Looking for the board…")
            return
        if self.service is None:
            self._set_info(f"No board yet ({self._shown_db_path()}): press n to create the first card.")
            self.set_status("no board yet")
            return
        if not self.service.capabilities.dispatchable:
            self._show_foreign_info()
            self._show_card_detail()  # a change made here (`e` on hermes's board) is shown at once
            return
        state = f"dispatcher every {k.dispatch_interval_seconds:g}s" if k.dispatch else "dispatcher off"
        if self.dispatch_stopped and self.board_override is None:
            state = f"dispatcher STOPPED: {self.dispatch_stopped}"
        elif self.last_tick_at is not None:
            state += f", last tick {time.strftime('%H:%M:%S', time.localtime(self.last_tick_at))}"
            if self.last_result is not None and self.last_result.spawned:
                state += f": spawned {len(self.last_result.spawned)}"
        words = self._held_back_words
        info = self._board_label() + state + (f" · {words}" if words else "")
        self._set_info(info)  # cut with … when narrow (the selected card's reason is in full below)
        total = sum(self.counts.get(s, len(self._columns[s])) for s in self._shown_statuses(False))
        dispatch = "dispatch STOPPED" if state.startswith("dispatcher STOPPED") else \
            "dispatch on" if k.dispatch else "dispatch off"
        status = f"{count_of(total, 'card')}, {running} running · {dispatch}"
        if self.last_result is not None and self.last_result.skipped:
            status += f" · {len(self.last_result.skipped)} held back"
        self.set_status(status)
        self._show_card_detail()

    def _show_card_detail(self) -> None:
        """The selected card in full under the columns, with why the last tick held it back."""
        detail = self.query_one("#board-detail", DetailLine)
        task = self.selected
        if task is None:
            detail.show("")
            return
        view = self.cards.get(task.id)
        text = Text()
        text.append(task.id, style="bold")
        text.append(f" · {task.status} · {task.assignee or 'unassigned'} · ")
        text.append(task.title)
        facts = []
        if task.consecutive_failures:
            facts.append(f"✗{task.consecutive_failures} failures")
        if task.priority:
            facts.append(f"priority {task.priority}")
        if task.worker_pid:
            state = {True: "alive", False: "gone", None: "not checked"}[view.live if view else None]
            facts.append(f"worker pid {task.worker_pid} ({state})")
        facts.append(f"age {card_age(self.clock() - task.created_at)}")
        text.append(" · " + " · ".join(facts), style="dim")
        skip = self._held_back.get(task.id)
        if skip is not None:
            text.append(" · held back: ", style="bold yellow")
            text.append(skip_reason(skip))
        view = self.cards.get(task.id)
        for reason in view.reasons if view is not None else ():
            text.append(" · hermes: ", style="bold yellow")
            text.append(reason)
        detail.show(text)

    @on(CardList.Highlighted)
    def _card_highlighted(self, event: CardList.Highlighted) -> None:
        self._show_card_detail()

    def on_descendant_focus(self, event) -> None:
        if isinstance(event.widget, CardList) and event.widget.status not in self._window:
            self._size_columns(self.size.width, reveal=event.widget.status)
        self._show_card_detail()

    def _show_foreign_info(self) -> None:
        """hermes-agent's board: whose it is, how it changes, who dispatches it."""
        how = "read-only (`hermes` is not on PATH)" if self.service.capabilities.read_only else \
            f"changes go through {self.service.command}"
        from engine.kanban.boards import board_slug

        name = board_slug(self.home, self.db_path) or ""
        info = f"hermes-agent's board {name} ({self._shown_db_path()}) · {how} · hermes's gateway dispatches it"
        if self.gateway is not None and not self.gateway.running:
            info = f"{self.gateway.words} · hermes-agent's board {name} ({self._shown_db_path()}) · {how}"
        self._set_info(info)
        total = sum(self.counts.get(s, len(self._columns[s])) for s in self._shown_statuses(False))
        self.set_status(f"hermes board: {count_of(total, 'card')}" + (", read-only" if self.service.capabilities.read_only else ""))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """None (the Footer shows the key dimmed, the key does nothing) for a change to a
        board that is read-only here, and for dispatching a board that is not ours to
        dispatch; the info line says why, and the board's opening said it once."""
        return None if self._unavailable_why(action) is not None else True

    def _unavailable_why(self, action: str) -> str | None:
        """Why ``action`` is unavailable here (check_action dims its key), in one line."""
        if self.service is None:
            return None
        if action in CHANGES and self.service.capabilities.read_only:
            return self.service.read_only_reason
        if action == "dispatch_now" and not self.service.capabilities.dispatchable:
            return "D does nothing here: hermes-agent's own gateway dispatches this board, not hermes-tui"
        return None

    def on_key(self, event) -> None:
        """A dimmed key pressed says why it does nothing (Textual would drop it silently)."""
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            action = binding.action.partition("(")[0]
            why = self._unavailable_why(action)
            if why is not None:
                event.stop()
                event.prevent_default()
                self.notify(why, severity="warning", timeout=5, markup=False)
                return

    def _refused_here(self) -> bool:
        """True (and said in one line) when the open board takes no change from here."""
        if self.service is not None and self.service.capabilities.read_only:
            self.notify(self.service.read_only_reason, severity="warning", timeout=5, markup=False)
            return True
        return False

    def _set_info(self, info: str) -> None:
        """The info line is redrawn only when its words change (every refresh asks)."""
        if info != self._info:
            self._info = info
            self.query_one("#board-info", Static).update(Text(info, no_wrap=True, overflow="ellipsis"),
                                                         layout=False)  # one line, always

    # -- the dispatcher's results (the app's dispatch loop ticks) ---------------------------------

    def _board_label(self) -> str:
        """``board SLUG · `` when the switcher shows a board other than the default one."""
        if self.board_override is None:
            return ""
        from engine.kanban.boards import board_slug

        return f"board {board_slug(self.home, self.db_path) or self._shown_db_path()} · "

    def notify(self, message: str, **kwargs) -> None:
        """Every toast of the board: a card's text in it (a title, a worker's error in a
        warning) is masked as the card itself is (engine.processes.redact)."""
        super().notify(maybe_redact(message, self.settings.processes.redact), **kwargs)

    def on_board_pane_dispatch_stopped(self, message: DispatchStopped) -> None:
        self.dispatch_stopped = message.reason
        self._show_info()

    def on_board_pane_tick_done(self, message: TickDone) -> None:
        # The app's dispatch loop ticks every board of ours: only the shown board's ticks
        # are this pane's (after the switcher too, and back: issue 36).
        if not self._shows(message.board):
            return
        result = message.result
        again = result is self.last_result  # the dispatcher's quiet tick, given again: its words stand
        self.last_result = result
        self.last_tick_at = self.clock()
        if again:
            self._show_info()  # its time only
            return
        for warning in result.warnings:
            self.notify(warning, severity="warning", timeout=8, markup=False)
        self._request_refresh()  # the board's version says whether the tick changed a card
        self._take_tick(result)

    def _shows(self, board: object) -> bool:
        """Whether ``board`` (a ticked board's location; None: the default board) is the one shown."""
        if board is None:
            return self.board_override is None
        shown = self.db_path
        if isinstance(board, Path) and isinstance(shown, Path):
            return os.path.realpath(board) == os.path.realpath(shown)
        return shown is not None and str(board) == str(shown)

    @work(exclusive=True, group="board-tick", description="the tick's held-back words")  # not repr(result)
    async def _take_tick(self, result: DispatchResult) -> None:
        """The tick's held-back words and reasons by card, made in a thread (a tick over
        100,000 waiting cards holds 100,000 reasons); a newer tick supersedes an older one."""
        self._held_back, self._held_back_words, self.last_held_back = await asyncio.to_thread(_tick_summary, result)
        self._show_info()

    def action_dispatch_now(self) -> None:
        if self.error:
            self.notify(self.error, severity="error", markup=False)
            return
        if self.service is not None and not self.service.capabilities.dispatchable:
            self.notify(f"{self._shown_db_path()} is hermes-agent's board: hermes's gateway dispatches it, "
                        "hermes-tui never does", severity="warning", timeout=5, markup=False)
            return
        self.notify("dispatching…", timeout=2)
        self.post_message(self.DispatchRequested(self.db_path if self.board_override is not None else None))

    # -- switching boards ------------------------------------------------------------------------

    @work(exclusive=True, group="board-switch")
    async def action_switch_board(self) -> None:
        """List every board of the home (off the UI thread) and offer them."""
        from engine.kanban.boards import list_boards
        from widgets.board.board_switcher import BoardSwitchScreen

        boards = await list_boards(self.home, self.settings)
        if not boards:
            self.notify("no board in this home yet: press n to create the first card", timeout=4)
            return
        self.app.push_screen(BoardSwitchScreen(boards, self.db_path if isinstance(self.db_path, Path) else None),
                             self._switch_to)

    def _switch_to(self, path: Path | None) -> None:
        if path is not None and path != self.db_path:
            self._reopen(path)

    async def switch_to(self, path: Path) -> None:
        """Show the board at ``path`` (the attention list's Enter on another board's item);
        returns once it is open (its cards are asked for, not yet read)."""
        if path != self.db_path:
            await self._reopen(path).wait()

    @work(exclusive=True, group="board-open", description="open the board switched to")
    async def _reopen(self, path: Path) -> None:
        """Show another board: close this one's service, forget its cards, open that one."""
        self.workers.cancel_group(self, "board-refresh")  # a read of the old board must not land on the new one
        # A refresh cancelled before it started never ends its run: the old refresher
        # would stay "running" and never refresh again. Refreshes start anew here.
        self._refresher = self._new_refresher()
        async with self._open_lock:
            self._service = None
            await self.link.switch(path)
            self.last_result, self._held_back = None, {}
            self.remove_class("-failed")
            for status in [s for s in self._columns if s not in STATUSES]:
                del self._columns[status]
                await self.query_one(f"#column-{status}").remove()
            self.statuses = STATUSES
            self.apply([], {})
            await self._open_locked(create=False)
        self.refresh_board()

    # -- selection -----------------------------------------------------------------------------

    def _focused_list(self) -> CardList | None:
        focused = self.app.focused
        return focused if isinstance(focused, CardList) else None

    @property
    def selected(self) -> Task | None:
        cards = self._focused_list()
        if cards is None or cards.highlighted_option is None:
            return None
        view = self.cards.get(cards.highlighted_option.id or "")
        return view.task if view else None

    def _need_selected(self) -> Task | None:
        task = self.selected
        if task is None:
            self.notify("no card selected", severity="warning", timeout=3)
        return task

    def action_column(self, step: int) -> None:
        """The next shown column to the left or right; at the first or last one, stay."""
        shown = list(self._shown_statuses(self.show_archived))
        current = self._focused_list()
        if current is None or current.status not in shown:
            index = 0
        else:
            index = shown.index(current.status) + step
            if not 0 <= index < len(shown):
                return
        status = shown[index]
        self._size_columns(self.size.width, reveal=status)
        # At once, not after the next refresh (Widget.focus): a second key pressed right
        # after the first moves on from the column the first one reached.
        self.screen.set_focus(self.query_one(f"#cards-{status}", CardList))

    # -- actions ------------------------------------------------------------------------------

    def action_new_card(self) -> None:
        if self.error:
            self.notify(self.error, severity="error", markup=False)
            return
        if self._refused_here():
            return
        from widgets.board.board_modals import NewCardScreen

        k = self.settings.kanban
        screen = NewCardScreen(self.profiles, k.default_assignee)
        self.app.push_screen(screen, self._create)

    def _create(self, new: NewTask | None) -> None:
        if new is not None:
            self._run_change(self._create_card(new))

    async def _create_card(self, new: NewTask) -> str:
        from engine.kanban.backend import StoreError

        if await self._ensure_board(create=True) is None:
            raise StoreError(self.error or "the board cannot be opened")
        task = await self.service.create(new, actor="app")
        self._follow = task.id  # the new card is selected where it lands
        return f"Created {task.id} ({task.status})"

    def action_details(self) -> None:
        task = self._need_selected()
        if task is None or self.service is None:
            return

        from widgets.board.board_modals import CardDetailsScreen

        def closed(answer: str | None) -> None:
            if answer == "output":
                self._open_output(task.id)

        self.app.push_screen(CardDetailsScreen(self.service, task.id, self.service.log_path(task.id), self.clock,
                                               self.settings.processes.redact),
                             closed)

    def action_open_output(self) -> None:
        task = self._need_selected()
        if task is not None:
            self._open_output(task.id)

    def _open_output(self, task_id: str) -> None:
        self._find_process(task_id)

    @work(group="board-output", description="find the worker's output")
    async def _find_process(self, task_id: str) -> None:
        if self.service.capabilities.worker_log_files:  # hermes's worker writes its own log: follow that file
            path = self.service.log_path(task_id)
            if not await asyncio.to_thread(path.is_file):
                self.notify(f"{task_id} has no worker log yet ({self._shown_log(path)})", severity="warning",
                            timeout=4, markup=False)
                return
            self.post_message(self.OpenWorkerLog(path, task_id))
            return
        runs = await self.service.runs_of(task_id)
        session_id = next((r.session_id for r in reversed(runs) if r.session_id), None)
        if session_id is not None:
            self.post_message(self.OpenWorkerOutput(session_id, task_id))
            return
        log = self.service.log_path(task_id)  # a worker started elsewhere (hermes's gateway) logs here
        if await asyncio.to_thread(log.is_file):
            from widgets.board.worker_log import WorkerLogScreen

            self.app.push_screen(WorkerLogScreen(task_id, log, self._shown_home_path(log)))
            return
        self.notify(f"{task_id} has no worker output yet", severity="warning", timeout=4, markup=False)

    def _shown_log(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.home.root))
        except ValueError:
            return str(path)

    def action_move(self, step: int) -> None:
        if self._busy_with_change(lambda: self.action_move(step)):
            return
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        from engine.kanban import transitions as tr

        target = tr.next_move(task.status, step)
        if target is None:
            self.notify(cannot_move_words(task, step), severity="warning", timeout=4)
            return
        if task.status == BLOCKED:
            self.action_unblock()
            return
        if task.status == RUNNING:
            shown = tr.Expected.of(task)
            self._confirm(move_running_confirm(task, target, self.settings.kanban.terminal_worker_grace_seconds),
                          "move", lambda: self.service.move(task.id, target, expected=shown), follow=task.id)
            return
        if target == DONE:  # the board has no move out of done: ask first
            self._confirm(move_done_confirm(task), "move", lambda: self.service.move(task.id, target),
                          follow=task.id)
            return
        self._run_change(self._move(task.id, target), follow=task.id)

    async def _move(self, task_id: str, target: str) -> str:
        return change_words("move", await self.service.move(task_id, target))

    def action_assign(self) -> None:
        if self._busy_with_change(self.action_assign):
            return
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        from widgets.board.board_modals import AssignScreen

        def chosen(name: str | None) -> None:
            if name is not None:
                self._run_change(self._assign(task.id, name or None), follow=task.id)

        self.app.push_screen(AssignScreen(task.id, task.assignee, self.profiles), chosen)

    async def _assign(self, task_id: str, profile: str | None) -> str:
        result = await self.service.assign(task_id, profile)
        return assign_words(result.task_id, profile)

    def action_reclaim(self) -> None:
        if self._busy_with_change(self.action_reclaim):
            return
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if (refused := refused_words("reclaim", task)) is not None:
            self.notify(refused, severity="warning")
            return
        from engine.kanban.transitions import Expected, stop_plan

        shown = Expected.of(task)  # approval acts on this run and pid only
        words = reclaim_confirm(task, stop_plan(task), self.settings.processes.kill_grace_seconds,
                                by_hermes=self.service is not None and not self.service.capabilities.signals_workers)
        self._confirm(words, "reclaim",
                      lambda: self.service.reclaim(task.id, reason="reclaimed in the app", expected=shown),
                      follow=task.id)

    def action_archive(self) -> None:
        if self._busy_with_change(self.action_archive):
            return
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if (refused := refused_words("archive", task)) is not None:
            self.notify(refused, severity="warning")
            return
        from engine.kanban.transitions import Expected, stop_plan

        shown = Expected.of(task)
        words = archive_confirm(task, stop_plan(task), self.settings.processes.kill_grace_seconds)
        self._confirm(words, "archive", lambda: self.service.archive(task.id, expected=shown), follow=task.id)

    def action_unblock(self) -> None:
        if self._busy_with_change(self.action_unblock):
            return
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if (refused := refused_words("unblock", task)) is not None:
            self.notify(refused, severity="warning")
            return
        self._confirm(unblock_confirm(task), "unblock", lambda: self.service.unblock(task.id), follow=task.id)

    def action_toggle_archived(self) -> None:
        self.show_archived = not self.show_archived
        self.set_class(self.show_archived, "-show-archived")
        self._size_columns(self.size.width, reveal=ARCHIVED if self.show_archived else None)
        focused = self._focused_list()
        if focused is not None and focused.status not in self._window:
            self.focus_target.focus()
        self.refresh_board()

    # -- running changes ---------------------------------------------------------------------------

    def _confirm(self, words: Confirm, verb: str, change, follow: str | None = None) -> None:
        """Ask in ``words``, then run ``change()`` (a coroutine giving a TransitionResult)
        and say what it did in the words of ``verb`` (wording.change_words); ``follow``: as
        in ``_run_change``."""
        from widgets.common.confirm import ConfirmModal

        async def described() -> str:
            return change_words(verb, await change())

        def answered(yes_: bool | None) -> None:
            if yes_:
                self._run_change(described(), follow=follow)

        self.app.push_screen(ConfirmModal(words.title, words.body, words.yes), answered)

    def _run_change(self, coro, follow: str | None = None) -> None:
        """Run a change (a coroutine giving the words that say what it did); ``follow``:
        the card it acts on, selected in its new column once a read shows the change, keys
        that act on the selection waiting until then."""
        self._follow, self._follow_from = follow, None
        self._change(coro)

    @work(group="board-change", description="a change of a card")
    async def _change(self, coro) -> None:
        from engine.kanban.backend import BoardGone, StoreError

        try:
            message = await coro
        except BoardGone as exc:  # said once, in place of the columns
            self._give_up_following("the board is gone")
            if not self._gone():
                self._board_gone(exc)
            self.notify(str(exc), severity="error", timeout=6, markup=False)
            return
        except StoreError as exc:
            self._give_up_following("the change failed")
            self.notify(str(exc), severity="error", timeout=6, markup=False)
            return
        if self._follow is not None:
            self._follow_from = self._reads_started + 1  # a read that starts from now on shows it
        self.notify(message, timeout=4, markup=False)
        self.refresh_board()

    def _give_up_following(self, why: str) -> None:
        if self._follow is not None:
            self._follow, self._follow_from = None, None
            self._drop_deferred(why)


def shown_task(t: Task, redact: bool = True) -> Task:
    """The card as the board shows it: its outside text (title, assignee, body, last
    error, result) with secrets masked (``mask_task``) and control characters as visible
    escapes (``\x1b``), so a title holding an escape sequence is shown, never acted on
    by the terminal."""
    t = mask_task(t, redact)

    def lines(text: str | None) -> str | None:
        return None if text is None else escape_text(text, keep_lines=True)

    shown = {"title": escape_text(t.title), "assignee": None if t.assignee is None else escape_text(t.assignee),
             "body": escape_text(t.body, keep_lines=True), "last_failure_error": lines(t.last_failure_error),
             "result": lines(t.result)}
    if all(value == getattr(t, name) for name, value in shown.items()):
        return t  # nothing to escape (nearly every card): no copy, which is most of a big board's read
    return replace(t, **shown)


def _tick_summary(result: DispatchResult) -> tuple[dict, str, str]:
    """Thread side of a tick's result: card id -> why it was held back, the line in
    words, and its code line (``held_back``)."""
    return {skip.task_id: skip for skip in result.skipped}, held_back_words(result), result.held_back


def _liveness(t: Task) -> bool | None:
    """Whether the card's worker is verified alive (reads /proc: call it in a thread)."""
    if not t.worker_pid:
        return None
    from engine import identity
    from engine.kanban.workers import is_host_local

    if t.worker_pid and is_host_local(t.claim_lock) and identity.is_verifiable(t.worker_started_at):
        return identity.liveness(t.worker_pid, t.worker_started_at) is identity.Liveness.ALIVE
    return None


def _with_liveness_views(views: list[CardView]) -> list[CardView]:
    """The same cards with their worker's liveness checked again (in a thread)."""
    return [replace(v, live=_liveness(v.task)) for v in views]


def _prepare(old: dict[str, CardView], tasks: list[Task], statuses: tuple[str, ...],
             views: list[CardView] | None = None, reasons: dict[str, tuple[tuple[str, ...], str]] | None = None,
             redact: bool = True):
    """Thread side of a refresh: the card views (escaped text, worker liveness), each one
    equal to the card shown now replaced by that very object (so it is not drawn again),
    each column's ids with their positions, and the cards that have a worker."""
    cards: dict[str, CardView] = {}
    by_status: dict[str, list[str]] = {s: [] for s in statuses}
    workers = []
    for n, t in enumerate(tasks):
        if views is not None:
            view = views[n]
        else:
            words, short = reasons.get(t.id, ((), "")) if reasons else ((), "")
            view = CardView(shown_task(t, redact), _liveness(t), words, short)
        shown = old.get(t.id)
        cards[t.id] = shown if shown == view else view
        by_status.setdefault(t.status, []).append(t.id)
        if t.worker_pid:
            workers.append(t.id)
    columns = {}
    for status, ids in by_status.items():
        frozen = tuple(ids)
        columns[status] = (frozen, {card_id: n for n, card_id in enumerate(frozen)} if len(frozen) > 1000 else None)
    return cards, columns, tuple(workers)
