"""What one dispatch tick did, and why it did not do more (the records the dispatcher
returns and the CLI, the pane and the attention list read). Kept apart from
:mod:`engine.kanban.models` so a board command that dispatches nothing (``kanban
create``) does not make their classes."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.kanban.models import _with_json_names


class HoldReason(enum.StrEnum):
    """Why a tick held a ready card back (the keys of the "held back" line; the words
    for them are engine.kanban.wording's)."""

    SKIPPED_UNASSIGNED = "skipped_unassigned"
    SKIPPED_NONSPAWNABLE = "skipped_nonspawnable"
    AT_CAPACITY = "at_capacity"
    PER_PROFILE_CAPPED = "per_profile_capped"
    RATE_LIMIT_COOLDOWN = "rate_limit_cooldown"
    # Its last run's worker runs on another host, which has not confirmed its stop yet
    # (on a server board: and still holds its lease): starting it here would run two workers.
    AWAITING_HOST_STOP = "awaiting_host_stop"
    # Something of its last run still runs on this host (a worker, or what it started in
    # another group or session): held until nothing of that run is left.
    LAST_RUN_ALIVE = "last_run_alive"
    SKIPPED_LOCKED = "skipped_locked"  # the whole tick: another dispatcher had the board


@dataclass(frozen=True)
class SpawnedCard:
    """A card the tick gave a worker."""

    task_id: str
    assignee: str
    pid: int | None
    session_id: str | None = None


@dataclass(frozen=True)
class Skip:
    """A ready card the tick did not spawn, and why (the numbers behind a cap are kept so
    the wording can say "3 of 3 running")."""

    task_id: str
    reason: HoldReason
    running: int | None = None  # at_capacity / per_profile_capped: workers running then
    limit: int | None = None  # ... and the cap they reached
    profile: str | None = None  # the card's assignee
    host: str | None = None  # awaiting_host_stop: the host its last worker runs on
    pid: int | None = None  # ... and that worker's pid


@dataclass(frozen=True)
class DispatchResult:
    """What one tick did, and why it did not do more."""

    spawned: tuple[SpawnedCard, ...] = ()
    reclaimed: tuple[str, ...] = ()
    extended: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    crashed: tuple[str, ...] = ()
    rate_limited: tuple[str, ...] = ()
    protocol_violations: tuple[str, ...] = ()
    completed_on_exit: tuple[str, ...] = ()
    timed_out: tuple[str, ...] = ()
    reaped_terminal_workers: tuple[str, ...] = ()
    promoted: tuple[str, ...] = ()
    auto_blocked: tuple[str, ...] = ()
    auto_assigned: tuple[str, ...] = ()
    skipped: tuple[Skip, ...] = ()
    skipped_locked: bool = False
    spawn_failed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    # Launches a stopped dispatcher left unrecorded (runs still ``launching``), resolved:
    launch_adopted: tuple[str, ...] = ()  # its worker was found: recorded on the run
    launch_released: tuple[str, ...] = ()  # proven never started: the card is ready again
    launch_held: tuple[str, ...] = ()  # cannot be told: held (each also has a warning)

    @property
    def held_back_counts(self) -> dict[str, int]:
        """How many ready cards the tick held back, by reason code (``skipped_locked`` when
        another dispatcher had the board), sorted by code; empty when something spawned.
        The words for them are engine.kanban.wording's."""
        if self.spawned:
            return {}
        counts: dict[str, int] = {}
        for skip in self.skipped:
            counts[skip.reason] = counts.get(skip.reason, 0) + 1
        if self.skipped_locked:
            counts[HoldReason.SKIPPED_LOCKED] = counts.get(HoldReason.SKIPPED_LOCKED, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def held_back(self) -> str:
        """The counts as codes, ``Last tick held back: key=N, ...`` (the ``--json`` field),
        or "" when there are none."""
        counts = self.held_back_counts
        return "Last tick held back: " + ", ".join(f"{k}={n}" for k, n in counts.items()) if counts else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "spawned": [_with_json_names(asdict(s)) for s in self.spawned],
            "reclaimed": list(self.reclaimed),
            "extended": list(self.extended),
            "deferred": list(self.deferred),
            "crashed": list(self.crashed),
            "rate_limited": list(self.rate_limited),
            "protocol_violations": list(self.protocol_violations),
            "completed_on_exit": list(self.completed_on_exit),
            "timed_out": list(self.timed_out),
            "reaped_terminal_workers": list(self.reaped_terminal_workers),
            "promoted": list(self.promoted),
            "auto_blocked": list(self.auto_blocked),
            "auto_assigned": list(self.auto_assigned),
            "spawn_failed": list(self.spawn_failed),
            "skipped": [asdict(s) for s in self.skipped],
            "skipped_locked": self.skipped_locked,
            "held_back": self.held_back,
            "warnings": list(self.warnings),
            "launch_adopted": list(self.launch_adopted),
            "launch_released": list(self.launch_released),
            "launch_held": list(self.launch_held),
        }

