"""Launch batches in flight in this process, and signals that wait for them.

A tick claims cards (their runs ``launching``, each with its launch token), starts
their workers, then records pid and fingerprint. A dispatcher stopped in between leaves
workers its board does not know yet; the next tick resolves them by token (see
docs/kanban.md), but it is better not to be stopped there at all. So while a batch is in
flight (:func:`launch_batch`) an ending signal (INT, TERM, HUP) is only noted, and takes
effect the moment the batch is recorded (:func:`defer_during_launches`). ``kill -9``
cannot be deferred: the recovery covers it.

The tokens of the batches in flight are known here too, so a tick of this process never
resolves a launch that this process is still making.

Signal handlers run in the main thread between two bytecodes, possibly in the middle of
:func:`launch_batch`; they take no lock, and every noted signal is acted on exactly once
(a deque's popleft is atomic), by whoever gets to it first.
"""

from __future__ import annotations

import collections
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_lock = threading.Lock()
_batches = 0
_tokens: collections.Counter[str] = collections.Counter()
_pending: collections.deque[Callable[[], None]] = collections.deque()


def in_flight() -> bool:
    return _batches > 0


def token_in_flight(token: str | None) -> bool:
    """This process is launching (or about to record) the launch of ``token``."""
    with _lock:
        return bool(token) and _tokens[token] > 0


@contextmanager
def launch_batch() -> Iterator[Callable[[Iterable[str]], None]]:
    """Around a batch, from its claim to the record of its workers; yields the function
    that names the batch's launch tokens (known once its claim has won). On the way
    out, once no batch is in flight, the signals that came meanwhile take effect (an
    exception they raise, such as KeyboardInterrupt, leaves from here)."""
    global _batches
    mine: list[str] = []

    def add(tokens: Iterable[str]) -> None:
        tokens = [t for t in tokens if t]
        with _lock:
            _tokens.update(tokens)
        mine.extend(tokens)

    with _lock:
        _batches += 1
    try:
        yield add
    finally:
        with _lock:
            _batches -= 1
            _tokens.subtract(mine)
            for token in mine:
                if _tokens[token] <= 0:
                    del _tokens[token]
        if _batches == 0:
            _drain()


def _drain() -> None:
    while True:
        try:
            act = _pending.popleft()
        except IndexError:
            return
        act()


def after_launches(act: Callable[[], None]) -> bool:
    """Run ``act`` now when no batch is in flight (False), else once the last one ends
    (True). Safe in a signal handler."""
    _pending.append(act)
    if _batches == 0:
        _drain()
        return False
    return True


Handler = Callable[[int, FrameType | None], object] | int | None


def run_handler(handler: Handler, signum: int, frame: FrameType | None) -> None:
    """What ``handler`` (as ``signal.getsignal`` gives it) would have done: a function is
    called; the default action is taken by restoring it and raising the signal again
    (so TERM ends the process as it always did); an ignored signal does nothing."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def deferring(handler: Handler) -> Callable[[int, FrameType | None], None]:
    """A signal handler that runs ``handler`` at once, or once the launch batches in
    flight are recorded."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        after_launches(lambda: run_handler(handler, signum, frame))

    return on_signal


def defer_during_launches(signals: Iterable[int] = ENDING_SIGNALS) -> Callable[[], None]:
    """Install :func:`deferring` over the current handler of each of ``signals`` (main
    thread only). Returns the function that puts the previous handlers back."""
    previous = {}
    for signum in signals:
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, deferring(previous[signum]))

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    return restore
