"""A foreground run: stream a session's output while it runs, and let it be yielded.

Yielding never signals the process. The foreground stops streaming at the exact byte
offset it has shown; the session becomes a background session with notify-on-complete
(metadata only) and keeps writing to the same file, so a follower that continues from
that offset neither loses nor repeats a byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.processes.follower import OutputFollower
from engine.processes.registry import ProcessRegistry
from engine.processes.session import ProcessSession

POLL_MIN = 0.005
POLL_MAX = 0.05


@dataclass(frozen=True)
class ForegroundOutcome:
    session: ProcessSession
    yielded: bool
    offset: int  # bytes of output shown by the foreground (the yield point)


class ForegroundRun:
    """Streams ``session``'s output to ``write`` until it ends or ``should_yield()``."""

    def __init__(self, registry: ProcessRegistry, session: ProcessSession, offset: int = 0) -> None:
        self.registry = registry
        self.session = session
        self.follower = OutputFollower(session.output_path, offset)

    def _ended(self) -> ProcessSession | None:
        popen = self.registry.popen_of(self.session.id)
        if popen is not None and popen.poll() is None:
            return None
        current = self.registry.get(self.session.id)
        return current if current.finished else None

    def stream(
        self,
        write: Callable[[str], None],
        should_yield: Callable[[], bool] = lambda: False,
        *,
        timeout: float | None = None,
    ) -> ForegroundOutcome:
        delay = POLL_MIN
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if should_yield():
                    moved = self.registry.move_to_background(self.session.id)
                    return ForegroundOutcome(moved, True, self.follower.delivered_offset)
                chunk = self.follower.read()
                if chunk.data:
                    write(chunk.text)
                    delay = POLL_MIN
                ended = self._ended()
                if ended is not None:
                    # The wrapper wrote its record after the command's last byte: drain.
                    while True:
                        rest = self.follower.read()
                        if not rest.data:
                            break
                        write(rest.text)
                    tail = self.follower.flush()
                    if tail:
                        write(tail)
                    return ForegroundOutcome(ended, False, self.follower.offset)
                if deadline is not None and time.monotonic() >= deadline:
                    return ForegroundOutcome(self.registry.get(self.session.id), False, self.follower.offset)
                if not chunk.data:
                    time.sleep(delay)
                    delay = min(delay * 1.5, POLL_MAX)
        finally:
            self.follower.close()
