"""Why a tick held cards back, and what a change to a card did, in words a user reads
(the one place that phrases them).

The dispatcher reports codes and counts (``Skip``) and a change reports a
``TransitionResult``; ``--json`` keeps those. The CLI's human output and the board pane
both phrase them here, so the two never drift apart. Plain text only, no UI dependency:
the CLI imports this without loading Textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.kanban.models import DispatchResult, HoldReason, Skip
from engine.text import count_of

if TYPE_CHECKING:
    from engine.kanban.transitions import TransitionResult
    from engine.kanban.workers import StopReport

LOCKED = "another dispatcher holds this board's lock"


def _cap(skip: Skip, whose: str) -> str:
    if skip.running is None or skip.limit is None:
        return f"waiting: {whose} cap reached"
    return f"waiting: {skip.running} of {skip.limit} running, {whose} cap"


def skip_reason(skip: Skip) -> str:
    """One held-back card's reason as a phrase, e.g. "waiting: 3 of 3 running, the profile's cap"."""
    profile = f" ({skip.profile})" if skip.profile else ""
    if skip.reason == HoldReason.AT_CAPACITY:
        return _cap(skip, "the board's")
    if skip.reason == HoldReason.PER_PROFILE_CAPPED:
        return _cap(skip, "the profile's") + profile
    if skip.reason == HoldReason.SKIPPED_UNASSIGNED:
        return "unassigned, and no default assignee is set"
    if skip.reason == HoldReason.SKIPPED_NONSPAWNABLE:
        if skip.profile:
            return f"assigned to {skip.profile!r}, not a profile this machine can spawn"
        return "assigned to a profile this machine cannot spawn"
    if skip.reason == HoldReason.RATE_LIMIT_COOLDOWN:
        return "cooling down after a rate limit"
    return skip.reason.replace("_", " ")


def held_back_words(result: DispatchResult) -> str:
    """The tick's held-back line in words ("" when something spawned or nothing waited).

    Cards held for the same reason are counted together, in the order first seen.
    """
    if result.spawned:
        return ""
    if result.skipped_locked:
        return f"held back: {LOCKED}"
    counts: dict[str, int] = {}
    for skip in result.skipped:
        phrase = skip_reason(skip)
        counts[phrase] = counts.get(phrase, 0) + 1
    if not counts:
        return ""
    parts = [f"{count_of(n, 'card')} {phrase}" for phrase, n in counts.items()]
    return "held back: " + "; ".join(parts)


def failure_reset_words(failures: int) -> str:
    """What a reclaim or an unblock does to the failure counter: "" when it is already 0
    (nothing to reset is nothing to say)."""
    return f"its failure counter ({failures}) resets to 0" if failures else ""


# A change's verb -> how its result line starts.
_PAST = {"move": "Moved", "complete": "Completed", "block": "Blocked",
         "review": "Sent to review", "reclaim": "Reclaimed", "unblock": "Unblocked", "archive": "Archived",
         "heartbeat": "Heartbeat recorded for"}


def change_words(verb: str, result: TransitionResult) -> str:
    """What a change did to a card, in one line, e.g.
    "Archived t3  (running -> archived); worker pid 42 stopped"."""
    line = f"{_PAST[verb]} {result.task_id}"
    if result.from_status != result.to_status:
        line += f"  ({result.from_status} -> {result.to_status})"
    return line + _stop_words(result.stop)


def assign_words(task_id: str, profile: str | None) -> str:
    """A reassignment's line ("Assigned t3 to nobody" when the assignee was removed)."""
    return f"Assigned {task_id} to {profile or 'nobody'}"


def _stop_words(stop: StopReport | None) -> str:
    """What happened to the card's worker ("" when no worker pid is recorded)."""
    if stop is None or not stop.pid:
        return ""
    if stop.attempted:
        if stop.stopped:
            return f"; worker pid {stop.pid} stopped"
        return f"; worker pid {stop.pid} SURVIVED ({', '.join(map(str, stop.survivors))})"
    if stop.refused:
        return f"; worker pid {stop.pid} not signalled: {stop.refused}"
    if stop.pid_recycled:
        return f"; worker pid {stop.pid} now belongs to another process: not signalled"
    return ""
