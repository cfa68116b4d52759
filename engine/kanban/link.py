"""A board as a long-lived user holds it: found, opened, listened to and retried in one place.

The app has two such users of one board, the board pane and the dispatch loop; each
holds a :class:`BoardLink`, and the links share the process's one
:class:`engine.kanban.service.BoardService` (``BoardService.open`` hands out the service
already open for the same board, so the docs/architecture.md rule "one board service
per process" holds). A link says where it stands with a :class:`LinkState` and a reason
line, and the widget that shows it only renders those.

Retrying is the caller's cadence, as before: every refresh of the pane and every tick
of the dispatch loop asks :meth:`BoardLink.open` again while the board is missing or its
server is away (a PostgreSQL board connects again on the next call by itself). A failed
board stays failed: its reason is one line, and only switching to another board (or a
new link) tries again.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout


class LinkState(enum.Enum):
    """Where a link stands. ``value`` is the word a status line may show."""

    LOOKING = "looking"  # not opened yet: which board, and whether it exists, is being found out
    MISSING = "missing"  # no board there yet (no file, an empty database): the first card creates it
    READY = "ready"  # open: ``service`` answers
    UNREACHABLE = "unreachable"  # the board's server is away; the next open or read retries
    FAILED = "failed"  # the board cannot be used (broken file, not ours, bad URL): final for this link


class BoardLink:
    """One user's hold on one board (the default one, or ``override``).

    ``clock`` pins the board's time (tests); ``on_change`` is called whenever a board that
    announces its changes (PostgreSQL NOTIFY) changed, from any host: without it the link
    never listens."""

    def __init__(self, home: HomeLayout, settings: Settings, *, override: Path | None = None,
                 clock: Callable[[], float] | None = None, on_change: Callable[[], None] | None = None) -> None:
        from engine.kanban import board_location_at_a_glance

        self.home = home
        self.settings = settings
        self.override = override
        self.clock = clock
        self._on_change = on_change
        self.state = LinkState.LOOKING
        self.reason = ""  # the state's line: why unreachable, why failed ("" when ready)
        self.away_words = "board unreachable"  # UNREACHABLE: the server away, or a statement it refused
        self.failure: Exception | None = None  # what failed the link (FAILED only)
        self.service = None  # the open BoardService (or hermes's HermesBoardService)
        self.statuses: tuple[str, ...] = ()  # the open board's columns, in its order
        self.profiles: tuple[str, ...] = ()  # the open board's assignable profiles
        self.listening = False  # the board announces its changes to on_change
        self._lock = asyncio.Lock()  # two coroutines opening at once open once
        # Known now unless <home>/kanban.db exists (whose it is, SQLite tells, when opening).
        try:
            self.location = board_location_at_a_glance(home, settings) if override is None else override
        except ValueError:  # a malformed $HERMES_KANBAN_DATABASE_URL: said when opening
            self.location = None

    # -- opening ------------------------------------------------------------------------------

    async def open(self, create: bool = False) -> object | None:
        """The open service, opening the board when it is not open yet: None while it is
        missing (and not ``create``), its server away, or the link failed (``state`` says which)."""
        if self.service is not None or self.state is LinkState.FAILED:
            return self.service
        async with self._lock:
            if self.service is None and self.state is not LinkState.FAILED:
                await self._open_locked(create)
            return self.service

    async def _open_locked(self, create: bool) -> None:
        from engine.kanban.backend import StoreError
        from engine.kanban.backends.postgres.errors import BoardUnreachable, NoBoardYet
        from engine.kanban.service import BoardService

        try:
            self.location = await asyncio.to_thread(BoardService.path_for, self.home, self.settings, self.override)
            exists = await asyncio.to_thread(BoardService.exists, self.home, self.settings, self.override)
        except ValueError as exc:  # a malformed board URL (its message holds no password)
            self.fail(f"The board cannot be used: the board database URL {exc}", exc)
            return
        if not exists and not create:
            self._set(LinkState.MISSING)
            return
        try:
            service = await BoardService.open(self.home, self.settings, create=create, clock=self.clock,
                                              override=self.override)
        except BoardUnreachable as exc:
            self.lost(exc)
            return
        except NoBoardYet:  # an empty database: like a missing board file, until the first card
            self._set(LinkState.MISSING)
            return
        except (StoreError, OSError, ValueError) as exc:
            self.fail(f"The board cannot be used: {exc}", exc)
            return
        if not await self._take(service):
            await service.close()
            return
        self.service, self.location = service, service.path
        self._set(LinkState.READY)
        await self.listen()

    async def _take(self, service) -> bool:
        """Read what a user of the board needs once (its columns, its profiles); False
        (and the state says why) when the board does not answer."""
        from engine.kanban.backend import StoreError
        from engine.kanban.backends.postgres.errors import BoardUnreachable

        try:
            self.statuses = tuple(await service.statuses())
            self.profiles = tuple(await service.profiles())
        except BoardUnreachable as exc:
            self.lost(exc)
            return False
        except (StoreError, OSError, ValueError) as exc:
            self.fail(f"The board cannot be used: {exc}", exc)
            return False
        return True

    async def listen(self) -> None:
        """Have ``on_change`` called on every change of a board that announces them; a
        board that cannot (a file) is read on its user's timer. A lost server stops the
        listening: :meth:`reached` listens again."""
        from engine.kanban.backend import StoreError

        if self.service is None or self._on_change is None or self.listening:
            return
        try:
            self.listening = await self.service.listen(self._on_change)
        except StoreError:
            self.listening = False  # polled until the next read listens again

    # -- what its user learns by using it --------------------------------------------------------

    def lost(self, exc: Exception) -> None:
        """The board's server is away, or refused a statement for a reason of the moment
        (a ``BoardUnreachable``, ``StatementRefused`` included): keep the service, whose
        next call tries again, and stop counting on its announcements."""
        self.listening = False
        self.away_words = getattr(exc, "status", "board unreachable")
        self._set(LinkState.UNREACHABLE, str(exc))

    async def reached(self) -> bool:
        """The board answered: an outage is over (True when this ends one), and the board
        is listened to again."""
        back = self.state is LinkState.UNREACHABLE
        if self.service is not None and self.state is not LinkState.FAILED:
            self._set(LinkState.READY)
            await self.listen()
        return back

    def fail(self, reason: str, exc: Exception | None = None) -> None:
        """The board cannot be used: ``reason`` is the one line that says why."""
        self.failure = exc
        self._set(LinkState.FAILED, reason)

    def _set(self, state: LinkState, reason: str = "") -> None:
        self.state, self.reason = state, reason

    # -- switching and closing --------------------------------------------------------------------

    async def switch(self, override: Path) -> None:
        """Hold another board from now on: this one's service is closed, and the next
        :meth:`open` opens that one."""
        async with self._lock:
            await self._close_locked()
            self.override, self.location, self.failure = override, override, None
            self._set(LinkState.LOOKING)

    async def forget(self) -> None:
        """The board held is no longer the one at its place (its file removed or replaced):
        give its service back, and the next :meth:`open` looks for the board there now."""
        async with self._lock:
            await self._close_locked()
            self.failure = None
            self._set(LinkState.LOOKING)

    async def close(self) -> None:
        """Give the service back (the last holder closes the board)."""
        async with self._lock:
            await self._close_locked()

    async def _close_locked(self) -> None:
        service, self.service, self.listening = self.service, None, False
        self.statuses = self.profiles = ()
        if service is not None:
            await service.close()
