"""The kanban board pane: one column per status, cards with their worker's pid and a
live marker, and keys for every move.

The pane renders and handles keys; it does not dispatch. The app's dispatch loop
(``hermes_tui/dispatch_loop.py``) ticks the board and sends each result here as a
:class:`BoardPane.TickDone` message; "dispatch now" asks the app with
:class:`BoardPane.DispatchRequested`. The board is reached only through the process's
shared :class:`engine.kanban.service.BoardService`.

Nothing here blocks the UI: the board is read and changed on its connection's own
thread, liveness checks run in threads, and the columns are updated by keyed diff
(only changed cards are redrawn). Every outside text (titles, paths, errors) is shown
as plain text, never parsed as markup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.describe import mask_task
from engine.kanban.statuses import ARCHIVED, BLOCKED, RUNNING, STATUSES
from engine.kanban.wording import assign_words, change_words, held_back_words, skip_reason
from engine.processes.redact import escape_controls, maybe_redact
from engine.text import escape_text, human_duration
from widgets.fit_table import DetailLine
from widgets.pane import EmptyState, Pane
from widgets.partial_repaint import PromptList

# The store, the transitions, the workers' checks and the dialogs are
# imported where they are first used: a home without a board never needs them, and
# the first frame does not wait for them.
if TYPE_CHECKING:
    from engine.kanban.models import DispatchResult, NewTask, Task
    from engine.kanban.service import BoardService

COLUMNS = tuple(s for s in STATUSES if s != ARCHIVED)
MIN_COLUMN_WIDTH = 22
RECENT_FINISHED = 100  # the done/archived columns show their newest cards only
LISTENING_REFRESH_EVERY = 10  # a board that announces changes is re-read in full this rarely


@dataclass(frozen=True)
class CardView:
    """What one card shows; compared to decide whether its option needs redrawing."""

    task: Task
    live: bool | None  # True verified alive, False gone, None no worker / not ours to check

    def prompt(self, now: float) -> Text:
        t = self.task
        text = Text(no_wrap=False, overflow="ellipsis")
        text.append(t.id, style="bold")
        if t.worker_pid:
            marker, style = {True: ("●", "green"), False: ("○", "red"), None: ("◌", "dim")}[self.live]
            text.append(f"  {marker} {t.worker_pid}", style=style)
        text.append("\n" + t.title)
        meta = [t.assignee or "unassigned", human_duration(now - t.created_at)]
        if t.consecutive_failures:
            meta.append(f"✗{t.consecutive_failures}")
        if t.priority:
            meta.append(f"p{t.priority}")
        text.append("\n" + " · ".join(meta), style="dim")
        return text


class CardList(PromptList):
    """The cards of one column (option ids = card ids); a card whose age ticks repaints alone."""

    def __init__(self, status: str) -> None:
        super().__init__(id=f"cards-{status}")
        self.status = status


class BoardColumn(Vertical):
    def __init__(self, status: str) -> None:
        super().__init__(id=f"column-{status}", classes="board-column")
        self.status = status

    def compose(self) -> ComposeResult:
        yield Label(self.status.upper(), classes="column-title")
        yield CardList(self.status)


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
    ]

    DEFAULT_CSS = """
    BoardPane #board-info { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    BoardPane #board-detail { max-height: 2; }
    BoardPane #board-columns { height: 1fr; }
    BoardPane .board-column { width: 1fr; min-width: 18; height: 1fr; margin-right: 1; }
    BoardPane #column-archived { display: none; }
    BoardPane.-show-archived #column-archived { display: block; }
    BoardPane .column-title { width: 1fr; height: 1; text-style: bold; color: $text-muted; background: $panel; padding: 0 1; }
    BoardPane CardList { height: 1fr; border: none; padding: 0; background: $surface; }
    BoardPane CardList:focus { border: none; background: $boost; }
    /* The selected card stands out: a solid bar in the focused column, a dim one elsewhere. */
    BoardPane CardList > .option-list--option-highlighted { background: $panel-lighten-1; text-style: none; }
    BoardPane CardList:focus > .option-list--option-highlighted {
        background: $accent 60%; color: $text; text-style: bold;
    }
    BoardPane EmptyState { display: none; }
    BoardPane.-failed EmptyState { display: block; }
    BoardPane.-failed #board-columns { display: none; }
    """

    # The clock the ages are computed with (tests pin it for snapshots).
    clock: Callable[[], float] = staticmethod(time.time)

    class OpenWorkerOutput(Message):
        """Show a worker's process session in the processes pane."""

        def __init__(self, process_id: str, task_id: str) -> None:
            super().__init__()
            self.process_id = process_id
            self.task_id = task_id

    class TickDone(Message):
        """A dispatch tick ended: sent to the pane by the app's dispatch loop."""

        def __init__(self, result: DispatchResult) -> None:
            super().__init__()
            self.result = result

    class DispatchRequested(Message):
        """The user asked for a tick now (the app's dispatch loop runs it)."""

    def __init__(self, *, home: HomeLayout, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        from engine.kanban import board_location_at_a_glance

        self.home = home
        self.settings = settings
        # Known now unless <home>/kanban.db exists (whose it is, SQLite tells, off the UI thread).
        try:
            self.db_path = board_location_at_a_glance(home, settings)
        except ValueError:  # a malformed $HERMES_KANBAN_DATABASE_URL: said when opening
            self.db_path = None
        self.service: BoardService | None = None
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
        self.last_tick_at: float | None = None
        self.error: str | None = None
        self.unreachable: str | None = None  # the board's server is away: retried on every refresh
        self.listening = False  # a server board announces its changes (no need to wait for the timer)
        self._timer_ticks = 0
        self._info: str | None = None  # what the info line shows

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("", id="board-info")
        yield EmptyState("", id="board-error")
        with HorizontalScroll(id="board-columns"):
            for status in STATUSES:
                yield BoardColumn(status)
        yield DetailLine(id="board-detail")

    def column_ids(self, status: str) -> tuple[str, ...]:
        """The ids of the cards shown in a status's column, top to bottom."""
        return tuple(self._columns.get(status, ()))

    @property
    def focus_target(self):
        focused = self.app.focused if self.is_attached else None
        if isinstance(focused, CardList) and self in focused.ancestors:
            return focused
        for status in self._shown_statuses(False):
            if self._columns[status]:
                return self.query_one(f"#cards-{status}", CardList)
        return self.query_one("#cards-ready", CardList)

    async def on_mount(self) -> None:
        # The board spans the screen's width in every layout of the app: size the columns
        # for that before the first frame, not after it (which costs a second layout);
        # on_resize corrects any other case, and changes nothing when this was right.
        self._size_columns(self.app.size.width - self.styles.gutter.width)
        self._show_info()
        self.open_board()

    def on_resize(self) -> None:
        self._size_columns(self.size.width)

    def _size_columns(self, width: int) -> None:
        """Columns share the width; below MIN_COLUMN_WIDTH each they scroll sideways."""
        shown = len(self._shown_statuses(self.show_archived))
        column_width = max(MIN_COLUMN_WIDTH, (width - 1) // shown - 1)
        for column in self.query(BoardColumn):
            column.styles.width = column_width

    async def on_unmount(self) -> None:
        if self.service is not None:
            try:
                await self.service.close()
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
        if self.service is not None or self.error:
            return self.service
        async with self._open_lock:  # refresh and create may both ask at once
            return await self._open_locked(create)

    async def _open_locked(self, create: bool) -> BoardService | None:
        if self.service is not None or self.error:
            return self.service
        from engine.kanban.service import BoardService
        from engine.kanban.store import StoreError

        try:
            self.db_path = await asyncio.to_thread(BoardService.path_for, self.home, self.settings)
            exists = await asyncio.to_thread(BoardService.exists, self.home, self.settings)
        except ValueError as exc:  # a malformed board URL (its message holds no password)
            self._fail(f"The board cannot be used: the board database URL {exc}")
            return None
        if not exists and not create:
            self._show_info()
            return None
        from engine.kanban.pg.errors import BoardUnreachable, NoBoardYet

        try:
            service = await BoardService.open(self.home, self.settings, create=create, clock=self.clock)
            await self._use_statuses(await service.statuses())
        except BoardUnreachable as exc:
            self._unreachable(exc)
            return None
        except NoBoardYet:  # an empty database: like a missing board file, until the first card
            self.unreachable = None
            self._show_info()
            return None
        except (StoreError, OSError, ValueError) as exc:
            self._fail(f"The board cannot be used: {exc}")
            return None
        self.service = service
        self.db_path = service.path
        if service.read_only:  # said once, when the board opens
            self.notify(service.read_only_reason, severity="warning", timeout=8, markup=False)
        await self._listen()
        self._show_info()
        return self.service

    async def _use_statuses(self, statuses: tuple[str, ...]) -> None:
        """Give every status of the board a column (hermes's board has triage, scheduled
        and whatever else its cards hold), in the board's order."""
        missing = [s for s in statuses if s not in self._columns]
        for status in missing:
            self._columns[status] = []
        self.statuses = tuple(statuses) + tuple(s for s in STATUSES if s not in statuses)
        if not missing:
            return
        holder = self.query_one("#board-columns", HorizontalScroll)
        for status in missing:
            following = [s for s in statuses[statuses.index(status) + 1:] if s not in missing]
            before = self.query_one(f"#column-{following[0]}") if following else None
            await holder.mount(BoardColumn(status), before=before)
        self.on_resize()

    def _shown_statuses(self, with_archived: bool) -> tuple[str, ...]:
        return tuple(s for s in self.statuses if with_archived or s != ARCHIVED)

    async def _listen(self) -> None:
        """Refresh as soon as any host changes the board (a server board); a file board
        is read on the refresh timer."""
        from engine.kanban.store import StoreError

        if self.service is None:
            return
        try:
            self.listening = await self.service.listen(self._board_changed)
        except StoreError:
            self.listening = False  # polled until the next refresh listens again

    def _refresh_on_timer(self) -> None:
        """Read the whole board on every timer tick, unless the board announces its
        changes: then only every LISTENING_REFRESH_EVERY-th tick (ages, worker markers),
        and while the server is away, every tick (each one retries)."""
        self._timer_ticks += 1
        if self.listening and self.unreachable is None and self._timer_ticks % LISTENING_REFRESH_EVERY:
            return
        self.refresh_board()

    def _board_changed(self) -> None:
        if self.is_attached:
            self.refresh_board()

    def _unreachable(self, exc: Exception) -> None:
        """The server is away: say so and keep the last cards; every refresh retries."""
        self.unreachable = str(exc)
        self.listening = False
        self._show_info()

    def _fail(self, message: str) -> None:
        self.error = message
        try:
            self.query_one("#board-error", EmptyState).update(Text(message))
        except NoMatches:
            return
        self.add_class("-failed")
        self.set_status("board unusable")

    # -- reading the board ------------------------------------------------------------------

    @work(exclusive=True, group="board-refresh")
    async def refresh_board(self) -> None:
        if await self._ensure_board(create=False) is None:  # someone may have created it since
            return
        from engine.kanban.pg.errors import BoardUnreachable
        from engine.kanban.store import StoreError

        statuses = self._shown_statuses(self.show_archived)
        try:
            view = await self.service.view(statuses, RECENT_FINISHED)
        except BoardUnreachable as exc:
            self._unreachable(exc)
            return
        except StoreError as exc:
            self._fail(f"The board cannot be read: {exc}")
            return
        except Exception as exc:  # sqlite errors from a file changed under us
            self.notify(f"board refresh failed: {exc}", severity="error", timeout=5, markup=False)
            return
        if self.unreachable is not None:  # back: announce it and listen again
            self.unreachable = None
            self.notify("board reachable again", timeout=3)
        if not self.listening:
            await self._listen()
        views = await asyncio.to_thread(_with_liveness, list(view.tasks), self.settings.processes.redact)
        self.apply(views, view.counts)

    def apply(self, views: list[CardView], counts: dict[str, int] | None = None) -> None:
        """Keyed diff: redraw only changed cards; rebuild a column only when its order changed."""
        try:
            self._apply(views, counts)
        except NoMatches:  # a refresh finishing while the pane is being torn down
            pass

    def _apply(self, views: list[CardView], counts: dict[str, int] | None) -> None:
        now = self.clock()
        by_status: dict[str, list[CardView]] = {s: [] for s in self.statuses}
        for view in views:
            by_status.setdefault(view.task.status, []).append(view)
        old = self.cards
        self.cards = {v.task.id: v for v in views}
        self.counts = dict(counts) if counts is not None else {}
        with self.app.batch_update():
            for status in self.statuses:
                column = by_status[status]
                ids = [v.task.id for v in column]
                cards = self.query_one(f"#cards-{status}", CardList)
                if ids != self._columns[status]:
                    highlighted = cards.highlighted_option.id if cards.highlighted_option else None
                    options: list = []
                    for i, v in enumerate(column):
                        if i:
                            options.append(None)
                        prompt = v.prompt(now)
                        self._prompts[v.task.id] = prompt.plain
                        options.append(Option(prompt, id=v.task.id))
                    cards.set_options(options)
                    if highlighted in ids:
                        cards.highlighted = cards.get_option_index(highlighted)
                    elif ids and cards.highlighted is None:
                        cards.highlighted = 0
                    self._columns[status] = ids
                else:
                    for v in column:
                        prompt = v.prompt(now)
                        if self._prompts.get(v.task.id) != prompt.plain or old.get(v.task.id) != v:
                            cards.replace_option_prompt(v.task.id, prompt)
                            self._prompts[v.task.id] = prompt.plain
                title = self.query_one(f"#column-{status} .column-title", Label)
                total = (counts or {}).get(status, len(column))
                shown = f"{len(column)} of {total}" if total > len(column) else f"{len(column)}"
                text = f"{status.upper()} ({shown})"
                if title.content != text:  # fixed one-line size: a repaint, never a layout
                    title.update(text, layout=False)
        self._show_info()

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

    def _update_info(self) -> None:
        k = self.settings.kanban
        running = len(self._columns[RUNNING])
        if self.error:
            return
        if self.unreachable is not None:
            self._set_info(f"board unreachable, retrying: {self.unreachable}")
            self.set_status("board unreachable, retrying")
            return
        if self.service is None and self.db_path is None:
            self._set_info("Looking for the board…")
            return
        if self.service is None:
            self._set_info(f"No board yet ({self._shown_db_path()}): press n to create the first card.")
            self.set_status("no board yet")
            return
        if not self.service.dispatchable:
            self._show_foreign_info()
            return
        state = f"dispatcher every {k.dispatch_interval_seconds:g}s" if k.dispatch else "dispatcher off"
        if self.last_tick_at is not None:
            state += f", last tick {time.strftime('%H:%M:%S', time.localtime(self.last_tick_at))}"
            if self.last_result is not None and self.last_result.spawned:
                state += f": spawned {len(self.last_result.spawned)}"
        words = held_back_words(self.last_result) if self.last_result is not None else ""
        info = state + (f" · {words}" if words else "")
        self._set_info(info)  # cut with … when narrow (the selected card's reason is in full below)
        total = sum(self.counts.get(s, len(self._columns[s])) for s in self._shown_statuses(False))
        status = f"{total} cards, {running} running · {'dispatch on' if k.dispatch else 'dispatch off'}"
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
        text = Text()
        text.append(task.id, style="bold")
        text.append(f" · {task.status} · {task.assignee or 'unassigned'} · ")
        text.append(task.title)
        skip = self._held_back.get(task.id)
        if skip is not None:
            text.append(" · held back: ", style="bold yellow")
            text.append(skip_reason(skip))
        detail.show(text)

    @on(OptionList.OptionHighlighted)
    def _card_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_card_detail()

    def on_descendant_focus(self, event) -> None:
        self._show_card_detail()

    def _show_foreign_info(self) -> None:
        """hermes-agent's board: whose it is, how it changes, who dispatches it."""
        how = "read-only (`hermes` is not on PATH)" if self.service.read_only else \
            f"changes go through {self.service.command}"
        info = f"hermes-agent's board ({self._shown_db_path()}) · {how} · hermes's gateway dispatches it"
        self._set_info(info)
        total = sum(self.counts.get(s, len(self._columns[s])) for s in self._shown_statuses(False))
        self.set_status(f"hermes board: {total} cards" + (", read-only" if self.service.read_only else ""))

    def _refused_here(self) -> bool:
        """True (and said in one line) when the open board takes no change from here."""
        if self.service is not None and self.service.read_only:
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

    def notify(self, message: str, **kwargs) -> None:
        """Every toast of the board: a card's text in it (a title, a worker's error in a
        warning) is masked as the card itself is (engine.processes.redact)."""
        super().notify(maybe_redact(message, self.settings.processes.redact), **kwargs)

    def on_board_pane_tick_done(self, message: TickDone) -> None:
        result = message.result
        self.last_result = result
        self._held_back = {skip.task_id: skip for skip in result.skipped}
        self.last_tick_at = self.clock()
        self.last_held_back = result.held_back
        for warning in result.warnings:
            self.notify(warning, severity="warning", timeout=8, markup=False)
        self.refresh_board()
        self._show_info()

    def action_dispatch_now(self) -> None:
        if self.error:
            self.notify(self.error, severity="error", markup=False)
            return
        if self.service is not None and not self.service.dispatchable:
            self.notify(f"{self._shown_db_path()} is hermes-agent's board: hermes's gateway dispatches it, "
                        "hermes-tui never does", severity="warning", timeout=5, markup=False)
            return
        self.notify("dispatching…", timeout=2)
        self.post_message(self.DispatchRequested())

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
        shown = list(self._shown_statuses(self.show_archived))
        current = self._focused_list()
        index = shown.index(current.status) if current is not None and current.status in shown else 0
        target = self.query_one(f"#cards-{shown[(index + step) % len(shown)]}", CardList)
        target.focus()
        target.parent.scroll_visible()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_details()

    # -- actions ------------------------------------------------------------------------------

    def action_new_card(self) -> None:
        if self.error:
            self.notify(self.error, severity="error", markup=False)
            return
        if self._refused_here():
            return
        from widgets.board_modals import NewCardScreen

        k = self.settings.kanban
        screen = NewCardScreen(sorted(k.profiles), k.default_assignee)
        self.app.push_screen(screen, self._create)

    def _create(self, new: NewTask | None) -> None:
        if new is not None:
            self._run_change(self._create_card(new))

    async def _create_card(self, new: NewTask) -> str:
        from engine.kanban.store import StoreError

        if await self._ensure_board(create=True) is None:
            raise StoreError(self.error or "the board cannot be opened")
        task = await self.service.create(new, actor="app")
        return f"Created {task.id} ({task.status})"

    def action_details(self) -> None:
        task = self._need_selected()
        if task is None or self.service is None:
            return

        from widgets.board_modals import CardDetailsScreen

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

    @work(group="board-output")
    async def _find_process(self, task_id: str) -> None:
        runs = await self.service.runs_of(task_id)
        process_id = next((r.process_id for r in reversed(runs) if r.process_id), None)
        if process_id is None:
            self.notify(f"{task_id} has no worker output yet", severity="warning", timeout=4, markup=False)
            return
        self.post_message(self.OpenWorkerOutput(process_id, task_id))

    def action_move(self, step: int) -> None:
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        from engine.kanban import transitions as tr

        target = _next_allowed(task.status, step)
        if target is None:
            direction = "right" if step > 0 else "left"
            self.notify(f"{task.id} cannot move {direction} from {task.status} "
                        f"(allowed: {', '.join(tr.MOVES.get(task.status, ())) or 'none'})",
                        severity="warning", timeout=4)
            return
        if task.status == BLOCKED:
            self.action_unblock()
            return
        if task.status == RUNNING:
            body = (f"{task.id} \"{task.title}\" is running (worker pid {task.worker_pid or '-'}).\n\n"
                    f"Moving it to {target} ends its run now. The worker is not signalled: if it is still "
                    f"alive {self.settings.kanban.terminal_worker_grace_seconds:g}s after that, the dispatcher "
                    "stops it (SIGTERM, then SIGKILL).")
            self._confirm(f"Move {task.id} to {target}?", body, f"Move to {target}", "move",
                          lambda: self.service.move(task.id, target))
            return
        self._run_change(self._move(task.id, target))

    async def _move(self, task_id: str, target: str) -> str:
        return change_words("move", await self.service.move(task_id, target))

    def action_assign(self) -> None:
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        from widgets.board_modals import AssignScreen

        def chosen(name: str | None) -> None:
            if name is not None:
                self._run_change(self._assign(task.id, name or None))

        self.app.push_screen(AssignScreen(task.id, task.assignee, sorted(self.settings.kanban.profiles)), chosen)

    async def _assign(self, task_id: str, profile: str | None) -> str:
        result = await self.service.assign(task_id, profile)
        return assign_words(result.task_id, profile)

    def action_reclaim(self) -> None:
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if task.status != RUNNING:
            self.notify(f"{task.id} is {task.status}: only a running card can be reclaimed", severity="warning")
            return
        grace = self.settings.processes.kill_grace_seconds
        body = (f"{task.id} \"{task.title}\" goes back to ready and its failure counter "
                f"({task.consecutive_failures}) resets to 0.\n\n" + _worker_plan(task, grace))
        self._confirm(f"Reclaim {task.id}?", body, "Reclaim", "reclaim",
                      lambda: self.service.reclaim(task.id, reason="reclaimed in the app"))

    def action_archive(self) -> None:
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if task.status == ARCHIVED:
            self.notify(f"{task.id} is already archived", severity="warning")
            return
        grace = self.settings.processes.kill_grace_seconds
        body = f"{task.id} \"{task.title}\" moves from {task.status} to archived (hidden unless 'show archived')."
        if task.status == RUNNING:
            body += "\n\n" + _worker_plan(task, grace)
        self._confirm(f"Archive {task.id}?", body, "Archive", "archive", lambda: self.service.archive(task.id))

    def action_unblock(self) -> None:
        task = self._need_selected()
        if task is None or self._refused_here():
            return
        if task.status != BLOCKED:
            self.notify(f"{task.id} is {task.status}, not blocked", severity="warning")
            return
        body = (f"{task.id} \"{task.title}\" goes from blocked to ready (todo while a parent is open), and "
                f"its failure counter ({task.consecutive_failures}) resets to 0, so the dispatcher may run it "
                "again.")
        if task.last_failure_error:
            body += f"\n\nLast failure: {task.last_failure_error}"
        self._confirm(f"Unblock {task.id}?", body, "Unblock", "unblock", lambda: self.service.unblock(task.id))

    def action_toggle_archived(self) -> None:
        self.show_archived = not self.show_archived
        self.set_class(self.show_archived, "-show-archived")
        self.on_resize()
        self.refresh_board()

    # -- running changes ---------------------------------------------------------------------------

    def _confirm(self, title: str, body: str, yes: str, verb: str, change) -> None:
        """Ask, then run ``change()`` (a coroutine giving a TransitionResult) and say what
        it did in the words of ``verb`` (wording.change_words)."""
        from widgets.confirm import ConfirmModal

        async def described() -> str:
            return change_words(verb, await change())

        def answered(yes_: bool | None) -> None:
            if yes_:
                self._run_change(described())

        self.app.push_screen(ConfirmModal(title, body, yes), answered)

    @work(group="board-change")
    async def _run_change(self, coro) -> None:
        from engine.kanban.store import StoreError

        try:
            message = await coro
        except StoreError as exc:
            self.notify(str(exc), severity="error", timeout=6, markup=False)
            return
        self.notify(message, timeout=4, markup=False)
        self.refresh_board()


def _worker_plan(task: Task, grace: float) -> str:
    """Exactly what will happen to the card's worker, for the confirm dialog."""
    from engine.identity import Liveness, liveness
    from engine.kanban.workers import is_host_local

    if not task.worker_pid:
        return "No worker process is recorded for it: nothing is signalled."
    if not is_host_local(task.claim_lock):
        return f"Its worker pid {task.worker_pid} runs on another host ({task.claim_lock}): nothing is signalled."
    state = liveness(task.worker_pid, task.worker_started_at)
    if state is Liveness.ALIVE:
        return (f"Its worker pid {task.worker_pid} (identity verified) gets SIGTERM to its process group, then "
                f"SIGKILL after {grace:g}s if still alive.")
    if state is Liveness.UNVERIFIED_ALIVE:
        return f"Its worker pid {task.worker_pid} was never verified: it is NOT signalled."
    if state is Liveness.RECYCLED:
        return f"Pid {task.worker_pid} now belongs to another process: it is NOT signalled."
    return f"Its worker pid {task.worker_pid} has already exited: nothing is signalled."


def _next_allowed(status: str, step: int) -> str | None:
    """The nearest column in ``step``'s direction that a person may move the card to."""
    if status not in COLUMNS:
        return None
    from engine.kanban import transitions as tr

    allowed = tr.MOVES.get(status, ())
    i = COLUMNS.index(status) + step
    while 0 <= i < len(COLUMNS):
        if COLUMNS[i] in allowed:
            return COLUMNS[i]
        i += step
    return None


def shown_task(t: Task, redact: bool = True) -> Task:
    """The card as the board shows it: its outside text (title, assignee, body, last
    error, result) with secrets masked (``mask_task``) and control characters as visible
    escapes (``\x1b``), so a title holding an escape sequence is shown, never acted on
    by the terminal."""
    t = mask_task(t, redact)

    def lines(text: str | None) -> str | None:
        return None if text is None else escape_controls(text)

    return replace(t, title=escape_text(t.title), assignee=None if t.assignee is None else escape_text(t.assignee),
                   body=escape_controls(t.body), last_failure_error=lines(t.last_failure_error),
                   result=lines(t.result))


def _with_liveness(tasks: list[Task], redact: bool = True) -> list[CardView]:
    """Card views with the live marker (reads /proc: run in a thread)."""
    from engine import identity
    from engine.kanban.workers import is_host_local

    views = []
    for t in tasks:
        live = None
        if t.worker_pid and is_host_local(t.claim_lock) and identity.is_verifiable(t.worker_started_at):
            live = identity.liveness(t.worker_pid, t.worker_started_at) is identity.Liveness.ALIVE
        views.append(CardView(shown_task(t, redact), live))
    return views
