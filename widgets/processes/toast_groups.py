"""Which process notifications become toasts, and how many at once.

Every event goes to the processes pane's notifications list; the toasts are only the
nudge. One refresh gives at most one toast (the demo's first refresh used to open a
completion and a watch match, half an 80x24 screen), an event coming less than
``TOAST_SETTLE_SECONDS`` after a toast waits that long, and an event like one toasted
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
TOAST_SETTLE_SECONDS = 10.0  # after any toast, the next waits this long (a toast shows for 5 s)
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


def _held_line(held: list[ProcessEvent], after_a_toast: bool) -> str:
    """One line for a held group: "N more …" after a toast of its kind, else what came."""
    first, n = held[0], len(held)
    if n == 1 and not after_a_toast:
        return one_line(first.text, LINE_CHARS)
    more = " more" if after_a_toast else ""
    if first.kind == EventKind.COMPLETION:
        failed = sum(1 for e in held if not e.ok)
        what = f"{n}{more} process{'es' if n > 1 else ''} completed" + (f" ({failed} failed)" if failed else "")
    elif first.kind == EventKind.WATCH_MATCH:
        what = f"{first.session_id}: {n}{more} watch match{'es' if n > 1 else ''}"
    else:
        what = f"{n}{more} {first.kind.replace('_', ' ')} events"
    return f"{what} since {_stamp(first.at)}"


class ToastGrouper:
    """Turns each refresh's events into at most one :class:`Toast`: an event like one
    toasted under ``window`` seconds ago waits out that window, and any event coming
    under ``settle`` seconds after a toast waits that long (toasts never pile up: the
    demo's first completion and watch match came two refreshes apart)."""

    def __init__(self, window: float = TOAST_GROUP_SECONDS, settle: float = TOAST_SETTLE_SECONDS) -> None:
        self.window = window
        self.settle = settle
        self._last: dict[tuple, float] = {}  # key -> when its last toast was
        self._last_any: float | None = None  # when the last toast was
        self._held: dict[tuple, list[ProcessEvent]] = {}
        self._until: dict[tuple, float] = {}  # key -> when its held events are toasted

    def offer(self, events: Iterable[ProcessEvent], now: float) -> Toast | None:
        shown: list[ProcessEvent] = []
        before, last_any = dict(self._last), self._last_any  # alike events of one refresh share its toast
        for event in events:
            key = _key(event)
            until = max(before[key] + self.window if key in before else 0.0,
                        last_any + self.settle if last_any is not None else 0.0)
            if key in self._held or event.at < until:
                self._held.setdefault(key, []).append(event)
                self._until[key] = max(self._until.get(key, until), until)
                continue
            shown.append(event)
            self._last[key] = event.at
        lines = [one_line(e.text, LINE_CHARS) for e in shown]
        held: list[ProcessEvent] = []
        for key in [k for k, until in self._until.items() if now >= until]:
            group = self._held.pop(key)
            del self._until[key]
            held.extend(group)
            lines.append(_held_line(group, after_a_toast=key in before))
            self._last[key] = now
        if not lines:
            return None
        self._last_any = now
        severity = _severity(shown + held)
        if len(shown) + len(held) == 1:
            return self._one((shown + held)[0], severity)
        body = "\n".join(lines[:LINES_SHOWN])
        if len(lines) > LINES_SHOWN:
            body += f"\n…and {len(lines) - LINES_SHOWN} more"
        return Toast(f"{len(shown) + len(held)} process notifications", body, severity)

    @staticmethod
    def _one(event: ProcessEvent, severity: str) -> Toast:
        title = "process completed" if event.kind == EventKind.COMPLETION else event.kind.replace("_", " ")
        body = one_line(event.text, LINE_CHARS)
        if event.kind == EventKind.COMPLETION and event.detail.strip():
            body += "\n" + one_line(event.detail.rstrip().splitlines()[-1], LINE_CHARS)
        return Toast(title, body, severity)
