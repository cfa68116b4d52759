"""The board's records as frozen dataclasses: what crosses from the store to the CLI,
the dispatcher and the pane. Rows are turned into these once, in the store."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass

# Statuses, in board (column) order (defined in engine.kanban.statuses, re-exported here).
from engine.kanban.statuses import (  # noqa: F401 - re-exported
    ARCHIVED,
    BLOCKED,
    DONE,
    FINISHED,
    READY,
    REVIEW,
    RUNNING,
    STATUSES,
    TODO,
)

TYPE_CHECKING = False  # not typing's: every board command loads this module (typing is a few ms)
if TYPE_CHECKING:
    from typing import Any


class RunOutcome(enum.StrEnum):
    """How a run ended (``task_runs.outcome``; an open run has none). The values are
    what the board stores and ``--json`` prints. hermes-agent's board may hold others:
    a run read from it keeps its outcome as the text it found."""

    COMPLETED = "completed"
    BLOCKED = "blocked"
    REVIEW = "review"
    CRASHED = "crashed"
    PROTOCOL_VIOLATION = "protocol_violation"
    RATE_LIMITED = "rate_limited"
    TIMED_OUT = "timed_out"
    RECLAIMED = "reclaimed"
    SPAWN_FAILED = "spawn_failed"
    ARCHIVED = "archived"
    HOST_LOST = "host_lost"  # its host's lease expired (shared board): reclaimed, no signal
    KILLED = "killed"  # a person killed its worker through hermes-tui (proc kill): held, not counted
    # Its launch was cut short (the dispatcher stopped) before its worker ran: the card
    # went back to ready, not counted as a failure.
    NOT_STARTED = "not_started"


class EventKind(enum.StrEnum):
    """What a card's event records (``task_events.kind``; the values are the stored ones).
    hermes-agent's board has kinds of its own: :attr:`Event.kind` stays a string."""

    CREATED = "created"
    ASSIGNED = "assigned"
    PROMOTED = "promoted"  # todo -> ready, its parents done
    CLAIMED = "claimed"
    SPAWNED = "spawned"
    SPAWN_FAILED = "spawn_failed"
    SKIPPED_NONSPAWNABLE = "skipped_nonspawnable"  # a ready card for a profile this machine cannot spawn
    LAUNCH_ADOPTED = "launch_adopted"
    LAUNCH_RELEASED = "launch_released"
    LAUNCH_HELD = "launch_held"
    CLAIM_EXTENDED = "claim_extended"
    RECLAIM_DEFERRED = "reclaim_deferred"
    RECLAIMED = "reclaimed"
    HOST_LOST = "host_lost"
    COMPLETED = "completed"
    BLOCKED = "blocked"
    REVIEW_REQUESTED = "review_requested"
    UNBLOCKED = "unblocked"
    REOPENED = "reopened"
    ARCHIVED = "archived"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    RATE_LIMITED = "rate_limited"
    PROTOCOL_VIOLATION = "protocol_violation"
    WORKER_KILLED = "worker_killed"
    WORKER_GROUP_ENDED = "worker_group_ended"
    TERMINAL_WORKER_REAPED = "terminal_worker_reaped"
    RECLAIM_WORKER_TERMINATION = "reclaim_worker_termination"
    ARCHIVE_WORKER_TERMINATION = "archive_worker_termination"
    GAVE_UP = "gave_up"  # the breaker blocked the card after its failures
    USAGE_REPORTED = "usage_reported"


@dataclass(frozen=True)
class Task:
    """One card. ``worker_started_at`` is the worker's identity fingerprint."""

    id: str
    title: str
    body: str
    assignee: str | None
    status: str
    priority: int
    created_at: float
    started_at: float | None = None
    completed_at: float | None = None
    claim_lock: str | None = None
    claim_expires: float | None = None
    worker_pid: int | None = None
    worker_started_at: str | None = None
    consecutive_failures: int = 0
    max_retries: int | None = None
    max_runtime_seconds: float | None = None
    last_failure_error: str | None = None
    last_heartbeat_at: float | None = None
    current_run_id: int | None = None
    result: str | None = None
    # Filled only by queries that ask for them (the board view); not columns.
    parent_ids: tuple[str, ...] = ()
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = _with_json_names(asdict(self))
        data["parent_ids"] = list(self.parent_ids)
        return data


@dataclass(frozen=True)
class Run:
    """One attempt at a card. A closed run keeps pid, fingerprint and lock as evidence
    for the terminal-worker reaper until that evidence is cleared."""

    id: int
    task_id: str
    profile: str | None
    status: str  # "launching" until its worker is recorded, "running" while open, "ended" once closed
    claim_lock: str | None
    worker_pid: int | None
    worker_started_at: str | None
    session_id: str | None
    output_path: str | None
    log_offset: int
    started_at: float
    ended_at: float | None
    outcome: str | None
    error: str | None
    summary: str | None

    def to_json(self) -> dict[str, Any]:
        return _with_json_names(asdict(self))


@dataclass(frozen=True)
class Event:
    """One entry of a card's history (``task_events``)."""

    id: int
    task_id: str
    run_id: int | None
    kind: str  # an EventKind on hermes-tui's board
    payload: dict[str, Any]
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _with_json_names(data: dict[str, Any]) -> dict[str, Any]:
    """A model's fields under their ``--json`` names: a worker's ``session_id`` is
    ``process_id`` there (and in the ``task_runs`` column), the name it had when the
    JSON was first documented; scripts that read it keep working."""
    if "session_id" in data:
        data = {("process_id" if k == "session_id" else k): v for k, v in data.items()}
    return data


def dump_payload(payload: dict[str, Any] | None) -> str:
    return json.dumps(payload or {}, sort_keys=True, default=str)


def load_payload(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


@dataclass(frozen=True)
class NewTask:
    """What creating a card needs (one or many at once)."""

    title: str
    body: str = ""
    assignee: str | None = None
    parents: tuple[str, ...] = ()
    priority: int = 0
    max_retries: int | None = None
    max_runtime_seconds: float | None = None


@dataclass(frozen=True)
class Comment:
    """A comment on a card (hermes-agent's board keeps them; hermes-tui's has none)."""

    id: int
    task_id: str
    author: str
    body: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaskDetails:
    """A card with its runs, events and comments (``show``, the details modal)."""

    task: Task
    parents: tuple[str, ...]
    children: tuple[str, ...]
    runs: tuple[Run, ...]
    events: tuple[Event, ...]
    comments: tuple[Comment, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = self.task.to_json()
        data["parent_ids"] = list(self.parents)
        data["child_ids"] = list(self.children)
        data["runs"] = [r.to_json() for r in self.runs]
        data["events"] = [e.to_json() for e in self.events]
        data["comments"] = [c.to_json() for c in self.comments]
        return data
