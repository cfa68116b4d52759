"""Every state change a person or a worker makes to a card.

Each function is ONE transaction whose UPDATE is a compare-and-set on what was read
(``WHERE status = ? AND claim_lock IS ?`` or, for a worker, ``current_run_id = ?``), so
a change that raced with a dispatcher or another window fails with one clear line
instead of overwriting. Signals to a worker (reclaim, archive) happen outside the
transaction and only through :func:`engine.kanban.workers.stop_worker`.
"""

from __future__ import annotations

import asyncio
import enum
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.kanban.backend import StoreError, TransitionResult
from engine.kanban.backends.sqlite.store import Board, Conn, add_event
from engine.kanban.hosts import is_host_local
from engine.kanban.models import (
    ARCHIVED,
    BLOCKED,
    DONE,
    FINISHED,
    READY,
    REVIEW,
    RUNNING,
    STATUSES,
    TODO,
    EventKind,
    NewTask,
    RunOutcome,
    Task,
    dump_payload,
)

TYPE_CHECKING = False  # not typing's
if TYPE_CHECKING:
    from engine.kanban.workers import StopReport

# The moves a person may make, from -> allowed targets (the dispatcher owns
# ready -> running and the requeues out of running).
MOVES: dict[str, tuple[str, ...]] = {
    TODO: (READY,),
    READY: (REVIEW, BLOCKED, DONE),
    RUNNING: (REVIEW, BLOCKED, DONE),
    REVIEW: (READY, DONE),
    BLOCKED: (READY, DONE),
    DONE: (),
    ARCHIVED: (),
}
# The columns a move steps across, left to right (archiving is its own verb).
MOVE_COLUMNS = tuple(s for s in STATUSES if s != ARCHIVED)


def next_move(status: str, step: int) -> str | None:
    """The nearest column in ``step``'s direction (+1 right, -1 left) that a person may
    move a card in ``status`` to, or None (the card stays)."""
    if status not in MOVE_COLUMNS:
        return None
    allowed = MOVES.get(status, ())
    i = MOVE_COLUMNS.index(status) + step
    while 0 <= i < len(MOVE_COLUMNS):
        if MOVE_COLUMNS[i] in allowed:
            return MOVE_COLUMNS[i]
        i += step
    return None


class StopPlan(enum.Enum):
    """What stopping a card's worker (reclaim, archive) will do to it, judged now."""

    NO_WORKER = "no_worker"  # no pid recorded: nothing is signalled
    OTHER_HOST = "other_host"  # it runs on another host: nothing is signalled
    SIGNAL = "signal"  # verified alive: TERM to its group, KILL after the grace
    UNVERIFIED = "unverified"  # alive but never verified: NOT signalled
    RECYCLED = "recycled"  # the pid is another process now: NOT signalled
    EXITED = "exited"  # already gone: nothing is signalled


def stop_plan(task: Task) -> StopPlan:
    """The plan for ``task``'s worker, as :func:`engine.kanban.workers.stop_worker` will
    judge it (reads /proc for a local pid)."""
    from engine.identity import Liveness, liveness

    if not task.worker_pid:
        return StopPlan.NO_WORKER
    if not is_host_local(task.claim_lock):
        return StopPlan.OTHER_HOST
    return {Liveness.ALIVE: StopPlan.SIGNAL, Liveness.UNVERIFIED_ALIVE: StopPlan.UNVERIFIED,
            Liveness.RECYCLED: StopPlan.RECYCLED}.get(liveness(task.worker_pid, task.worker_started_at),
                                                      StopPlan.EXITED)


# Clears the worker of a card leaving ``running`` (pid and fingerprint always together).
CLEAR_WORKER = ("claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_started_at = NULL, "
                "current_run_id = NULL, last_heartbeat_at = NULL")

IdFactory = Callable[[], str]


class TransitionRefused(StoreError):
    """The change is not allowed now (wrong status, not the worker's run, lost a race)."""


def new_task_id() -> str:
    return "t_" + os.urandom(4).hex()  # secrets.token_hex's bytes, without importing secrets (hashlib, random)


class CardChanged(TransitionRefused):
    """The card's run (or worker) is no longer the one the person was shown."""


@dataclass(frozen=True)
class Expected:
    """What a person was shown when they chose the action (a board dialog): the card's
    run and worker pid. The action is refused, and nothing signalled, if either changed."""

    run_id: int | None
    worker_pid: int | None

    @classmethod
    def of(cls, task: Task) -> Expected:
        return cls(task.current_run_id, task.worker_pid)


def check_expected(task: Task, expected: Expected | None) -> None:
    """Refuse (:class:`CardChanged`, one line) when the card's run or worker is not what was shown."""
    if expected is None or Expected.of(task) == expected:
        return
    raise CardChanged(
        f"{task.id}: the card changed: look again (shown: run {expected.run_id or '-'}, worker pid "
        f"{expected.worker_pid or '-'}; now: {task.status}, run {task.current_run_id or '-'}, worker pid "
        f"{task.worker_pid or '-'})")


async def refuse_a_cut_short_launch(board: Board, task: Task) -> None:
    """A person's change that ends a running card's run, while that run is still
    ``launching`` (no worker recorded) and the dispatcher that claimed it, on this host,
    is gone: its worker may run, and only a tick's lookup by launch token finds it, so the
    change would leave it running unseen. Refused in one line until a tick resolved it
    (a tick of the home that claimed it, when that is another home of this host: see
    engine.kanban.launch_owner). A claiming dispatcher still alive (its pid, and the start
    time its claim recorded) records the worker itself and stops it, since the run is no
    longer its card's."""
    if task.status != RUNNING or task.worker_pid is not None or task.current_run_id is None:
        return
    rows = await board.fetch(
        "SELECT r.status, (SELECT e.payload FROM task_events e WHERE e.task_id = r.task_id AND e.run_id = r.id "
        "AND e.kind = ? ORDER BY e.id LIMIT 1) FROM task_runs r WHERE r.id = ?",
        (EventKind.CLAIMED, task.current_run_id))
    if not rows or rows[0][0] != "launching" or not is_host_local(task.claim_lock):
        return
    from engine.identity import Liveness
    from engine.kanban.launch_owner import LaunchOwner

    owner = LaunchOwner.of(task.claim_lock, rows[0][1])
    if owner.fingerprint is None:  # claimed by an older hermes-tui: its pid only
        if owner.pid and _process_exists(owner.pid):
            return
    elif owner.launcher() is Liveness.ALIVE:
        return
    where = f" of home {owner.home}, which claimed it," if owner.home is not None else ""
    raise TransitionRefused(
        f"{task.id}: its worker's launch (run {task.current_run_id}) was cut short and is not resolved yet, so its "
        f"worker may run unrecorded: run a dispatcher tick{where} first (hermes-tui kanban dispatch), then try again")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the pid exists; nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class WorkerCall:
    """Who is calling: a worker (its task and run from its environment) or a person."""

    task_id: str | None = None
    run_id: int | None = None

    @property
    def is_worker(self) -> bool:
        return self.task_id is not None or self.run_id is not None


# --------------------------------------------------------------------------------------
# Creating
# --------------------------------------------------------------------------------------


async def _open_parents(conn: Conn, parent_ids: Sequence[str]) -> dict[str, str]:
    """parent id -> status, for all given ids (chunked IN queries)."""
    found: dict[str, str] = {}
    ids = list(dict.fromkeys(parent_ids))
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        rows = await conn.execute_fetchall(
            f"SELECT id, status FROM tasks WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        found.update({r[0]: r[1] for r in rows})
    return found


async def create_tasks(board: Board, new: Sequence[NewTask], *, id_factory: IdFactory = new_task_id,
                       actor: str = "cli") -> list[Task]:
    """Create cards in one transaction (one call on the board's thread): ``ready``, or
    ``todo`` while a parent is open."""
    for item in new:
        if not item.title.strip():
            raise TransitionRefused("a card needs a title")
    now = board.now()

    async def insert(conn: Conn) -> list[Task]:
        statuses = await _open_parents(conn, [p for item in new for p in item.parents])
        tasks: list[Task] = []
        links: list[tuple[str, str]] = []
        used: set[str] = set()
        for item in new:
            missing = [p for p in item.parents if p not in statuses]
            if missing:
                raise TransitionRefused(f"no parent card {missing[0]!r} on this board")
            status = TODO if any(statuses[p] not in FINISHED for p in item.parents) else READY
            task_id = id_factory()
            while task_id in used:
                task_id = id_factory()
            used.add(task_id)
            tasks.append(Task(id=task_id, title=item.title.strip(), body=item.body, assignee=item.assignee or None,
                              status=status, priority=item.priority, created_at=now,
                              max_retries=item.max_retries, max_runtime_seconds=item.max_runtime_seconds,
                              parent_ids=tuple(item.parents)))
            links.extend((p, task_id) for p in dict.fromkeys(item.parents))
        try:
            await conn.executemany(
                "INSERT INTO tasks (id, title, body, assignee, status, priority, created_at, max_retries, "
                "max_runtime_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(t.id, t.title, t.body, t.assignee, t.status, t.priority, t.created_at, t.max_retries,
                  t.max_runtime_seconds) for t in tasks],
            )
        except sqlite3.IntegrityError:
            raise TransitionRefused("a card id collided with an existing one; try again") from None
        if links:
            await conn.executemany("INSERT OR IGNORE INTO task_links (parent_id, child_id) VALUES (?, ?)", links)
        await conn.executemany(
            "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) VALUES (?, NULL, ?, ?, ?)",
            [(t.id, EventKind.CREATED, dump_payload({"status": t.status, "assignee": t.assignee, "by": actor}), now) for t in tasks],
        )
        return tasks

    return await board.atomic(insert)


async def create_task(board: Board, new: NewTask, **kwargs) -> Task:
    return (await create_tasks(board, [new], **kwargs))[0]


# --------------------------------------------------------------------------------------
# Helpers shared by the transitions and the dispatcher
# --------------------------------------------------------------------------------------


async def close_run(conn: Conn, run_id: int | None, outcome: RunOutcome, now: float, *,
                    error: str | None = None, summary: str | None = None) -> None:
    """End a run. Pid, fingerprint and lock stay on the row as evidence for the
    terminal-worker reaper; only the claim's expiry goes."""
    if run_id is None:
        return
    await conn.execute(
        "UPDATE task_runs SET status = 'ended', ended_at = ?, outcome = ?, error = ?, summary = ?, "
        "claim_expires = NULL WHERE id = ? AND ended_at IS NULL",
        (now, outcome, error, summary, run_id),
    )


async def has_open_parent(conn: Conn, task_id: str) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id "
        f"WHERE l.child_id = ? AND p.status NOT IN ('{DONE}', '{ARCHIVED}') LIMIT 1", (task_id,))
    return bool(rows)


def _check_worker_call(task: Task, call: WorkerCall, verb: str) -> None:
    """A worker may only act on its own card's current run."""
    if not call.is_worker:
        return
    if call.task_id is not None and call.task_id != task.id:
        raise TransitionRefused(f"refused: this worker works card {call.task_id}, not {task.id}")
    if call.run_id is None:
        raise TransitionRefused(f"refused: {verb} from a worker needs its run id (HERMES_KANBAN_RUN_ID)")
    if task.status != RUNNING or task.current_run_id != call.run_id:
        now_ = f"run {task.current_run_id}" if task.current_run_id else "no open run"
        raise TransitionRefused(
            f"refused: run {call.run_id} is not the current run of {task.id} (card is {task.status}, {now_})")


async def _cas_update(conn: Conn, task: Task, assignments: str, params: Sequence,
                      call: WorkerCall, *, same_worker: bool = False) -> None:
    """UPDATE tasks SET <assignments> only if the card is still as we read it
    (``same_worker``: its worker pid too, for a change that then signals that pid)."""
    if call.is_worker:
        cur = await conn.execute(
            f"UPDATE tasks SET {assignments} WHERE id = ? AND status = ? AND current_run_id IS ?",
            (*params, task.id, RUNNING, call.run_id))
    else:
        worker = " AND worker_pid IS ?" if same_worker else ""
        cur = await conn.execute(
            f"UPDATE tasks SET {assignments} WHERE id = ? AND status = ? AND claim_lock IS ? "
            f"AND current_run_id IS ?{worker}",
            (*params, task.id, task.status, task.claim_lock, task.current_run_id,
             *((task.worker_pid,) if same_worker else ())))
    if cur.rowcount != 1:
        raise TransitionRefused(f"{task.id} changed while this was being done; look again and retry")


# --------------------------------------------------------------------------------------
# Ending a run or moving a card
# --------------------------------------------------------------------------------------


async def _finish(board: Board, task_id: str, *, to_status: str, from_allowed: tuple[str, ...], outcome: RunOutcome,
                  event: EventKind, text: str | None, text_key: str, call: WorkerCall, verb: str,
                  expected: Expected | None = None) -> TransitionResult:
    if call.task_id is not None and call.task_id != task_id:
        raise TransitionRefused(f"refused: this worker works card {call.task_id}, not {task_id}")
    task = await board.get_task(task_id)
    _check_worker_call(task, call, verb)
    check_expected(task, expected)
    if not call.is_worker:
        await refuse_a_cut_short_launch(board, task)
    if task.status not in from_allowed:
        raise TransitionRefused(f"cannot {verb} {task.id}: it is {task.status} "
                                f"(allowed from {', '.join(from_allowed)})")
    now = board.now()
    sets = [CLEAR_WORKER, "status = ?"]
    params: list = [to_status]
    if to_status == DONE:
        sets.append("completed_at = ?, result = ?, consecutive_failures = 0, last_failure_error = NULL")
        params.extend([now, text])
    async with board.transaction() as conn:
        await _cas_update(conn, task, ", ".join(sets), params, call)
        await close_run(conn, task.current_run_id, outcome, now, summary=text)
        await add_event(conn, task.id, event, {text_key: text, "by": "worker" if call.is_worker else "operator",
                                                "from_status": task.status}, now, task.current_run_id)
    return TransitionResult(task.id, task.status, to_status)


async def complete(board: Board, task_id: str, summary: str | None = None,
                   call: WorkerCall = WorkerCall(), expected: Expected | None = None) -> TransitionResult:
    return await _finish(board, task_id, to_status=DONE, from_allowed=(RUNNING, READY, BLOCKED, REVIEW),
                         outcome=RunOutcome.COMPLETED, event=EventKind.COMPLETED, text=summary, text_key="summary",
                         call=call, verb="complete", expected=expected)


async def block(board: Board, task_id: str, reason: str | None = None,
                call: WorkerCall = WorkerCall(), expected: Expected | None = None) -> TransitionResult:
    return await _finish(board, task_id, to_status=BLOCKED, from_allowed=(RUNNING, READY),
                         outcome=RunOutcome.BLOCKED, event=EventKind.BLOCKED, text=reason, text_key="reason",
                         call=call, verb="block", expected=expected)


async def review(board: Board, task_id: str, summary: str | None = None,
                 call: WorkerCall = WorkerCall(), expected: Expected | None = None) -> TransitionResult:
    return await _finish(board, task_id, to_status=REVIEW, from_allowed=(RUNNING, READY),
                         outcome=RunOutcome.REVIEW, event=EventKind.REVIEW_REQUESTED, text=summary, text_key="summary",
                         call=call, verb="send to review", expected=expected)


async def heartbeat(board: Board, task_id: str, call: WorkerCall, claim_ttl: float) -> TransitionResult:
    """A worker says it is alive: extends its claim by the TTL."""
    if call.task_id is not None and call.task_id != task_id:
        raise TransitionRefused(f"refused: this worker works card {call.task_id}, not {task_id}")
    task = await board.get_task(task_id)
    if not call.is_worker:
        raise TransitionRefused("refused: heartbeat is a worker call (HERMES_KANBAN_TASK and "
                                "HERMES_KANBAN_RUN_ID are not set)")
    _check_worker_call(task, call, "heartbeat")
    now = board.now()
    async with board.transaction() as conn:
        await _cas_update(conn, task, "last_heartbeat_at = ?, claim_expires = ?", (now, now + claim_ttl), call)
        await conn.execute("UPDATE task_runs SET claim_expires = ? WHERE id = ?", (now + claim_ttl, call.run_id))
    return TransitionResult(task.id, task.status, task.status)


async def unblock(board: Board, task_id: str) -> TransitionResult:
    """blocked -> ready (todo while a parent is open); the failure counter starts again."""
    task = await board.get_task(task_id)
    if task.status != BLOCKED:
        raise TransitionRefused(f"cannot unblock {task.id}: it is {task.status}, not blocked")
    now = board.now()
    async with board.transaction() as conn:
        to_status = TODO if await has_open_parent(conn, task.id) else READY
        await _cas_update(conn, task, "status = ?, consecutive_failures = 0", (to_status,), WorkerCall())
        await add_event(conn, task.id, EventKind.UNBLOCKED, {"status": to_status,
                                                     "failures_were": task.consecutive_failures}, now)
    return TransitionResult(task.id, task.status, to_status)


async def reopen(board: Board, task_id: str) -> TransitionResult:
    """review -> ready (changes requested); todo -> ready once its parents are finished."""
    task = await board.get_task(task_id)
    if task.status not in (REVIEW, TODO):
        raise TransitionRefused(f"cannot move {task.id} to ready: it is {task.status}")
    now = board.now()
    async with board.transaction() as conn:
        if await has_open_parent(conn, task.id):
            raise TransitionRefused(f"cannot move {task.id} to ready: a parent card is not done yet")
        await _cas_update(conn, task, "status = ?", (READY,), WorkerCall())
        await add_event(conn, task.id, EventKind.REOPENED, {"from_status": task.status}, now)
    return TransitionResult(task.id, task.status, READY)


async def assign(board: Board, task_id: str, assignee: str | None) -> TransitionResult:
    """Give a card to a profile (None: unassign). A different profile starts with a clean
    failure counter: the old one's failures say nothing about the new one."""
    task = await board.get_task(task_id)
    if task.status in (RUNNING, ARCHIVED, DONE):
        raise TransitionRefused(f"cannot reassign {task.id}: it is {task.status}"
                                + (" (reclaim it first)" if task.status == RUNNING else ""))
    assignee = (assignee or "").strip() or None
    if assignee == task.assignee:
        return TransitionResult(task.id, task.status, task.status)
    now = board.now()
    async with board.transaction() as conn:
        await _cas_update(conn, task, "assignee = ?, consecutive_failures = 0", (assignee,), WorkerCall())
        await add_event(conn, task.id, EventKind.ASSIGNED, {"assignee": assignee, "previous": task.assignee,
                                                    "source": "operator",
                                                    "failures_were": task.consecutive_failures}, now)
    return TransitionResult(task.id, task.status, task.status)


async def _stop(board: Board, task: Task, grace: float) -> StopReport:
    # With engine.identity: only a change that may signal a worker loads them.
    from engine.kanban.workers import stop_worker

    session_id = None
    if task.current_run_id is not None:  # the worker's session: what it started is found by its id too
        rows = await board.fetch("SELECT process_id FROM task_runs WHERE id = ?", (task.current_run_id,))
        session_id = rows[0][0] if rows else None
    return await asyncio.to_thread(stop_worker, task.worker_pid, task.worker_started_at, task.claim_lock, grace,
                                   session_id)


async def _record_stop(board: Board, task: Task, stop: StopReport, event: EventKind) -> None:
    """After a change took the card's run away: what stopping its worker did, and the
    run's evidence dropped once nothing of it is left."""
    async with board.transaction() as conn:
        if stop.stopped and task.current_run_id is not None:
            await conn.execute(
                "UPDATE task_runs SET worker_pid = NULL, worker_started_at = NULL WHERE id = ? AND worker_pid IS ?",
                (task.current_run_id, task.worker_pid))
        await add_event(conn, task.id, event, stop.to_json(), board.now(), task.current_run_id)


async def reclaim(board: Board, task_id: str, *, reason: str = "", grace: float = 2.0,
                  expected: Expected | None = None) -> TransitionResult:
    """An operator takes a running card back, as one decision: first the compare-and-set
    (running, this run, this worker -> ready, failure counter reset, the run closed as
    ``reclaimed``), then the signal to the worker of the run it took back (verified,
    host-local). A dispatcher that sees that worker exit finds its run already closed:
    the exit is the reclaim's, never a crash. ``expected``: what a dialog showed."""
    task = await board.get_task(task_id)
    if task.status != RUNNING:
        raise TransitionRefused(f"cannot reclaim {task.id}: it is {task.status}, not running")
    check_expected(task, expected)
    await refuse_a_cut_short_launch(board, task)
    now = board.now()
    error = f"manual_reclaim: {reason}" if reason else "manual_reclaim"
    async with board.transaction() as conn:
        await _cas_update(conn, task, f"{CLEAR_WORKER}, status = ?, consecutive_failures = 0", (READY,),
                          WorkerCall(), same_worker=True)
        await close_run(conn, task.current_run_id, RunOutcome.RECLAIMED, now, error=error)
        await add_event(conn, task.id, EventKind.RECLAIMED, {
            "manual": True, "reason": reason, "prev_lock": task.claim_lock, "retry_status": READY,
            "worker_pid": task.worker_pid}, now, task.current_run_id)
    stop = None
    if task.worker_pid:
        stop = await _stop(board, task, grace)
        await _record_stop(board, task, stop, EventKind.RECLAIM_WORKER_TERMINATION)
    return TransitionResult(task.id, task.status, READY, stop)


async def archive(board: Board, task_id: str, *, grace: float = 2.0,
                  expected: Expected | None = None) -> TransitionResult:
    """Any card -> archived. A running card's host-local verified worker is terminated
    after the commit (the card is already out of every dispatcher's hands).
    ``expected``: what a dialog showed."""
    task = await board.get_task(task_id)
    if task.status == ARCHIVED:
        raise TransitionRefused(f"{task.id} is already archived")
    check_expected(task, expected)
    await refuse_a_cut_short_launch(board, task)
    now = board.now()
    async with board.transaction() as conn:
        await _cas_update(conn, task, f"{CLEAR_WORKER}, status = ?", (ARCHIVED,), WorkerCall(), same_worker=True)
        await close_run(conn, task.current_run_id, RunOutcome.ARCHIVED, now)
        await add_event(conn, task.id, EventKind.ARCHIVED, {"from_status": task.status}, now, task.current_run_id)
    stop = None
    if task.status == RUNNING and task.worker_pid:
        stop = await _stop(board, task, grace)
        await _record_stop(board, task, stop, EventKind.ARCHIVE_WORKER_TERMINATION)
    return TransitionResult(task.id, task.status, ARCHIVED, stop)


async def move(board: Board, task_id: str, to_status: str, *, reason: str | None = None,
               expected: Expected | None = None) -> TransitionResult:
    """An operator's move between columns, within :data:`MOVES`. ``expected``: the run
    and worker a dialog showed (a running card's move ends that run, no other)."""
    task = await board.get_task(task_id)
    check_expected(task, expected)
    allowed = MOVES.get(task.status, ())
    if to_status not in allowed:
        raise TransitionRefused(f"cannot move {task.id} from {task.status} to {to_status} "
                                f"(allowed: {', '.join(allowed) or 'none'})")
    if to_status == DONE:
        return await complete(board, task.id, reason, expected=expected)
    if to_status == BLOCKED:
        return await block(board, task.id, reason, expected=expected)
    if to_status == REVIEW:
        return await review(board, task.id, reason, expected=expected)
    if task.status == BLOCKED:
        return await unblock(board, task.id)
    return await reopen(board, task.id)


# --------------------------------------------------------------------------------------
# Usage a worker reports (tokens and cost of its run)
# --------------------------------------------------------------------------------------


async def report_usage(board: Board, task_id: str, *, input_tokens: int, output_tokens: int,
                       cost_usd: float | None, call: WorkerCall = WorkerCall()) -> TransitionResult:
    """Record a run's tokens and cost (the latest report of a run wins: a worker reports
    its running totals). A worker may report only for its own card's current run, like
    ``complete`` (checked again inside the transaction: a run that ended meanwhile is
    refused, never recorded); a person reports for the card's latest run."""
    if call.task_id is not None and call.task_id != task_id:
        raise TransitionRefused(f"refused: this worker works card {call.task_id}, not {task_id}")
    task = await board.get_task(task_id)
    _check_worker_call(task, call, "report usage")
    now = board.now()
    async with board.transaction() as conn:
        if call.is_worker:
            rows = await conn.execute_fetchall("SELECT current_run_id FROM tasks WHERE id = ? AND status = ? "
                                               "AND current_run_id IS ?", (task.id, RUNNING, call.run_id))
            if not rows:
                raise TransitionRefused(f"refused: run {call.run_id} is no longer the current run of {task.id}")
            run_id = call.run_id
        else:
            rows = await conn.execute_fetchall("SELECT max(id) FROM task_runs WHERE task_id = ?", (task.id,))
            run_id = rows[0][0] if rows else None
            if run_id is None:
                raise TransitionRefused(f"{task.id} has no run to record usage for")
        await conn.execute(
            "INSERT INTO run_usage (run_id, task_id, input_tokens, output_tokens, cost_usd, reported_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET input_tokens = excluded.input_tokens, "
            "output_tokens = excluded.output_tokens, cost_usd = excluded.cost_usd, reported_at = excluded.reported_at",
            (run_id, task.id, input_tokens, output_tokens, cost_usd, now))
        await add_event(conn, task.id, EventKind.USAGE_REPORTED, {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                                          "cost_usd": cost_usd, "run_id": run_id,
                                                          "by": "worker" if call.is_worker else "operator"},
                        now, run_id)
    return TransitionResult(task.id, task.status, task.status)
