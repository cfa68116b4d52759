"""The app's own dispatcher: who spawns workers from the app is answered here.

The loop ticks the board every ``kanban.dispatch_interval_seconds`` (when
``kanban.dispatch`` is on), when the board pane asks (its "dispatch now" key), and at
once when a worker this app started exits, so a finished worker's card is judged within
moments instead of at the next interval. Each result goes to the board pane as a
``BoardPane.TickDone`` message: the pane only shows it.

It ticks **every hermes-tui board of the home** (issue 36): the default board, and each
of hermes-tui's own named boards (``kanban boards create``), each with its own link,
its own tick and its own dispatch lock, as ``kanban --board SLUG daemon`` would; the
named boards are listed again at every timed tick (a board made while the app runs is
dispatched from then on). Each result reaches the board pane naming its board: the
pane shows the ticks of the board it shows, whichever that is.

It never ticks hermes-agent's board (hermes's gateway dispatches it): the first tick
there is refused with one notification and that board stays idle.

It holds each board through an :class:`engine.kanban.link.BoardLink` (the pane holds
its own), so it shares the process's one :class:`engine.kanban.service.BoardService`
per board with the pane; the app closes them when it ends.
A tick of one board never runs twice at once: a request that arrives during a tick runs
one more tick right after it (never a cancelled half-tick).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from engine.coalesce import Coalesced
from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.link import BoardLink, LinkState

if TYPE_CHECKING:
    from engine.kanban.tick_result import DispatchResult
    from hermes_tui.app import HermesApp

FIRST_TICK_SECONDS = 2.0


class BoardTicker:
    """One board the loop ticks: its link, its coalesced ticks, what its last tick did."""

    def __init__(self, loop: DispatchLoop, override: Path | None = None, slug: str | None = None) -> None:
        self.loop = loop
        self.slug = slug
        self.link = BoardLink(loop.home, loop.settings, override=override)  # never listened to (ticks are timed)
        self._ticker = Coalesced(
            lambda ticks: loop.app.run_worker(ticks, group="board-dispatch", exit_on_error=False), self.tick)
        self.ticks = 0
        self.unreachable_ticks = 0  # ticks that found the board's server away (said by the pane, not here)
        self.last_result: DispatchResult | None = None
        self.refused = ""  # why this app may not dispatch this board (said once)
        self.stopped = ""  # why the board refuses this app's ticks now (another machine has its host id)
        self._stopped_why: object = None  # what that refusal is about (said once each)

    @property
    def ticking(self) -> bool:
        return self._ticker.running

    def request(self) -> None:
        self._ticker.request()

    async def tick(self) -> DispatchResult | None:
        """One tick on the board's shared service; None when there is no board yet or the
        tick failed (said in a notification: a failed tick must not take the app down)."""
        from engine.kanban.backend import BoardGone
        from engine.kanban.backends.hermes.board import DispatchRefused
        from engine.kanban.backends.postgres.errors import BoardUnreachable, HostIdInUse

        loop = self.loop
        if self.refused:
            return None
        service = await self.link.open()
        if service is None:
            self._not_open()
            return None
        try:
            result = await service.tick(loop.spawner)
        except DispatchRefused as exc:  # hermes-agent's board: its gateway dispatches it
            self.refused = str(exc)
            loop.app.notify(self.refused, severity="warning", timeout=8, markup=False)
            return None
        except BoardUnreachable as exc:  # the next tick retries
            self.link.lost(exc)
            self._not_open()
            return None
        except BoardGone as exc:  # removed or replaced since it was opened: nothing more there; said once,
            # and the next tick opens whatever board is at the path now (none: nothing to tick)
            loop.app.notify(f"dispatch: {exc}", severity="warning", timeout=8, markup=False)
            await self.link.forget()
            return None
        except HostIdInUse as exc:  # nothing was dispatched; each tick asks again, said once
            self._stop(str(exc), (exc.host_id, exc.holder_boot))
            return None
        except Exception as exc:
            self._failed(str(exc))
            return None
        await self.link.reached()
        if self.stopped:
            self._stop("", None)
        self.ticks += 1
        self.last_result = result
        for spawned in result.spawned:
            loop._watch_exit(spawned.session_id, self)
        loop._deliver(self, result)
        return result

    def _not_open(self) -> None:
        """Why the link has no board to tick: missing is nothing to say; the pane already
        says "board unreachable, retrying" and a malformed board URL; a board that cannot
        be used fails every tick."""
        state = self.link.state
        if state is LinkState.UNREACHABLE:
            self.unreachable_ticks += 1
            if self.loop.on_failure is not None:
                self.loop.on_failure(f"{self.link.away_words}: {self.link.reason}", self.slug)
        elif state is LinkState.FAILED and not isinstance(self.link.failure, ValueError):
            self._failed(str(self.link.failure))

    def _stop(self, reason: str, why: object) -> None:
        """The board refuses this app's ticks (``reason``: one line; "" when it takes them
        again): said in a notification once per ``why`` (the same refusal's words change
        as its lease runs down), and the board's info line says it until then."""
        from textual.css.query import NoMatches

        from widgets.board.board_pane import BoardPane

        if reason and self.loop.on_failure is not None:
            self.loop.on_failure(reason, self.slug)
        if reason and why != self._stopped_why:
            self.loop.app.notify(f"dispatch stopped: {reason}", severity="error", timeout=15, markup=False)
        self.stopped, self._stopped_why = reason, why
        if self.slug is not None:
            return  # the board pane's dispatcher line is the default board's
        try:
            self.loop.app.pane(BoardPane.PANE_ID).post_message(BoardPane.DispatchStopped(reason))
        except NoMatches:  # closing
            pass

    def _failed(self, error: str) -> None:
        where = f"board {self.slug}: " if self.slug is not None else ""
        self.loop.app.notify(f"dispatch failed: {where}{error}", severity="error", timeout=8, markup=False)
        if self.loop.on_failure is not None:
            self.loop.on_failure(error, self.slug)


class DispatchLoop:
    class WorkerExited(Message):
        """Posted to the app by the thread that waits for a worker this app started, once
        it has exited (``session_id``); the app then wakes the loop."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    def __init__(self, app: HermesApp, home: HomeLayout, settings: Settings, spawner=None) -> None:
        self.app = app
        self.home = home
        self.settings = settings
        self._spawner = spawner
        self._watched: dict[str, BoardTicker] = {}
        self.main = BoardTicker(self)  # the default board
        self.others: dict[str, BoardTicker] = {}  # hermes-tui's own named boards, by their file
        self._listing = False
        self.on_failure = None  # called with the error of a failed tick and its board's slug (None: the default
        # board): the attention list counts them

    # The default board's ticker, as the app and its tests knew the loop.
    link = property(lambda self: self.main.link)
    ticks = property(lambda self: self.main.ticks)
    unreachable_ticks = property(lambda self: self.main.unreachable_ticks)
    last_result = property(lambda self: self.main.last_result)
    refused = property(lambda self: self.main.refused)
    stopped = property(lambda self: self.main.stopped)

    @property
    def spawner(self):
        """How the app's workers start (tests may set a different one before a tick)."""
        if self._spawner is None:
            from engine.kanban.registry_spawner import RegistrySpawner

            self._spawner = RegistrySpawner(self.home, self.settings)
        return self._spawner

    @spawner.setter
    def spawner(self, value) -> None:
        self._spawner = value

    def start(self) -> None:
        """Begin the timed ticks (nothing when ``kanban.dispatch`` is off)."""
        k = self.settings.kanban
        if not k.dispatch:
            return
        self.app.set_timer(min(k.dispatch_interval_seconds, FIRST_TICK_SECONDS), self.request)
        self.app.set_interval(k.dispatch_interval_seconds, self.request)

    @property
    def ticking(self) -> bool:
        """A tick of the default board is under way (or one more is due right after it)."""
        return self.main.ticking

    def request(self, board: object = None) -> None:
        """Tick now, or right after the tick that is running: the board at ``board`` (a
        path), or every board (the default one, and the named ones, listed again)."""
        if board is not None:
            ticker = self.ticker_for(board)
            if ticker is None and isinstance(board, Path):  # a named board not listed yet: this one only
                from engine.kanban.boards import board_slug

                ticker = self.others[os.path.abspath(board)] = BoardTicker(self, Path(board),
                                                                           board_slug(self.home, board))
            if ticker is not None:
                ticker.request()
                return
        self.main.request()
        for ticker in list(self.others.values()):
            ticker.request()
        self._list_boards()

    async def tick(self) -> DispatchResult | None:
        """One tick of the default board."""
        return await self.main.tick()

    def ticker_for(self, board: object) -> BoardTicker | None:
        """The ticker of the board at ``board`` (a path or a server's URL), None for none."""
        if same_board(board, self.main.link.location):
            return self.main
        if isinstance(board, Path):
            return self.others.get(os.path.abspath(board))
        return None

    def _list_boards(self) -> None:
        """hermes-tui's own named boards, listed in a thread; each new one gets a ticker
        (and its first tick), each gone one is dropped."""
        if self._listing or not self.app.is_running:
            return
        self._listing = True

        async def listing() -> None:
            try:
                found = await asyncio.to_thread(own_named_boards, self.home, self.settings)
            finally:
                self._listing = False
            for path, slug in found.items():
                if path not in self.others:
                    ticker = self.others[path] = BoardTicker(self, Path(path), slug)
                    ticker.request()
            for path in [p for p in self.others if p not in found]:
                gone = self.others.pop(path)
                await gone.link.close()

        self.app.run_worker(listing, group="board-dispatch-list", exit_on_error=False,
                            description="the boards to dispatch")

    async def close(self) -> None:
        """Give the boards back (the app is closing)."""
        await self.main.link.close()
        for ticker in list(self.others.values()):
            await ticker.link.close()

    def _deliver(self, ticker: BoardTicker, result: DispatchResult) -> None:
        from textual.css.query import NoMatches

        from widgets.board.board_pane import BoardPane

        # The app keeps its panes by id: a query of the whole DOM every tick was most of
        # an idle tick's cost on the UI thread.
        try:
            pane = self.app.pane(BoardPane.PANE_ID)
        except NoMatches:  # closing
            return
        pane.post_message(BoardPane.TickDone(result, board=ticker.link.location, slug=ticker.slug))

    def _watch_exit(self, session_id: str | None, ticker: BoardTicker) -> None:
        """Wake the loop when this worker (a child of this process) exits."""
        if not session_id or session_id in self._watched:
            return
        self._watched[session_id] = ticker

        def wait() -> None:
            exited = self.spawner.wait_exit(session_id)
            if exited:
                self.app.post_message(self.WorkerExited(session_id))  # refused once the app is closing
            else:
                self._watched.pop(session_id, None)

        threading.Thread(target=wait, name=f"board-exit-{session_id}", daemon=True).start()

    def wake(self, session_id: str | None = None) -> None:
        """A worker this app started has exited: tick its board now, to judge its run."""
        ticker = self._watched.pop(session_id, None) if session_id is not None else None
        # With kanban.dispatch off the app never ticks on its own, not even on an exit.
        if self.app.is_running and self.settings.kanban.dispatch:
            (ticker or self.main).request()


def same_board(a: object, b: object) -> bool:
    """Whether two board locations (paths, or servers' URLs) are one board."""
    if a is None or b is None:
        return False
    if isinstance(a, Path) and isinstance(b, Path):
        return os.path.realpath(a) == os.path.realpath(b)
    return str(a) == str(b)


def own_named_boards(home: HomeLayout, settings: Settings) -> dict[str, str]:
    """hermes-tui's own boards of the home other than the default one: file -> slug
    (stats and small reads; SQLite, read-only, only to tell whose ``kanban.db`` is whose)."""
    from engine.kanban.boards import own_boards
    from engine.kanban.service import BoardService

    try:
        default = BoardService.path_for(home, settings)
    except ValueError:
        default = None
    found = {}
    for slug, _name, path in own_boards(home):
        if isinstance(default, Path) and same_board(path, default):
            continue
        found[os.path.abspath(path)] = slug
    return found
