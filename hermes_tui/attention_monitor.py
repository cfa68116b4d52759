"""The app's attention list: computed off the UI thread, only when its inputs changed.

Every ``ui.refresh_seconds`` the monitor compares, on the UI thread and without any I/O,
what the panes last read (the board's blocked, review and running columns, the
sessions the processes pane listed and the notices it showed, the scratch pane's
survey) and what the app's dispatcher did, and, in a worker thread, the change markers
of every board of the home (engine.attention.boards: two stats a board); only when one
of them changed, or RECHECK_SECONDS have passed (claims running out, quarantine hours,
the prune log), it reads the few facts of the boards that changed (every board of the
home, not only the one shown) and computes the items in a thread. The result reaches
the app as :class:`AttentionMonitor.Updated`.

New items of the notifying kinds go to :class:`engine.attention.notify.Notifier`
(claimed once per home); its terminal sequences (bell, OSC 9/777) are written by the
app on the UI thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from textual.message import Message

from engine.attention import state
from engine.attention.boards import BoardsReader
from engine.attention.collect import Attention, Facts, compute, home_facts, scratch_facts
from engine.attention.notify import Notifier
from engine.attention.sources import DispatchWatch, read_watch_states
from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.statuses import BLOCKED, REVIEW, RUNNING

if TYPE_CHECKING:
    from textual.app import App

RECHECK_SECONDS = 30.0
HOME_CHECK_SECONDS = 600.0


class AttentionMonitor:
    class Updated(Message):
        """The items of one computation, and the terminal sequences its notices need."""

        def __init__(self, attention: Attention, sequences: list[str]) -> None:
            super().__init__()
            self.attention = attention
            self.sequences = sequences

    def __init__(self, app: App, home: HomeLayout, settings: Settings, *, clock=time.time) -> None:
        self.app = app
        self.home = home
        self.settings = settings
        self.clock = clock
        self.dispatch = DispatchWatch()  # the default board's ticks
        self.board_dispatch: dict[str, DispatchWatch] = {}  # each named board's, by slug
        self.boards = BoardsReader(home, settings)
        self._markers: tuple | None = None
        self._looking = False
        self._outbox: list[str] = []
        self.notifier = Notifier(home, settings, terminal=self._outbox.append, clock=clock)
        self.attention = Attention((), (), frozenset())
        self.computations = 0
        self._signature: tuple | None = None
        self._last_full = float("-inf")
        self._warnings: tuple | None = None
        self._warnings_at = float("-inf")
        self._running = False
        self._again = False
        self._dismissals = 0
        self._flush_timer = None
        self._unapplied = 0  # Updated messages posted, not yet handled by the app

    # -- when ------------------------------------------------------------------------------

    def start(self) -> None:
        self.app.set_interval(max(0.2, self.settings.ui.refresh_seconds), self.check)
        self.app.call_after_refresh(self.check)

    def _inputs(self) -> tuple:
        """What the panes last read, as cheap values (no I/O)."""
        app = self.app
        try:
            board = app.pane("board")
            processes = app.pane("processes")
            scratch = app.pane("scratch")
        except Exception:  # not composed yet, or torn down
            return ()
        return (
            tuple(board.column_ids(BLOCKED)), tuple(board.column_ids(REVIEW)), tuple(board.column_ids(RUNNING)),
            tuple(sorted(getattr(board, "counts", {}).items())),
            getattr(processes, "sessions_version", 0),  # not each session's status: 1,000 every second
            len(getattr(processes, "notifications", ())),
            id(getattr(scratch, "last_survey", None)),
            self.dispatch.version, tuple(w.version for w in self.board_dispatch.values()), self._dismissals,
        )

    def check(self) -> None:
        """Compute again if an input changed (or it is time for the periodic look)."""
        now = time.monotonic()
        signature = self._inputs()
        if signature == self._signature and now - self._last_full < RECHECK_SECONDS:
            self._look_at_boards()
            return
        self._signature = signature
        self._last_full = now
        self.request()

    def _look_at_boards(self) -> None:
        """Compute again when a board of the home changed (its change marker, taken in a
        thread: the boards the panes do not show change too)."""
        if self._looking or self._running:
            return
        self._looking = True

        async def look() -> None:
            try:
                markers = await asyncio.to_thread(self.boards.markers)
            finally:
                self._looking = False
            if markers != self._markers:
                self.request()

        self.app.run_worker(look, group="attention-boards", exit_on_error=False,
                            description="the boards' change markers")

    @property
    def current(self) -> bool:
        """Nothing changed since the last computation, and the app has shown it (for a
        snapshot of the whole screen)."""
        return self._signature == self._inputs() and not self._running and not self._unapplied

    def applied(self) -> None:
        self._unapplied = max(0, self._unapplied - 1)

    def request(self) -> None:
        if self._running:
            self._again = True
            return
        self._running = True
        # The coroutine function, not a coroutine: a worker cancelled before it starts (the
        # app quitting) leaves no coroutine that was never awaited.
        self.app.run_worker(self._computations, group="attention", exit_on_error=False,
                            description="the attention items")

    def _watch_of(self, board: str | None) -> DispatchWatch:
        """What the dispatcher did on ``board`` (None: the default board), tick after tick."""
        if board is None:
            return self.dispatch
        watch = self.board_dispatch.get(board)
        if watch is None:
            watch = self.board_dispatch[board] = DispatchWatch()
        return watch

    def tick_done(self, result, board: str | None = None) -> None:
        self._watch_of(board).tick_done(result, self.clock())

    def tick_failed(self, error: str, board: str | None = None) -> None:
        self._watch_of(board).tick_failed(error, self.clock())
        self.check()

    # -- computing ------------------------------------------------------------------------------

    async def _computations(self) -> None:
        try:
            while True:
                self._again = False
                await self._compute_once()
                if not self._again:
                    return
        finally:
            self._running = False

    async def _compute_once(self) -> None:
        now = self.clock()
        problems: list[str] = []
        boards = None
        try:
            self._markers = await asyncio.to_thread(self.boards.markers)  # before the reads: a later change is seen
            boards, board_problems = await self.boards.read(now)
            problems += board_problems
        except Exception as exc:  # the boards cannot be listed: the pane says why; their items are not judged
            problems.append(f"boards: {exc}")
        try:
            processes = self.app.pane("processes")
            scratch = self.app.pane("scratch")
        except Exception:
            return
        sessions = tuple(getattr(processes, "sessions", {}).values())
        listing = getattr(scratch, "last_survey", None)  # the pane keeps counts and rows, not reports
        survey = None
        if listing is not None:
            from engine.attention.sources import shown_survey

            survey = shown_survey(listing.now, self.settings.scratch.idle_hours, scratch.idle_entries(),
                                  tuple(listing.quarantine))
        attention = await asyncio.to_thread(self._compute_in_thread, boards, sessions, survey, problems, now)
        for line in state.take_warnings():  # a state file set aside: said once (here, on the app's loop)
            self.app.notify(line, severity="warning", timeout=10, markup=False)
        sequences, self._outbox[:] = list(self._outbox), []
        self.computations += 1
        self._unapplied += 1
        self.app.post_message(self.Updated(attention, sequences))

    def _compute_in_thread(self, boards, sessions, survey, problems, now) -> Attention:
        if self._warnings is None or time.monotonic() - self._warnings_at >= HOME_CHECK_SECONDS:
            self._warnings, self._warnings_at = home_facts(self.home, self.settings), time.monotonic()
        facts = Facts(boards=boards, sessions=sessions, watch_states=read_watch_states(sessions),
                      scratch=scratch_facts(self.home, self.settings, survey, take_survey=False),
                      warnings=self._warnings, dispatch=self.dispatch,
                      board_dispatch=tuple(self.board_dispatch.items()), problems=tuple(problems))
        attention = compute(facts, now, state.dismissed(self.home))
        if survey is None:  # no survey yet: keep what the last one said about the entries
            from engine.attention.model import Kind

            kept = [i for i in self.attention.items if i.kind in (Kind.PRUNE_DUE, Kind.QUARANTINE_EXPIRING)]
            attention = Attention(tuple(list(attention.items) + kept), attention.dismissed, attention.covered,
                                  attention.problems, attention.computed_at)
        self.attention = attention
        self.notifier.offer(attention)
        return attention

    # -- notices held by the rate limit ---------------------------------------------------------

    def take_sequences(self) -> list[str]:
        out, self._outbox[:] = list(self._outbox), []
        return out

    def schedule_flush(self) -> None:
        """A notice held by the rate limit goes out when it is due (one timer, not a loop)."""
        due = self.notifier.due_at()
        if due is None or self._flush_timer is not None:
            return

        def flush() -> None:
            self._flush_timer = None
            self.notifier.flush()
            for seq in self.take_sequences():
                self.app.write_terminal(seq)
            self.schedule_flush()

        self._flush_timer = self.app.set_timer(max(0.0, due - self.clock()) + 0.05, flush)

    # -- dismissing -------------------------------------------------------------------------------

    def dismissed(self) -> None:
        """The user dismissed items: compute again (the list leaves them out)."""
        self._dismissals += 1
        self.check()


class AttentionMixin:
    """The app's side of the attention list: the header's count, the ``!`` view, going
    to an item's subject, dismissing, and writing the terminal's notices. Mixed into
    HermesApp so app.py only wires it."""

    attention: AttentionMonitor

    def action_attention(self) -> None:
        from widgets.attention.attention_view import AttentionScreen

        if isinstance(self.screen, AttentionScreen):
            self.screen.dismiss()
            return
        current = self.attention.attention
        self.push_screen(AttentionScreen(current.items, len(current.dismissed)))

    def on_attention_monitor_updated(self, message: AttentionMonitor.Updated) -> None:
        from widgets.attention.attention_view import AttentionScreen

        self.attention.applied()
        for seq in message.sequences:
            self.write_terminal(seq)
        self.attention.schedule_flush()
        self._update_header()
        for screen in self.screen_stack:
            if isinstance(screen, AttentionScreen):
                screen.show(message.attention.items, len(message.attention.dismissed))

    def on_board_pane_tick_done(self, message) -> None:
        self.attention.tick_done(message.result, getattr(message, "slug", None))

    def on_pane_status_changed(self, message) -> None:
        """A pane's headline changed (HermesApp's own handler runs too): look now, not at the next check."""
        self.attention.check()

    def write_terminal(self, seq: str) -> None:
        """A bell or an OSC notice straight to the terminal (nothing when headless)."""
        driver = getattr(self, "_driver", None)
        if not self.is_headless and driver is not None:
            driver.write(seq)
            driver.flush()

    def attention_header(self):
        """The header's ``! N`` (None when nothing needs the user)."""
        n = len(self.attention.attention.items)
        return f"! {n}" if n else None

    async def on_attention_screen_dismiss(self, message) -> None:
        keys = [i.key for i in message.items]
        try:
            await asyncio.to_thread(state.dismiss, self.home, keys)
        except state.StateError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.attention.dismissed()

    def on_attention_screen_go_to(self, message) -> None:
        """Enter on an item: its subject in its pane (the card selected, the session's
        output, the entry with the prune preview, the prune log)."""
        from engine.attention.model import Pane

        item = message.item
        self.pop_screen()
        pane = item.pane
        # Selected once the pane is shown (a narrow screen shows one pane at a time, and
        # a hidden pane's table has no rows laid out to move to).
        if pane is Pane.BOARD:
            self.action_focus_pane("board")
            if item.board is not None:
                self.run_worker(self._go_to_board(item), group="attention-go", exclusive=True,
                                exit_on_error=False, description="the item's board")
            else:
                self._once_shown(self._select_card, item.subject)
        elif pane is Pane.PROCESSES:
            self.action_focus_pane("processes")
            self._once_shown(self.pane("processes").show_session, item.subject)
        elif pane is Pane.SCRATCH:
            self.action_focus_pane("scratch")
            self._once_shown(self._select_entry, item)
        elif pane is Pane.PRUNE_LOG:
            self.action_focus_pane("prune-log")
        else:
            self.notify(f"{item.why}: {item.action}", timeout=10, markup=False)

    async def _go_to_board(self, item) -> None:
        """The item's board in the board pane (switched to when another one is shown),
        then its card selected."""
        from engine.kanban.boards import BadSlug, UnknownBoard, board_slug, resolve_board

        board = self.pane("board")
        if board_slug(self.home, board.db_path) != item.board:
            try:
                path = await asyncio.to_thread(resolve_board, self.home, item.board)
            except (BadSlug, UnknownBoard) as exc:
                self.notify(str(exc), severity="warning", markup=False)
                return
            await board.switch_to(path)
            # The switch opens the board and asks for its cards: wait for them (bounded).
            for _ in range(400):
                if item.subject in board.cards:
                    break
                await asyncio.sleep(0.05)
        self._once_shown(self._select_card, item.subject)

    def _once_shown(self, select, arg, tries: int = 20) -> None:
        """``select(arg)`` once the pane's rows are laid out (after its first refresh)."""
        from textual.widgets.data_table import RowDoesNotExist

        def attempt(left: int) -> None:
            try:
                select(arg)
            except (RowDoesNotExist, LookupError):  # the row is not in the table yet
                if left:
                    self.set_timer(0.05, lambda: attempt(left - 1))

        self.call_after_refresh(attempt, tries)

    def _select_card(self, task_id: str) -> None:
        from widgets.board.card_list import CardList

        board = self.pane("board")
        view = board.cards.get(task_id)
        if view is None:
            self.notify(f"{task_id} is not on the board shown", severity="warning", markup=False)
            return
        cards = board.query_one(f"#cards-{view.task.status}", CardList)
        cards.focus()
        cards.highlighted = cards.get_option_index(task_id)

    def _select_entry(self, item) -> None:
        from engine.attention.model import Kind

        scratch = self.pane("scratch")
        prefix = "e:" if item.kind is Kind.PRUNE_DUE else "q:"
        key = prefix + item.subject
        table = scratch.table
        if key not in table.keys:  # the subject shows the name masked and escaped: the row whose name shows so
            from engine.processes.redact import shown

            key = next((k for k in table.keys if k.startswith(prefix) and shown(k[2:]) == item.subject), key)
        if key in table.keys:
            table.move_cursor(row=table.get_row_index(key), animate=False)
        if item.kind is Kind.PRUNE_DUE:
            scratch.action_preview_prune()
