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
    """``request()`` runs ``job()`` through ``start`` (a function that runs a coroutine:
    an app's ``run_worker``), or once more right after the run under way."""

    def __init__(self, start: Callable[[Coroutine[Any, Any, None]], object], job: Callable[[], Awaitable[Any]]) -> None:
        self._start = start
        self._job = job
        self.running = False
        self._again = False

    def request(self) -> None:
        if self.running:
            self._again = True
            return
        self.running = True
        self._start(self._runs())

    async def _runs(self) -> None:
        try:
            while True:
                self._again = False
                await self._job()
                if not self._again:
                    return
        finally:
            self.running = False
