"""The app's own dispatcher: who spawns workers from the app is answered here.

The loop ticks the board every ``kanban.dispatch_interval_seconds`` (when
``kanban.dispatch`` is on), when the board pane asks (its "dispatch now" key), and at
once when a worker this app started exits, so a finished worker's card is judged within
moments instead of at the next interval. Each result goes to the board pane as a
``BoardPane.TickDone`` message: the pane only shows it.

It never ticks hermes-agent's board (hermes's gateway dispatches it): the first tick
there is refused with one notification and the loop stays idle.

It holds the default board through an :class:`engine.kanban.link.BoardLink` (the pane
holds its own), so it shares the process's one :class:`engine.kanban.service.BoardService`
with the pane; the app closes it when it ends.
A tick never runs twice at once: a request that arrives during a tick runs one more
tick right after it (never a cancelled half-tick).
"""

from __future__ import annotations

import threading
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
        self._ticker = Coalesced(
            lambda ticks: self.app.run_worker(ticks, group="board-dispatch", exit_on_error=False), self.tick)
        self._watched: set[str] = set()
        self.link = BoardLink(home, settings)  # the default board; never listened to (ticks are timed)
        self.ticks = 0
        self.unreachable_ticks = 0  # ticks that found the board's server away (said by the pane, not here)
        self.last_result: DispatchResult | None = None
        self.refused = ""  # why this app may not dispatch its board (said once)
        self.on_failure = None  # called with the error of a failed tick (the attention list counts them)

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
        """A tick is under way (or one more is due right after it)."""
        return self._ticker.running

    def request(self) -> None:
        """Tick now, or right after the tick that is running."""
        self._ticker.request()

    async def tick(self) -> DispatchResult | None:
        """One tick on the shared board service; None when there is no board yet or the
        tick failed (said in a notification: a failed tick must not take the app down)."""
        from engine.kanban.backends.hermes.board import DispatchRefused
        from engine.kanban.backends.postgres.errors import BoardUnreachable

        if self.refused:
            return None
        service = await self.link.open()
        if service is None:
            self._not_open()
            return None
        try:
            result = await service.tick(self.spawner)
        except DispatchRefused as exc:  # hermes-agent's board: its gateway dispatches it
            self.refused = str(exc)
            self.app.notify(self.refused, severity="warning", timeout=8, markup=False)
            return None
        except BoardUnreachable as exc:  # the next tick retries
            self.link.lost(exc)
            self._not_open()
            return None
        except Exception as exc:
            self._failed(str(exc))
            return None
        await self.link.reached()
        self.ticks += 1
        self.last_result = result
        for spawned in result.spawned:
            self._watch_exit(spawned.session_id)
        self._deliver(result)
        return result

    def _not_open(self) -> None:
        """Why the link has no board to tick: missing is nothing to say; the pane already
        says "board unreachable, retrying" and a malformed board URL; a board that cannot
        be used fails every tick."""
        state = self.link.state
        if state is LinkState.UNREACHABLE:
            self.unreachable_ticks += 1
            if self.on_failure is not None:
                self.on_failure(f"{self.link.away_words}: {self.link.reason}")
        elif state is LinkState.FAILED and not isinstance(self.link.failure, ValueError):
            self._failed(str(self.link.failure))

    def _failed(self, error: str) -> None:
        self.app.notify(f"dispatch failed: {error}", severity="error", timeout=8, markup=False)
        if self.on_failure is not None:
            self.on_failure(error)

    async def close(self) -> None:
        """Give the board back (the app is closing)."""
        await self.link.close()

    def _deliver(self, result: DispatchResult) -> None:
        from textual.css.query import NoMatches

        from widgets.board.board_pane import BoardPane

        # The app keeps its panes by id: a query of the whole DOM every tick was most of
        # an idle tick's cost on the UI thread.
        try:
            pane = self.app.pane(BoardPane.PANE_ID)
        except NoMatches:  # closing
            return
        pane.post_message(BoardPane.TickDone(result))

    def _watch_exit(self, session_id: str | None) -> None:
        """Wake the loop when this worker (a child of this process) exits."""
        if not session_id or session_id in self._watched:
            return
        self._watched.add(session_id)

        def wait() -> None:
            exited = self.spawner.wait_exit(session_id)
            self._watched.discard(session_id)
            if exited:
                self.app.post_message(self.WorkerExited(session_id))  # refused once the app is closing

        threading.Thread(target=wait, name=f"board-exit-{session_id}", daemon=True).start()

    def wake(self) -> None:
        """A worker this app started has exited: tick now, to judge its run."""
        # With kanban.dispatch off the app never ticks on its own, not even on an exit.
        if self.app.is_running and self.settings.kanban.dispatch:
            self.request()
