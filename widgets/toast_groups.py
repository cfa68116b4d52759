"""Which process notifications become toasts, and how many at once.

Every event goes to the processes pane's notifications list; the toasts are only the
nudge. One refresh gives at most one toast (the demo's first refresh used to open a
completion and a watch match, half an 80x24 screen), and an event like one toasted
less than ``TOAST_GROUP_SECONDS`` ago (the same session's watch matches, or any
completion) is held: once that time has passed, one toast says how many were held.
Before, a watched session toasted each match its cooldown let through, every 15-20 s.

Time is the events' own (``ProcessEvent.at``) and the ``now`` given, so tests drive it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from engine.processes.notify import EventKind, ProcessEvent
from engine.text import one_line

TOAST_GROUP_SECONDS = 60.0
LINE_CHARS = 70  # a toast's line, cut with …
LINES_SHOWN = 4


@dataclass(frozen=True)
class Toast:
    title: str
    body: str
    severity: str  # "information", "warning" or "error"


def _key(event: ProcessEvent) -> tuple:
    """Events alike: one session's watch matches; completions, whichever session."""
    if event.kind == EventKind.WATCH_MATCH:
        return (event.kind, event.session_id)
    if event.kind == EventKind.COMPLETION:
        return (event.kind,)
    return (event.kind, event.at)  # rare ones (watching disabled, the overflow breaker): each shown


def _severity(events: Iterable[ProcessEvent]) -> str:
    worst = "information"
    for e in events:
        if not e.ok:
            if e.kind == EventKind.COMPLETION:
                return "error"
            worst = "warning"
    return worst


def _stamp(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _held_line(held: list[ProcessEvent]) -> str:
    first, n = held[0], len(held)
    if first.kind == EventKind.COMPLETION:
        failed = sum(1 for e in held if not e.ok)
        what = f"{n} more process{'es' if n > 1 else ''} completed" + (f" ({failed} failed)" if failed else "")
    else:
        what = f"{first.session_id}: {n} more watch match{'es' if n > 1 else ''}"
    return f"{what} since {_stamp(first.at)}"


class ToastGrouper:
    """Turns each refresh's events into at most one :class:`Toast`."""

    def __init__(self, window: float = TOAST_GROUP_SECONDS) -> None:
        self.window = window
        self._last: dict[tuple, float] = {}  # key -> when its last toast was
        self._held: dict[tuple, list[ProcessEvent]] = {}

    def offer(self, events: Iterable[ProcessEvent], now: float) -> Toast | None:
        shown: list[ProcessEvent] = []
        before = dict(self._last)  # alike events of this one refresh share its toast
        for event in events:
            key = _key(event)
            last = before.get(key)
            if last is not None and event.at - last < self.window:
                self._held.setdefault(key, []).append(event)
                continue
            shown.append(event)
            self._last[key] = event.at
        lines = [one_line(e.text, LINE_CHARS) for e in shown]
        due = [key for key in self._held if now - self._last[key] >= self.window]
        held: list[ProcessEvent] = []
        for key in due:
            group = self._held.pop(key)
            held.extend(group)
            lines.append(_held_line(group))
            self._last[key] = now
        if not lines:
            return None
        severity = _severity(shown + held)
        if len(shown) == 1 and not held:
            return self._one(shown[0], severity)
        body = "\n".join(lines[:LINES_SHOWN])
        if len(lines) > LINES_SHOWN:
            body += f"\n…and {len(lines) - LINES_SHOWN} more"
        return Toast(f"{len(shown) + len(held)} process notifications (all in the processes list)", body, severity)

    @staticmethod
    def _one(event: ProcessEvent, severity: str) -> Toast:
        title = "process completed" if event.kind == EventKind.COMPLETION else event.kind.replace("_", " ")
        body = one_line(event.text, LINE_CHARS)
        if event.kind == EventKind.COMPLETION and event.detail.strip():
            body += "\n" + one_line(event.detail.rstrip().splitlines()[-1], LINE_CHARS)
        return Toast(title, body, severity)
