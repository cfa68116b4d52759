"""The failure breaker: how many failed attempts a card gets before it is blocked.

A card's own ``max_retries`` wins over ``kanban.failure_limit``. Crashes, timeouts,
stale-claim reclaims and failed spawns count; rate-limit exits and launches released
as never started (``not_started``) do not. Protocol
violations (exit 0 without a board call) have their own budget, a streak of 3, so a
worker that "forgets" to report is stopped without eating the crash budget. At the
limit the card goes to ``blocked`` with a ``gave_up`` event saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.kanban.backends.sqlite.store import Conn, add_event
from engine.kanban.models import BLOCKED, EventKind, RunOutcome, Task

PROTOCOL_VIOLATION_BUDGET = 3
ERROR_MAX_CHARS = 1000


@dataclass(frozen=True)
class FailureVerdict:
    failures: int
    effective_limit: int
    limit_source: str  # "task" (max_retries) or "dispatcher" (kanban.failure_limit)
    gave_up: bool


def effective_limit(task: Task, failure_limit: int) -> tuple[int, str]:
    if task.max_retries is not None and task.max_retries > 0:
        return task.max_retries, "task"
    return max(1, int(failure_limit)), "dispatcher"


def count_failure(task: Task, failure_limit: int) -> FailureVerdict:
    """One more counted failure for ``task``: is that the last one allowed?"""
    limit, source = effective_limit(task, failure_limit)
    failures = task.consecutive_failures + 1
    return FailureVerdict(failures, limit, source, failures >= limit)


async def protocol_violation_streak(conn: Conn, task_id: str) -> int:
    """Consecutive protocol-violation runs, newest first (rate-limited and not-started runs are neutral)."""
    rows = await conn.execute_fetchall(
        "SELECT outcome FROM task_runs WHERE task_id = ? AND ended_at IS NOT NULL ORDER BY id DESC LIMIT 50",
        (task_id,),
    )
    streak = 0
    for (outcome,) in rows:
        if outcome in (RunOutcome.RATE_LIMITED, RunOutcome.NOT_STARTED):
            continue
        if outcome != RunOutcome.PROTOCOL_VIOLATION:
            break
        streak += 1
    return streak


async def record_failure(
    conn: Conn,
    task: Task,
    *,
    error: str,
    outcome: RunOutcome,
    failure_limit: int,
    now: float,
    run_id: int | None,
    retry_status: str,
) -> FailureVerdict:
    """Count one failure for a card already requeued to ``retry_status`` in this
    transaction; block it (``gave_up``) at the limit."""
    error = error[:ERROR_MAX_CHARS]
    verdict = count_failure(task, failure_limit)
    status = BLOCKED if verdict.gave_up else retry_status
    await conn.execute(
        "UPDATE tasks SET consecutive_failures = ?, last_failure_error = ?, status = ? WHERE id = ?",
        (verdict.failures, error, status, task.id),
    )
    if verdict.gave_up:
        await add_event(conn, task.id, EventKind.GAVE_UP, {
            "failures": verdict.failures,
            "effective_limit": verdict.effective_limit,
            "limit_source": verdict.limit_source,
            "error": error,
            "trigger_outcome": outcome,
        }, now, run_id)
    return verdict


async def record_protocol_violation(
    conn: Conn, task: Task, *, error: str, now: float, run_id: int | None, retry_status: str
) -> FailureVerdict:
    """Stamp the error; block the card once the streak reaches its own budget."""
    error = error[:ERROR_MAX_CHARS]
    streak = await protocol_violation_streak(conn, task.id)
    if task.max_retries is not None and task.max_retries > 0:
        budget, source = task.max_retries, "task"
    else:
        budget, source = PROTOCOL_VIOLATION_BUDGET, "protocol_violation_budget"
    gave_up = streak >= budget
    await conn.execute(
        "UPDATE tasks SET last_failure_error = ?, status = ? WHERE id = ?",
        (error, BLOCKED if gave_up else retry_status, task.id),
    )
    if gave_up:
        await add_event(conn, task.id, EventKind.GAVE_UP, {
            "failures": streak,
            "effective_limit": budget,
            "limit_source": source,
            "error": error,
            "trigger_outcome": RunOutcome.PROTOCOL_VIOLATION,
        }, now, run_id)
    return FailureVerdict(streak, budget, source, gave_up)
