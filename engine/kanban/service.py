"""The board service: the one way into a board for the CLI, the app and the tests.

Why it exists:

- **One connection per process.** Two connections of one process to one board are
  legal for SQLite, but every second opener was a chance to break the locking rule
  (docs/architecture.md: nothing but SQLite opens a board file once a connection may
  exist). :meth:`BoardService.open` hands out the service already open for the same
  board on the same event loop (reference counted), so the app's pane and the app's
  dispatch loop share one connection, and every statement on it is serialised by
  :class:`engine.kanban.backends.sqlite.store.Board`.
- **The "open the board" ceremony exists once**: which file (:func:`engine.kanban.board_path`),
  creating hermes-tui's folder when the board lives in it, moving an older board out of
  hermes's ``kanban.db`` name, and whether to create a missing board.
- **It speaks in models.** Callers get :class:`Task`, :class:`TaskDetails`,
  :class:`BoardView`, :class:`DispatchResult`, never rows or SQL, so another store can
  stand behind the same methods: :meth:`BoardService.open` hands out
  :class:`engine.kanban.backends.hermes.board.HermesBoardService` when the file is hermes-agent's board
  (read-only, changed through hermes's CLI, never dispatched). Both are a
  :class:`engine.kanban.backend.BoardBackend`; callers ask its ``capabilities``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban import board_location
from engine.kanban import transitions as tr
from engine.kanban.backend import BoardView, Capabilities, TransitionResult
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.backends.sqlite.store import Board
from engine.kanban.models import Event, NewTask, Run, Task, TaskDetails

if TYPE_CHECKING:
    from engine.kanban.tick_result import DispatchResult

Clock = Callable[[], float]


class BoardService:
    """hermes-tui's own board (a :class:`engine.kanban.backend.BoardBackend`) with its
    dispatcher. Get one with :meth:`open`, give it back with :meth:`close` (or ``async with``)."""

    capabilities = Capabilities(read_only=False, dispatchable=True, batch_create=True, checks_profiles=True,
                                signals_workers=True, worker_log_files=False)
    read_only_reason = ""

    _open: ClassVar[dict[tuple[Path | str, int], BoardService]] = {}

    def __init__(self, board: Board, *, home: HomeLayout, settings: Settings, spawner=None) -> None:
        self._board = board
        self.home = home
        self.settings = settings
        self._spawner = spawner
        self._refs = 1
        self._key: tuple[Path | str, int] | None = None
        self._quiet_tick = None  # the dispatcher's QuietTick, made at the first tick

    # -- opening and closing ---------------------------------------------------------------

    @staticmethod
    def path_for(home: HomeLayout, settings: Settings, override: str | Path | None = None) -> Path | DatabaseUrl:
        """Which board, a file or a PostgreSQL URL (the one place that decides it)."""
        return board_location(home, settings, override)

    @classmethod
    async def open(cls, home: HomeLayout, settings: Settings, *, override: str | Path | None = None,
                   create: bool = True, clock: Clock | None = None, spawner=None) -> BoardService:
        """The service of this board in this process: the open one (same board, same
        event loop) or a new one. A missing board is created only with ``create``.
        A shared service keeps the clock and spawner it was first opened with.
        ``clock`` pins the board's time (tests); by default a file board uses this
        machine's clock and a PostgreSQL board the server's."""
        path = cls.path_for(home, settings, override)
        where = path.secret if isinstance(path, DatabaseUrl) else Path(path).resolve()
        key = (where, id(asyncio.get_running_loop()))
        shared = cls._open.get(key)
        if shared is not None and shared._board.gone() is None:
            shared._refs += 1
            return shared
        if isinstance(path, DatabaseUrl):
            from engine.kanban.backends.postgres.board import PgBoard

            board = await PgBoard.open(path, clock=clock, create=create)  # None: the server's clock
        else:
            chosen = bool(override or os.environ.get("HERMES_KANBAN_DB") or settings.kanban.db
                          or settings.kanban.database)
            from engine.kanban.relocate import route_board

            routed = await asyncio.to_thread(route_board, home, path, create, chosen)
            if routed is None:  # hermes-agent's own board: read-only, changed through its CLI
                from engine.kanban.backends.hermes.board import HermesBoardService

                return await HermesBoardService.open(path, home=home, settings=settings, clock=clock or time.time)
            path, create = routed
            key = (Path(path).resolve(), key[1])
            shared = cls._open.get(key)
            if shared is not None and shared._board.gone() is not None:
                del cls._open[key]  # its holders keep it (it refuses them); a new opener gets the file there now
                shared = None
            if shared is not None:
                shared._refs += 1
                return shared
            board = await Board.open(path, clock=clock or time.time, create=create)
        shared = cls._open.get(key)  # another coroutine may have opened it meanwhile
        if shared is not None and shared._board.gone() is None:
            # Counted before the spare connection is closed: while that close is awaited
            # the other holder may give the service back, and being its last holder it
            # would close the connection this caller is about to be handed.
            shared._refs += 1
            await board.close()
            return shared
        service = cls(board, home=home, settings=settings, spawner=spawner)
        service._key = key
        cls._open[key] = service
        return service

    @classmethod
    def exists(cls, home: HomeLayout, settings: Settings, override: str | Path | None = None) -> bool:
        """Whether the board file is there (a stat, never an open: see the module doc).
        A server board is taken to exist: opening it says whether it does."""
        where = cls.path_for(home, settings, override)
        return True if isinstance(where, DatabaseUrl) else where.exists()

    async def close(self) -> None:
        self._refs -= 1
        if self._refs > 0:
            return
        if self._key is not None and BoardService._open.get(self._key) is self:
            del BoardService._open[self._key]
        await self._board.close()

    async def __aenter__(self) -> BoardService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def path(self) -> Path | DatabaseUrl:
        return self._board.path

    @property
    def identity(self) -> tuple[int, int] | None:
        """The board file's (st_dev, st_ino) when it was opened; None for a server board."""
        return self._board.identity

    def gone(self) -> str | None:
        """Why the board is no longer the file at its path (removed or replaced since it
        was opened), else None (see ``Board.gone``)."""
        return self._board.gone()

    def now(self) -> float:
        return self._board.now()

    @property
    def spawner(self):
        """How workers start: given at open, else process sessions of this home."""
        if self._spawner is None:
            from engine.kanban.registry_spawner import RegistrySpawner

            self._spawner = RegistrySpawner(self.home, self.settings)
        return self._spawner

    async def statuses(self) -> tuple[str, ...]:
        """The board's columns, in order."""
        from engine.kanban.statuses import STATUSES

        return STATUSES

    async def profiles(self) -> tuple[str, ...]:
        """The names a card may be assigned to: the configured worker profiles."""
        return tuple(sorted(self.settings.kanban.profiles))

    def log_path(self, task_id: str) -> Path:
        """Where a card's worker log is kept."""
        from engine.kanban.workers import card_log_path

        return card_log_path(self.home.kanban_logs_dir, task_id)

    # -- reads ---------------------------------------------------------------------------------

    async def resolve(self, id_or_prefix: str) -> str:
        return await self._board.resolve_id(id_or_prefix)

    async def get(self, task_id: str) -> Task:
        return await self._board.get_task(task_id)

    async def list_tasks(self, statuses: Sequence[str] | None = None) -> list[Task]:
        return await self._board.list_tasks(statuses)

    async def view(self, statuses: Sequence[str], recent_limit: int = 100) -> BoardView:
        tasks, counts = await self._board.board_view(statuses, recent_limit)
        return BoardView(tuple(tasks), counts)

    async def details(self, task_id: str, event_limit: int | None = None) -> TaskDetails:
        return await self._board.details(task_id, event_limit)

    async def runs_of(self, task_id: str) -> list[Run]:
        return await self._board.runs_of(task_id)

    async def events(self, task_id: str | None = None, after_id: int = 0, limit: int | None = None) -> list[Event]:
        return await self._board.events(task_id, after_id, limit)

    async def last_event_id(self) -> int:
        return await self._board.last_event_id()

    async def counts(self) -> dict[str, int]:
        return await self._board.counts()

    async def latest_events(self, kinds: Sequence[str], statuses: Sequence[str]) -> dict[str, Event]:
        """The newest event of one of ``kinds`` of each card now in one of ``statuses``."""
        return await self._board.latest_events(kinds, statuses)

    async def events_since(self, kinds: Sequence[str], since: float) -> list[Event]:
        return await self._board.events_since(kinds, since)

    async def data_version(self) -> object:
        """Differs whenever the board may have changed since last asked (None: unknown,
        read it): what lets a screen skip reading an unchanged board."""
        return await self._board.data_version()

    async def listen(self, on_change: Callable[[], None]) -> bool:
        """Have ``on_change`` called whenever the board changes, from any host (a server
        board's LISTEN/NOTIFY). False: this board cannot announce changes; poll it."""
        return await self._board.listen(on_change)

    # -- changes -------------------------------------------------------------------------------

    async def create(self, new: NewTask, *, actor: str = "cli") -> Task:
        """One card; its parents may be given as unique prefixes."""
        return (await self.create_many([new], actor=actor))[0]

    async def create_many(self, new: Sequence[NewTask], *, actor: str = "cli") -> list[Task]:
        """Many cards in one transaction (all or none); parents given as prefixes are
        resolved once each, however many cards name them."""
        full = {p: await self.resolve(p) for p in dict.fromkeys(p for n in new for p in n.parents)}
        resolved = [replace(n, parents=tuple(full[p] for p in n.parents)) for n in new]
        return await tr.create_tasks(self._board, resolved, actor=actor)

    async def assign(self, task_id: str, assignee: str | None) -> TransitionResult:
        return await tr.assign(self._board, task_id, assignee)

    async def complete(self, task_id: str, summary: str | None = None,
                       call: tr.WorkerCall = tr.WorkerCall()) -> TransitionResult:
        return await tr.complete(self._board, task_id, summary, call=call)

    async def block(self, task_id: str, reason: str | None = None,
                    call: tr.WorkerCall = tr.WorkerCall()) -> TransitionResult:
        return await tr.block(self._board, task_id, reason, call=call)

    async def review(self, task_id: str, summary: str | None = None,
                     call: tr.WorkerCall = tr.WorkerCall()) -> TransitionResult:
        return await tr.review(self._board, task_id, summary, call=call)

    async def heartbeat(self, task_id: str, call: tr.WorkerCall) -> TransitionResult:
        return await tr.heartbeat(self._board, task_id, call, self.settings.kanban.claim_ttl_seconds)

    async def reclaim(self, task_id: str, reason: str = "", expected: tr.Expected | None = None) -> TransitionResult:
        """``expected``: the run and worker pid a dialog showed; refused if the card moved on."""
        return await tr.reclaim(self._board, task_id, reason=reason, grace=self._grace, expected=expected)

    async def report_usage(self, task_id: str, *, input_tokens: int, output_tokens: int, cost_usd: float | None,
                           call: tr.WorkerCall = tr.WorkerCall()) -> TransitionResult:
        return await tr.report_usage(self._board, task_id, input_tokens=input_tokens, output_tokens=output_tokens,
                                     cost_usd=cost_usd, call=call)

    async def usage(self, task_id: str | None = None):
        """Tokens and cost of a card's runs (every run of the board without ``task_id``)
        as workers reported them; a run without a report is not linked."""
        from engine.kanban.usage import RunUsage, total

        where, params = ("WHERE r.task_id = ?", (task_id,)) if task_id is not None else ("", ())
        rows = await self._board.fetch(
            "SELECT r.id, r.task_id, u.input_tokens, u.output_tokens, u.cost_usd FROM task_runs r "
            f"LEFT JOIN run_usage u ON u.run_id = r.id {where} ORDER BY r.id", params)
        return total(RunUsage(run_id, tid, True, input_tokens=i, output_tokens=o, cost_usd=c) if i is not None
                     else RunUsage(run_id, tid, False, why="its worker reported no usage")
                     for run_id, tid, i, o, c in rows)

    async def comment(self, task_id: str, text: str) -> TransitionResult:
        from engine.kanban.backend import StoreError

        raise StoreError("hermes-tui's own board keeps no comments (hermes-agent's board does)")

    async def unblock(self, task_id: str) -> TransitionResult:
        return await tr.unblock(self._board, task_id)

    async def archive(self, task_id: str, expected: tr.Expected | None = None) -> TransitionResult:
        return await tr.archive(self._board, task_id, grace=self._grace, expected=expected)

    async def move(self, task_id: str, to_status: str, expected: tr.Expected | None = None) -> TransitionResult:
        return await tr.move(self._board, task_id, to_status, expected=expected)

    @property
    def _grace(self) -> float:
        return self.settings.processes.kill_grace_seconds

    # -- dispatching ------------------------------------------------------------------------------

    async def tick(self, spawner=None) -> DispatchResult:
        """One dispatch tick (skipped_locked when another dispatcher holds the board).
        ``spawner`` overrides the service's own for this tick (the app's loop has its own)."""
        from engine.kanban.dispatcher import Dispatcher, QuietTick

        if self._quiet_tick is None:
            self._quiet_tick = QuietTick()
        return await Dispatcher(self._board, home=self.home, settings=self.settings,
                                spawner=spawner or self.spawner, quiet=self._quiet_tick).tick()
