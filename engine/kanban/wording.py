"""Why a tick held cards back, in words a user reads (the one place that phrases it).

The dispatcher reports codes and counts (``Skip``); ``--json`` keeps those. The CLI's
human output and the board pane both phrase them here, so the two never drift apart.
Plain text only, no UI dependency: the CLI imports this without loading Textual.
"""

from __future__ import annotations

from engine.kanban.models import DispatchResult, Skip

LOCKED = "another dispatcher holds this board's lock"


def _cap(skip: Skip, whose: str) -> str:
    if skip.running is None or skip.limit is None:
        return f"waiting: {whose} cap reached"
    return f"waiting: {skip.running} of {skip.limit} running, {whose} cap"


def skip_reason(skip: Skip) -> str:
    """One held-back card's reason as a phrase, e.g. "waiting: 3 of 3 running, the profile's cap"."""
    profile = f" ({skip.profile})" if skip.profile else ""
    if skip.reason == "at_capacity":
        return _cap(skip, "the board's")
    if skip.reason == "per_profile_capped":
        return _cap(skip, "the profile's") + profile
    if skip.reason == "skipped_unassigned":
        return "unassigned, and no default assignee is set"
    if skip.reason == "skipped_nonspawnable":
        who = skip.profile or "its assignee"
        return f"{who} is not a profile this machine can spawn"
    if skip.reason == "rate_limit_cooldown":
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
    parts = [f"{n} card{'s' if n > 1 else ''} {phrase}" for phrase, n in counts.items()]
    return "held back: " + "; ".join(parts)
