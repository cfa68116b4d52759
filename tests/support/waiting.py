"""Waiting for a condition with a generous timeout, instead of sleeping and hoping.

The timeout only bounds a test that would otherwise hang: a condition that holds is
seen within one step, so a generous timeout costs nothing on a fast machine and keeps
a loaded one (many workers on two cores) from failing a correct test.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0
STEP_SECONDS = 0.02


Described = str | Callable[[], str]  # what is waited for; a callable says it when the wait fails


def _timed_out(what: Described, timeout: float) -> AssertionError:
    return AssertionError(f"{what() if callable(what) else what} not reached in {timeout:g}s")


def _check(predicate: Callable[[], T], deadline: float, timeout: float, what: Described) -> T | None:
    """The predicate's value when truthy; None to keep waiting; fails past the deadline."""
    value = predicate()
    if value:
        return value
    if time.monotonic() >= deadline:
        raise _timed_out(what, timeout)
    return None


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT, what: Described = "condition") -> T:
    """The first truthy value of ``predicate()``; fails the test, naming ``what`` (or
    what ``what()`` says then), when none comes within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := _check(predicate, deadline, timeout, what)):
        time.sleep(STEP_SECONDS)
    return value


async def wait_until_pilot(pilot, predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT,
                           what: Described = "condition") -> T:
    """:func:`wait_until` for a Pilot test: the app keeps running between the checks."""
    deadline = time.monotonic() + timeout
    while not (value := _check(predicate, deadline, timeout, what)):
        await pilot.pause(0.05)
    return value


async def wait_until_async(predicate: Callable[[], T | Awaitable[T]], timeout: float = DEFAULT_TIMEOUT,
                           what: Described = "condition") -> T:
    """:func:`wait_until` for an async test (its event loop keeps running between the
    checks); ``predicate`` may return an awaitable, such as a query of the board."""
    deadline = time.monotonic() + timeout

    async def value_now() -> T:
        value = predicate()
        if not inspect.isawaitable(value):
            return value
        try:  # a query that never answers (a lock never released) fails the wait, it does not hang it
            return await asyncio.wait_for(value, max(10.0, deadline - time.monotonic()))
        except TimeoutError:
            raise _timed_out(what, timeout) from None

    while not (value := await value_now()):
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout)
        await asyncio.sleep(STEP_SECONDS)
    return value


# The app's one-shot reading workers (each started again by its pane's timer).
def screen_shown(app, kind: type) -> bool:
    """``app.screen`` is a ``kind`` whose widgets exist and whose ``on_mount`` has run. A
    pushed screen is ``app.screen`` at once, before it is composed: a test that looked
    into it then found no widgets (two paired -n 4 rounds, a prune dialog pushed from a
    worker's result)."""
    screen = app.screen
    return isinstance(screen, kind) and screen.is_mounted


READING_GROUPS = ("board-refresh", "processes-sample", "scratch-survey", "prune-log-read")


async def wait_settled(pilot, groups: Iterable[str] = READING_GROUPS) -> None:
    """Wait until the readings under way (``groups``) have ended and what they read is
    drawn: for a snapshot or a check of the whole screen after the data is in."""
    await wait_workers(pilot.app, groups)
    attention = getattr(pilot.app, "attention", None)  # the app's attention list follows what was read
    if attention is not None and hasattr(attention, "current"):
        attention.check()
        await wait_until_pilot(pilot, lambda: attention.current, what="the attention list computed")
    await pilot.pause()


async def wait_workers(app, groups: Iterable[str], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Wait until no worker of the app in one of ``groups`` runs (workers that loop for
    the app's whole life, like an output follower, belong in no group asked for).

    A worker of an exclusive group may be cancelled by a newer one, and a worker may
    fail: neither is this wait's business, so each is awaited without raising, and the
    workers are looked up again until none of those groups has one running."""
    wanted = set(groups)
    deadline = time.monotonic() + timeout
    while busy := [w for w in app.workers if w.group in wanted and not w.is_finished]:
        if time.monotonic() >= deadline:
            raise AssertionError(f"workers {sorted({w.group for w in busy})} still running after {timeout:g}s")
        await asyncio.gather(*(w.wait() for w in busy), return_exceptions=True)
