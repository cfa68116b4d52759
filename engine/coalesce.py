"""One job at a time, never cancelled, run once more when asked meanwhile.

A screen refresh or a dispatch tick asked for by a timer, a key and a change at once
must not run twice side by side (they share one board connection and one view), and
must not be cancelled by the next request either: a cancelled read that is slower
than the timer never lands. :class:`Coalesced` runs the job now, or, when a run is
under way, remembers that one more run is wanted and starts it right after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any


class Coalesced:
    """``request()`` runs ``job()`` through ``start`` (a function that runs a coroutine
    function: an app's ``run_worker``), or once more right after the run under way.

    ``start`` is handed the coroutine function, not a coroutine: a run cancelled before
    it began (the app closing) leaves no coroutine that was never awaited. Such a run
    would also never have said it ended: when ``start``'s handle says it finished
    before the run began, the next request starts a new one instead of waiting for it."""

    def __init__(self, start: Callable[[Callable[[], Coroutine[Any, Any, None]]], object],
                 job: Callable[[], Awaitable[Any]]) -> None:
        self._start = start
        self._job = job
        self.running = False
        self._again = False
        self._began = False  # the run under way has begun (its loop is running)
        self._handle: object = None  # what ``start`` returned for it (a Textual Worker)

    def request(self) -> None:
        if self.running and not self._never_began():
            self._again = True
            return
        self.running, self._began = True, False
        self._handle = self._start(self._runs)

    def _never_began(self) -> bool:
        return not self._began and bool(getattr(self._handle, "is_finished", False))

    async def _runs(self) -> None:
        self._began = True
        try:
            while True:
                self._again = False
                await self._job()
                if not self._again:
                    return
        finally:
            self.running = False
