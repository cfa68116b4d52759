"""The dispatch tick: look after the running cards, then start workers for ready ones.

One tick, in this order (each phase sees what the previous one changed):

0. copy new worker output into the card logs (by byte offset);
0b. on a shared board: renew this host's lease, and reclaim the running cards of hosts
   whose lease ran out (``host_lost``, counted as a failure, nothing signalled);
0c. launches a stopped dispatcher of this host left unrecorded (runs still
   ``launching``): each is looked up by its launch token and adopted (its worker is
   recorded), released (proven never started: the card is ready again, no failure) or
   held (cannot be told: nothing is spawned beside it);
1. reap terminal workers (a closed run whose verified worker still lives after the grace;
   at once when the run was taken from this host as ``host_lost``);
2. claims: renew this host's live workers' claims before they expire; an expired claim
   of this host's is extended (worker alive) or, its worker gone, the card reclaimed; another
   host's is left to that host while its lease lives (then 0b's host_lost applies);
3. crashed workers (gone without a board call: classify the recorded exit);
   a worker that exited with its exit recorded is judged at once; the crash grace is
   only for one gone without a record;
4. max runtime (stop and requeue, counted as a failure);
4b. leftovers: what a gone worker left in its process group is ended (verified
   TERM, grace, KILL) and logged, then the closed run's evidence is dropped;
5. promote todo cards whose parents are all finished;
6. spawn ready cards by priority, within the caps, each held-back card with a reason.
   A launch is durable before any process exists: the claim's transaction writes each
   run as ``launching`` with its launch token (the worker's session id, chosen here);
   then the workers start; then their pid and fingerprint are recorded (``running``).
   From the claim to that record the batch is one unit: the tick is not cancelled
   halfway (a cancellation waits for the record) and ending signals wait for it too
   (engine.kanban.launch_guard).

The whole tick holds the board's dispatch lock (:meth:`Board.dispatch_guard`: a
non-blocking ``flock`` on ``<db>.dispatch.lock``; on PostgreSQL an advisory lock per
host): a second dispatcher (another app, the CLI, a daemon) reports ``skipped_locked``
and writes nothing. Inside, every change is still a compare-and-set transaction, so even a
dispatcher that ignored the lock could not claim a card twice.

Blocking work (signals with their grace period, spawning, log copies) runs in threads;
the tick itself is a coroutine over the board's connection. Round trips to the board's
thread are counted: a first look reads in one call whether any worker needs looking after
(else phases 0 and 1-4b are skipped) and what 5 and 6 would read; each transaction is one
call (:meth:`Board.atomic`); the workers start in a few threads (LAUNCHES_PER_THREAD).
On a server board each statement is a round trip over the network: there the first look
also renews the host's lease (0b), and the claim and the record are one statement each
(``PgBoard.first_look``, ``claim_cards``, ``record_launches``, present on that board only;
engine.kanban.backends.postgres.tick): a tick that claims is 5 statements, not 20.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine import identity
from engine.config import ProfileSettings, Settings
from engine.home import HomeLayout
from engine.identity import RUNS, Liveness, liveness
from engine.kanban import breaker, launch_guard
from engine.kanban.backends.sqlite.store import TASK_COLUMNS, Board, add_event, add_events, task_from_row
from engine.kanban.dispatch_lock import dispatch_lock, lock_path_for  # noqa: F401 - the names callers knew
from engine.kanban.launch_owner import LaunchOwner, claim_owner_payload, look_elsewhere
from engine.kanban.models import (
    BLOCKED,
    DONE,
    READY,
    RUNNING,
    TODO,
    EventKind,
    RunOutcome,
    Task,
)
from engine.kanban.tick_result import DispatchResult, HoldReason, Skip, SpawnedCard
from engine.kanban.transitions import CLEAR_WORKER, close_run
from engine.kanban.workers import (
    RUN_HEADER_PREFIX,
    LaunchedWorker,
    LaunchLookup,
    LaunchState,
    Spawner,
    WorkerLaunch,
    append_log_line,
    boot_id,
    card_log_path,
    claim_lock_here,
    classify_exit,
    copy_new_output,
    find_launch,
    host_lock_sql,
    hostname,
    is_host_local,
    last_words,
    lock_host,
    stop_worker,
    with_last_words,
    worker_env,
)
from engine.processes.registry import new_session_id

RECLAIM_DEFER_SECONDS = 120.0
# Workers start side by side in threads, each launching its share in turn: one thread per
# LAUNCHES_PER_THREAD workers, at most LAUNCH_THREADS. A spawn mostly waits for fork and
# exec, so a big batch gains from threads; a small one loses more to the hand-overs (each
# waits for a CPU on a busy machine: 4 no-op launches took 12.8 ms in 4 threads, 4.1 ms in one).
LAUNCH_THREADS = 4
LAUNCHES_PER_THREAD = 8
T_COLS = ", ".join("t." + c.strip() for c in TASK_COLUMNS.split(","))
# Is there a worker to look after: a running card, or a closed run that keeps its pid.
LIVE_SQL = (f"SELECT EXISTS (SELECT 1 FROM tasks WHERE status = '{RUNNING}') OR EXISTS (SELECT 1 FROM task_runs "
            "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL)")
# A run's status from its claim until its worker is recorded.
LAUNCHING = "launching"
# Closed runs whose worker, still alive, is stopped at once, not after the terminal grace:
# taken as host_lost or released as not_started, or taken back by a person (reclaim,
# archive) from another host, where the card waits for this host's stop (awaiting_host_stop).
AT_ONCE = (RunOutcome.HOST_LOST, RunOutcome.NOT_STARTED, RunOutcome.RECLAIMED, RunOutcome.ARCHIVED)
# Outcomes a worker gives its own run (its worker then ends by itself).
WORKERS_OWN_ENDS = (RunOutcome.COMPLETED, RunOutcome.BLOCKED, RunOutcome.REVIEW)
# Running cards whose run is still launching (the claim wrote it; no worker recorded).
# With each its claim's event payload: which home (and dispatcher) made the launch (launch_owner).
LAUNCHING_PARTS = ("r.id, r.task_id, r.process_id, r.claim_lock, t.claim_expires, (SELECT e.payload FROM task_events e "
                   f"WHERE e.task_id = r.task_id AND e.run_id = r.id AND e.kind = '{EventKind.CLAIMED}' "
                   "ORDER BY e.id LIMIT 1)",
                   f"tasks t JOIN task_runs r ON r.id = t.current_run_id WHERE t.status = '{RUNNING}' "
                   f"AND r.status = '{LAUNCHING}' AND r.ended_at IS NULL", "r.id")
LAUNCHING_SQL = "SELECT {} FROM {} ORDER BY {}".format(*LAUNCHING_PARTS)
# Todo cards whose parents are all done or archived.
PROMOTABLE_SQL = (f"SELECT t.id FROM tasks t WHERE t.status = '{TODO}' AND NOT EXISTS ("
                  "SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id "
                  "WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived'))")
# Ready, unclaimed cards in dispatch order, with the outcome and end of their last closed run
# (their titles and bodies are read for the cards chosen only: a board may hold 100,000).
# (In parts, (columns, source, order), as LAUNCHING_PARTS: a server board's first look
# aggregates them in that order, PgBoard.first_look.)
# With the evidence that run keeps (its worker's pid, fingerprint and claim lock, until its
# host has seen that worker gone): a worker on another host holds the card (awaiting_host_stop).
READY_PARTS = ("t.id, t.assignee, r.outcome, r.ended_at, r.worker_pid, r.worker_started_at, r.claim_lock",
               "tasks t LEFT JOIN task_runs r ON r.id = (SELECT max(id) FROM task_runs WHERE task_id = t.id "
               f"AND ended_at IS NOT NULL) WHERE t.status = '{READY}' AND t.claim_lock IS NULL",
               "t.priority DESC, t.created_at, t.id")
READY_SQL = "SELECT {} FROM {} ORDER BY {}".format(*READY_PARTS)

CLASSIFY_IN_THREAD = 1000  # ready cards above which a tick sorts them out in a thread


async def _done(value):
    return value


def allowed_profiles(settings: Settings) -> frozenset[str]:
    """Profiles this home may spawn: every configured one, narrowed by
    ``kanban.dispatch_profiles`` when that key is present (empty = none: fail closed)."""
    configured = set(settings.kanban.profiles)
    wanted = settings.kanban.dispatch_profiles
    if wanted is None:
        return frozenset(configured)
    return frozenset(configured & set(wanted))


@dataclass
class _Tally:
    """The tick's findings while it runs; frozen into a DispatchResult at the end."""

    spawned: list[SpawnedCard] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    rate_limited: list[str] = field(default_factory=list)
    protocol_violations: list[str] = field(default_factory=list)
    completed_on_exit: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    reaped: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    auto_blocked: list[str] = field(default_factory=list)
    auto_assigned: list[str] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    spawn_failed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    launch_adopted: list[str] = field(default_factory=list)
    launch_released: list[str] = field(default_factory=list)
    launch_held: list[str] = field(default_factory=list)

    def result(self) -> DispatchResult:
        return DispatchResult(
            spawned=tuple(self.spawned), reclaimed=tuple(self.reclaimed), extended=tuple(self.extended),
            deferred=tuple(self.deferred), crashed=tuple(self.crashed), rate_limited=tuple(self.rate_limited),
            protocol_violations=tuple(self.protocol_violations),
            completed_on_exit=tuple(self.completed_on_exit), timed_out=tuple(self.timed_out),
            reaped_terminal_workers=tuple(self.reaped), promoted=tuple(self.promoted),
            auto_blocked=tuple(self.auto_blocked), auto_assigned=tuple(self.auto_assigned),
            skipped=tuple(self.skipped), spawn_failed=tuple(self.spawn_failed), warnings=tuple(self.warnings),
            launch_adopted=tuple(self.launch_adopted), launch_released=tuple(self.launch_released),
            launch_held=tuple(self.launch_held),
        )


class QuietTick:
    """What a tick that changed nothing found, kept for the next tick of the same board
    (the board service keeps one): a board with 100,000 held-back ready cards is read
    whole again only when it may have changed.

    A tick is quiet when no card ran (nor a closed run kept a worker's pid), none was
    promoted and none picked: it only held cards back, each for a reason that depends
    on the board, the settings and, for a rate-limit cooldown, the time. The next tick
    gives the same result without reading when the board's data version is the one read
    *before* the quiet tick's reads (any commit after it, by another connection or this
    one, the tick's own first-time events too, moves it), the settings are the same
    object and no cooldown has run out. A board without a version (None: a server
    board) is always read."""

    def __init__(self) -> None:
        self._kept: tuple[object, Settings, float, DispatchResult] | None = None

    def result_for(self, version: object, settings: Settings, now: float) -> DispatchResult | None:
        kept = self._kept
        if kept is None or version is None:
            return None
        was, kept_settings, wake_at, result = kept
        if was != version or kept_settings is not settings or now >= wake_at:
            return None
        return result

    def keep(self, version: object, settings: Settings, wake_at: float, result: DispatchResult) -> None:
        self._kept = None if version is None else (version, settings, wake_at, result)

    def forget(self) -> None:
        self._kept = None


@dataclass(frozen=True)
class _Claimed:
    task_id: str
    run_id: int
    profile: ProfileSettings
    title: str
    body: str
    token: str  # the launch token: the worker's session id


def _claim_events(profile: str, newly: bool, lock: str, token: str, owner: dict) -> list[tuple[EventKind, dict, bool]]:
    """A claimed card's events in order, each (kind, payload, whether it names the new
    run): ``assigned`` when the claim gave it the default assignee, then ``claimed``
    (with ``owner``: the home and dispatcher that launch it, see launch_owner)."""
    events = [(EventKind.ASSIGNED, {"assignee": profile, "source": "kanban.default_assignee"}, False)] if newly else []
    return [*events, (EventKind.CLAIMED, {"claim_lock": lock, "profile": profile, "launch_token": token, **owner},
                      True)]


def _spawned_payload(c: _Claimed, w: LaunchedWorker, fp: str) -> dict:
    return {"pid": w.pid, "worker_started_at": fp, "process_id": w.session_id, "profile": c.profile.name}


class Dispatcher:
    """Ticks one board for one home. Cheap to keep; each tick is independent."""

    def __init__(self, board: Board, *, home: HomeLayout, settings: Settings, spawner: Spawner,
                 quiet: QuietTick | None = None) -> None:
        self.board = board
        self.home = home
        self.settings = settings
        self.k = settings.kanban
        self.spawner = spawner
        self.grace = settings.processes.kill_grace_seconds
        self.quiet = quiet  # the last quiet tick of this board (see QuietTick); None: read every tick
        self._wake_at = float("inf")  # when the earliest held-back cooldown runs out

    # -- the tick --------------------------------------------------------------------------

    async def tick(self) -> DispatchResult:
        async with self.board.dispatch_guard() as held:
            if not held:
                return DispatchResult(skipped_locked=True)
            tally = _Tally()
            reap = getattr(self.spawner, "reap", None)
            if reap is not None:
                await asyncio.to_thread(reap)
            version = None
            if self.quiet is not None:
                # Read before the tick's reads: whatever commits after it moves it.
                version = await self.board.data_version()
                unchanged = self.quiet.result_for(version, self.settings, self.board.now())
                if unchanged is not None:
                    return unchanged
                self.quiet.forget()
            # One round trip looks first: is there a running card, or a closed run that
            # keeps a worker's pid (else phases 0 and 1-4b have nothing to look at), and
            # which cards could be promoted or spawned (still true below when nothing
            # before them wrote: the look stands for their reads).
            first_look = getattr(self.board, "first_look", None)
            lost = None
            if first_look is None:
                look, promotable, ready, launching = await self.board.fetch_many([
                    (LIVE_SQL, ()), (PROMOTABLE_SQL, ()), (READY_SQL, ()), (LAUNCHING_SQL, ())])
            else:  # a server board: the same reads and the lease renewal (0b) in one statement
                look, promotable, ready, launching, lost = await first_look(
                    live=LIVE_SQL, promotable=PROMOTABLE_SQL, ready=READY_PARTS, launching=LAUNCHING_PARTS,
                    host_id=hostname(), boot=boot_id(), now=self.board.now(),
                    lease_seconds=self.k.host_lease_seconds)
            live = bool(look[0][0])
            if live:
                await self._copy_output()
            await self._reclaim_lost_hosts(tally, lost)
            if live:
                await self._resolve_launches(launching, tally)
                await self._reap_terminal_workers(tally)
                await self._release_stale_claims(tally)
                await self._detect_crashed(tally)
                await self._enforce_max_runtime(tally)
                await self._end_leftover_groups(tally)
            promoted = await self._promote(tally, None if live else promotable)
            await self._spawn(tally, None if live or promoted else ready)
            result = tally.result()
            if self.quiet is not None and not live and result == DispatchResult(skipped=result.skipped):
                self.quiet.keep(version, self.settings, self._wake_at, result)
            return result

    # -- 0. output ---------------------------------------------------------------------------

    def _log_of(self, task_id: str) -> Path:
        return card_log_path(self.home.kanban_logs_dir, task_id)

    async def _copy_output(self, run_ids: tuple[int, ...] | None = None) -> None:
        """Copy new bytes of each live run's output (open runs, and closed runs whose
        worker may still be printing) into its card log."""
        if run_ids is None:
            rows = await self.board.fetch(
                "SELECT r.id, r.task_id, r.output_path, r.log_offset FROM tasks t "
                "JOIN task_runs r ON r.id = t.current_run_id WHERE t.status = 'running' AND r.output_path IS NOT NULL "
                "UNION SELECT id, task_id, output_path, log_offset FROM task_runs "
                "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL AND output_path IS NOT NULL")
        else:
            rows = await self.board.fetch(
                f"SELECT id, task_id, output_path, log_offset FROM task_runs WHERE output_path IS NOT NULL "
                f"AND id IN ({','.join('?' * len(run_ids))})", run_ids)
        if not rows:
            return

        def copy_all() -> list[tuple[int, int]]:
            self.home.ensure_dir(self.home.kanban_logs_dir)
            moved = []
            for run_id, task_id, src, offset in rows:
                new = copy_new_output(src, self._log_of(task_id), int(offset))
                if new != offset:
                    moved.append((new, run_id))
            return moved

        moved = await asyncio.to_thread(copy_all)
        if moved:
            async def advance(conn) -> None:
                await conn.executemany("UPDATE task_runs SET log_offset = ? WHERE id = ?", moved)

            await self.board.atomic(advance)

    # -- 0b. host leases (a shared board) -----------------------------------------------------

    async def _reclaim_lost_hosts(self, tally: _Tally, lost: list[str] | None = None) -> None:
        """Renew this host's lease; requeue the running cards of every host whose lease
        ran out. Their workers are out of reach, so nothing is signalled: the run id
        (the fencing token) they hold no longer matches, so their calls are refused, and
        their own host stops them when it returns (the terminal-worker reaper).
        ``lost``: renewed already (by the first look), these are the hosts found lost."""
        now = self.board.now()
        if lost is None:
            lost = await self.board.renew_lease(hostname(), boot_id(), now, self.k.host_lease_seconds)
        for host in lost:
            its_lock, params = host_lock_sql("t.claim_lock", host)  # exactly this host's, never a prefix
            for task, _run in await self._running(f"AND {its_lock}", params):
                error = f"host_lost: {host} stopped renewing its lease"
                payload = {"host": host, "claim_lock": task.claim_lock, "worker_pid": task.worker_pid,
                           "signalled": False, "retry_status": READY}
                # The lease was read before: the requeue itself checks it again.
                if await self._requeue_failed(task, now, outcome=RunOutcome.HOST_LOST, event=EventKind.HOST_LOST,
                                              error=error, payload=payload, tally=tally,
                                              unless_leased=host):
                    tally.reclaimed.append(task.id)

    # -- 0c. unrecorded launches -------------------------------------------------------------

    async def _resolve_launches(self, rows: list, tally: _Tally) -> None:
        """Runs still ``launching`` (read by the first look): their dispatcher stopped
        between the claim and the record. Only this host's (another host's are its own,
        or ``host_lost``'s), and none this process is still launching. Each launch of
        this home is looked up by its token (see ``Spawner.find_launch``), then in one
        transaction: adopted (its worker recorded, ``running``), released (the card ready
        again, the run's outcome ``not_started``, no failure counted) or held (its claim
        kept fresh so nothing reclaims it; one event, and a warning every tick). A launch
        another home of this host made is that home's (its session is in that home's
        folder): it is held here, or released only when proven dead from here
        (engine.kanban.launch_owner), never adopted, and left alone while its dispatcher
        runs."""
        here = [(run_id, task_id, token, lock, LaunchOwner.of(lock, claimed))
                for run_id, task_id, token, lock, _expires, claimed in rows
                if is_host_local(lock) and not launch_guard.token_in_flight(token)]
        if not here:
            return

        def look(task_id: str, run_id: int, token: str | None, owner: LaunchOwner) -> LaunchLookup | None:
            if owner.is_home(self.home.root):
                return find_launch(self.spawner, token, task_id, run_id)
            try:
                return look_elsewhere(owner, token, task_id, run_id)
            except OSError as exc:
                return LaunchLookup(LaunchState.UNCERTAIN, f"it was claimed by {owner.words()}, whose session "
                                    f"{token} cannot be read from here ({exc.strerror or exc})")

        looks = await asyncio.to_thread(
            lambda: [look(task_id, run_id, token, owner) for run_id, task_id, token, _l, owner in here])
        mine = [(run_id, task_id, token, lock, found) for (run_id, task_id, token, lock, _o), found
                in zip(here, looks, strict=True) if found is not None]
        if not mine:
            return
        now = self.board.now()
        expires = now + self.k.claim_ttl_seconds

        async def resolve(conn) -> list[tuple[str, LaunchState, str]]:
            done = []
            for run_id, task_id, token, lock, look in mine:
                if look.state is LaunchState.STARTED and look.worker is not None:
                    w = look.worker
                    fp = w.fingerprint or identity.UNVERIFIED
                    cur = await conn.execute(
                        f"UPDATE task_runs SET status = '{RUNNING}', worker_pid = ?, worker_started_at = ?, "
                        f"process_id = ?, output_path = ? WHERE id = ? AND status = '{LAUNCHING}' "
                        "AND ended_at IS NULL", (w.pid, fp, w.session_id, w.output_path, run_id))
                    if cur.rowcount != 1:
                        continue
                    await conn.execute("UPDATE tasks SET worker_pid = ?, worker_started_at = ? WHERE id = ? "
                                       "AND current_run_id = ?", (w.pid, fp, task_id, run_id))
                    await add_event(conn, task_id, EventKind.LAUNCH_ADOPTED, {
                        "pid": w.pid, "worker_started_at": fp, "process_id": w.session_id,
                        "launch_token": token, "reason": look.reason}, now, run_id)
                elif look.state is LaunchState.NOT_STARTED:
                    cur = await conn.execute(
                        f"UPDATE tasks SET {CLEAR_WORKER}, status = ? WHERE id = ? AND status = ? "
                        "AND current_run_id = ? AND worker_pid IS NULL", (READY, task_id, RUNNING, run_id))
                    if cur.rowcount != 1:
                        continue
                    await close_run(conn, run_id, RunOutcome.NOT_STARTED, now, summary=look.reason)
                    await add_event(conn, task_id, EventKind.LAUNCH_RELEASED, {
                        "launch_token": token, "reason": look.reason, "retry_status": READY}, now, run_id)
                else:
                    cur = await conn.execute(
                        "UPDATE tasks SET claim_expires = ? WHERE id = ? AND status = ? AND current_run_id = ? "
                        "AND claim_lock IS ?", (expires, task_id, RUNNING, run_id, lock))
                    if cur.rowcount != 1:
                        continue
                    said = await conn.execute_fetchall(
                        "SELECT 1 FROM task_events WHERE task_id = ? AND run_id = ? AND kind = ? "
                        "LIMIT 1", (task_id, run_id, EventKind.LAUNCH_HELD))
                    if not said:
                        await add_event(conn, task_id, EventKind.LAUNCH_HELD, {"launch_token": token,
                                                                       "reason": look.reason}, now, run_id)
                done.append((task_id, look.state, look.reason))
            return done

        for task_id, state, reason in await self.board.atomic(resolve):
            if state is LaunchState.STARTED:
                tally.launch_adopted.append(task_id)
            elif state is LaunchState.NOT_STARTED:
                tally.launch_released.append(task_id)
            else:
                tally.launch_held.append(task_id)
                tally.warnings.append(f"{task_id}: its launch was never recorded and {reason}: "
                                      "card held, no second worker started")

    # -- 1. terminal workers -------------------------------------------------------------------

    async def _reap_terminal_workers(self, tally: _Tally) -> None:
        now = self.board.now()
        rows = await self.board.fetch(
            "SELECT id, task_id, worker_pid, worker_started_at, claim_lock, process_id FROM task_runs "
            "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL AND (ended_at <= ? OR outcome IN (?, ?, ?, ?))",
            (now - self.k.terminal_worker_grace_seconds, *AT_ONCE))
        for run_id, task_id, pid, fp, lock, session_id in rows:
            if not is_host_local(lock) or pid == os.getpid():
                continue
            if liveness(pid, fp) is not Liveness.ALIVE:
                continue  # never signalled when unverified; a gone one's tree is 4b's (_end_leftover_groups)
            stop = await asyncio.to_thread(stop_worker, pid, fp, lock, self.grace, session_id)
            if not stop.stopped:
                tally.warnings.append(f"{task_id}: terminal worker pid {pid} survived"
                                      f"{': ' + stop.alive if stop.alive else ''}; will retry")
                continue
            await self._copy_output((run_id,))
            async with self.board.transaction() as conn:
                cur = await conn.execute(
                    "UPDATE task_runs SET worker_pid = NULL, worker_started_at = NULL "
                    "WHERE id = ? AND worker_pid IS ? AND worker_started_at IS ?", (run_id, pid, fp))
                if cur.rowcount == 1 and stop.attempted:
                    await add_event(conn, task_id, EventKind.TERMINAL_WORKER_REAPED,
                                    {"pid": pid, "worker_started_at": fp, **stop.to_json()}, now, run_id)
            if stop.attempted:
                tally.reaped.append(task_id)

    async def _end_leftover_groups(self, tally: _Tally) -> None:
        """A closed run whose worker (wrapper) is gone: end what is left of its tree, in
        whatever group or session (engine.processes.tree: TERM, grace, KILL, each verified),
        log it, then drop the run's evidence, only once nothing of it is left (until then
        its card is held: last_run_alive)."""
        rows = await self.board.fetch(
            "SELECT id, task_id, worker_pid, worker_started_at, claim_lock, process_id FROM task_runs "
            "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL")
        for run_id, task_id, pid, fp, lock, session_id in rows:
            if not is_host_local(lock) or liveness(pid, fp) not in (Liveness.GONE, Liveness.RECYCLED):
                continue
            stop = await asyncio.to_thread(stop_worker, pid, fp, lock, self.grace, session_id)
            if not stop.attempted and stop.stopped:
                stop = None  # nothing of it was left
            elif not stop.stopped:
                tally.warnings.append(f"{task_id}: what worker pid {pid} left survived SIGKILL ({stop.alive}); "
                                      "card held, will retry")
            await self._copy_output((run_id,))
            async with self.board.transaction() as conn:
                if stop is not None and stop.attempted:
                    await add_event(conn, task_id, EventKind.WORKER_GROUP_ENDED,
                                    {"worker_pid": pid, **stop.to_json()}, self.board.now(), run_id)
                if stop is None or stop.stopped:
                    await conn.execute(
                        "UPDATE task_runs SET worker_pid = NULL, worker_started_at = NULL "
                        "WHERE id = ? AND worker_pid IS ? AND worker_started_at IS ?", (run_id, pid, fp))
            if stop is not None and stop.attempted:
                tally.reaped.append(task_id)

    # -- 2. stale claims ---------------------------------------------------------------------------

    async def _running(self, where: str = "", params: tuple = ()) -> list[tuple[Task, tuple]]:
        """Running cards with their open run's (started_at, session id, output_path, profile, status)."""
        rows = await self.board.fetch(
            f"SELECT {T_COLS}, r.started_at, r.process_id, r.output_path, r.profile, r.status FROM tasks t "
            f"LEFT JOIN task_runs r ON r.id = t.current_run_id WHERE t.status = '{RUNNING}' {where} "
            "ORDER BY t.id", params)
        return [(task_from_row(r[:20]), tuple(r[20:])) for r in rows]

    async def _release_stale_claims(self, tally: _Tally) -> None:
        """A claim belongs to its live host. This host renews the claims of its own
        verified-alive workers once half their TTL is gone (one statement for all),
        whether they ever call ``heartbeat`` or not: a worker verified alive (pid and
        start time) is alive. An expired claim of its own is judged by its worker:
        extended (alive), deferred (alive but never verified), or reclaimed (its process
        is gone). Another host's expired claim is never taken while that host holds a
        live lease (only it can verify its workers; once the lease lapses, host_lost
        applies); on a file board, which has no leases, it is reclaimed unsignalled."""
        now = self.board.now()
        expired: list[Task] = []
        renew: list[Task] = []
        for task, (_run_started, *_rest, run_status) in await self._running():
            if run_status == LAUNCHING:
                continue  # decided only by its launch's resolution (0c) or, on another host, host_lost
            local = is_host_local(task.claim_lock)
            if task.claim_expires is not None and task.claim_expires < now:
                expired.append(task)
            elif (local and (task.claim_expires is None or task.claim_expires - now < self.k.claim_ttl_seconds / 2)
                  and liveness(task.worker_pid, task.worker_started_at) is Liveness.ALIVE):
                renew.append(task)
        await self._renew_claims(renew, now)
        live_hosts: set[str] | None = None
        for task in expired:
            local = is_host_local(task.claim_lock)
            if not local and self.board.has_host_leases:
                if live_hosts is None:
                    live_hosts = set(await self.board.live_hosts(now))
                if lock_host(task.claim_lock) in live_hosts:
                    continue  # its host is alive: its claim is its own business
            state = liveness(task.worker_pid, task.worker_started_at) if local else None  # None: another host's
            if state is Liveness.ALIVE:
                await self._extend(task, now, tally)
                continue
            if state is Liveness.UNVERIFIED_ALIVE:
                await self._defer(task, now, "unverified_worker_alive", tally)
                continue
            # Its process is gone (or recycled), or it ran on a host that lost its lease:
            # nothing of it to signal here.
            error = f"stale_lock={task.claim_lock}"
            payload = {
                "stale_lock": task.claim_lock, "worker_pid": task.worker_pid,
                "claim_expires": task.claim_expires, "last_heartbeat_at": task.last_heartbeat_at,
                "now": now, "host_local": local, "worker": state.value if state else None, "retry_status": READY,
            }
            if await self._requeue_failed(task, now, outcome=RunOutcome.RECLAIMED, event=EventKind.RECLAIMED, error=error,
                                          payload=payload, tally=tally,
                                          unless_leased=None if local else lock_host(task.claim_lock)):
                tally.reclaimed.append(task.id)

    async def _renew_claims(self, tasks: list[Task], now: float) -> None:
        """Push the claims of this host's live workers a full TTL ahead: one transaction,
        one statement per table for all of them, each a compare-and-set on the run. No
        event: a renewal every half TTL says nothing (an expired claim that is extended
        does, see :meth:`_extend`)."""
        if not tasks:
            return
        expires = now + self.k.claim_ttl_seconds

        async def renew(conn) -> None:
            await conn.executemany(
                "UPDATE tasks SET claim_expires = ? WHERE id = ? AND status = ? AND claim_lock IS ? "
                "AND current_run_id IS ? AND worker_pid IS ?",
                [(expires, t.id, RUNNING, t.claim_lock, t.current_run_id, t.worker_pid) for t in tasks])
            await conn.executemany("UPDATE task_runs SET claim_expires = ? WHERE id = ? AND ended_at IS NULL",
                                   [(expires, t.current_run_id) for t in tasks])

        await self.board.atomic(renew)

    async def _extend(self, task: Task, now: float, tally: _Tally) -> None:
        new_expiry = now + self.k.claim_ttl_seconds
        async with self.board.transaction() as conn:
            cur = await conn.execute(
                "UPDATE tasks SET claim_expires = ? WHERE id = ? AND status = ? AND claim_lock IS ? "
                "AND current_run_id IS ?", (new_expiry, task.id, RUNNING, task.claim_lock, task.current_run_id))
            if cur.rowcount != 1:
                return
            await add_event(conn, task.id, EventKind.CLAIM_EXTENDED, {
                "reason": "pid_alive", "worker_pid": task.worker_pid, "claim_lock": task.claim_lock,
                "claim_expires_was": task.claim_expires, "claim_expires_now": new_expiry,
                "last_heartbeat_at": task.last_heartbeat_at}, now, task.current_run_id)
        tally.extended.append(task.id)

    async def _defer(self, task: Task, now: float, reason: str, tally: _Tally) -> None:
        async with self.board.transaction() as conn:
            cur = await conn.execute(
                "UPDATE tasks SET claim_expires = ? WHERE id = ? AND status = ? AND claim_lock IS ? "
                "AND current_run_id IS ?",
                (now + RECLAIM_DEFER_SECONDS, task.id, RUNNING, task.claim_lock, task.current_run_id))
            if cur.rowcount == 1:
                await add_event(conn, task.id, EventKind.RECLAIM_DEFERRED, {"reason": reason, "worker_pid": task.worker_pid},
                                now, task.current_run_id)
        tally.deferred.append(task.id)

    async def _requeue(self, conn, task: Task, now: float, *, outcome: RunOutcome, error: str | None,
                       summary: str | None = None, to_status: str = READY, extra_sets: str = "",
                       extra_params: tuple = (), unless_leased: str | None = None) -> bool:
        """CAS a running card off its run (inside a transaction). False: it moved on, or
        (``unless_leased``: another host's card taken on its lease) that host holds a
        live lease now: checked by this very statement."""
        leased, leased_params = ("1 = 1", ()) if unless_leased is None else \
            self.board.no_live_lease_sql(unless_leased, now)
        cur = await conn.execute(
            f"UPDATE tasks SET {CLEAR_WORKER}, status = ?{extra_sets} WHERE id = ? AND status = ? "
            f"AND claim_lock IS ? AND current_run_id IS ? AND worker_pid IS ? AND {leased}",
            (to_status, *extra_params, task.id, RUNNING, task.claim_lock, task.current_run_id, task.worker_pid,
             *leased_params))
        if cur.rowcount != 1:
            return False
        await close_run(conn, task.current_run_id, outcome, now, error=error, summary=summary)
        return True

    async def _requeue_failed(self, task: Task, now: float, *, outcome: RunOutcome, event: EventKind, error: str,
                              payload: dict, tally: _Tally, unless_leased: str | None = None) -> bool:
        """Requeue, record the event, count the failure (blocking at the limit): one transaction."""
        async with self.board.transaction() as conn:
            if not await self._requeue(conn, task, now, outcome=outcome, error=error, unless_leased=unless_leased):
                return False
            await add_event(conn, task.id, event, {"error": error, **payload}, now, task.current_run_id)
            verdict = await breaker.record_failure(conn, task, error=error, outcome=outcome,
                                                   failure_limit=self.k.failure_limit, now=now,
                                                   run_id=task.current_run_id, retry_status=READY)
        if verdict.gave_up:
            tally.auto_blocked.append(task.id)
        return True

    # -- 3. crashed workers ----------------------------------------------------------------------

    async def _detect_crashed(self, tally: _Tally) -> None:
        now = self.board.now()
        for task, (run_started, session_id, _output, profile_name, run_status) in await self._running():
            if not is_host_local(task.claim_lock) or run_status == LAUNCHING:
                continue  # a launch not recorded yet is resolved by its token (0c), never judged here
            if liveness(task.worker_pid, task.worker_started_at) in RUNS:
                continue
            # A recorded exit is judged at once; the grace is only for a worker that is
            # gone without one (it may not have been recorded yet).
            exit_ = await asyncio.to_thread(self.spawner.exit_of, session_id, task.worker_pid)
            started = run_started or task.started_at or now
            if exit_ is None and now - started < self.k.crash_grace_seconds:
                continue
            profile = self.k.profiles.get(profile_name or task.assignee or "")
            verdict = classify_exit(task.worker_pid, exit_, bool(profile and profile.complete_on_exit))
            if task.current_run_id is not None:
                await self._copy_output((task.current_run_id,))
            await self._settle_exit(task, now, verdict, exit_, tally)

    async def _settle_exit(self, task: Task, now: float, verdict, exit_, tally: _Tally) -> None:
        run_id = task.current_run_id
        exit_info = {"pid": task.worker_pid, "exit_code": exit_.code if exit_ else None,
                     "signal": exit_.signal if exit_ else None}
        if verdict.outcome == RunOutcome.COMPLETED:
            async with self.board.transaction() as conn:
                ok = await self._requeue(
                    conn, task, now, outcome=RunOutcome.COMPLETED, error=None, summary=verdict.error, to_status=DONE,
                    extra_sets=", completed_at = ?, result = ?, consecutive_failures = 0, last_failure_error = NULL",
                    extra_params=(now, verdict.error))
                if ok:
                    await add_event(conn, task.id, EventKind.COMPLETED, {"by": "exit", **exit_info}, now, run_id)
            if ok:
                tally.completed_on_exit.append(task.id)
            return
        if verdict.outcome == RunOutcome.NOT_STARTED:  # its command never ran: ready again, not a failure
            async with self.board.transaction() as conn:
                ok = await self._requeue(conn, task, now, outcome=RunOutcome.NOT_STARTED, error=None,
                                         summary=verdict.error)
                if ok:
                    await add_event(conn, task.id, EventKind.LAUNCH_RELEASED, {"reason": verdict.error, **exit_info},
                                    now, run_id)
            if ok:
                tally.launch_released.append(task.id)
            return
        if verdict.outcome == RunOutcome.RATE_LIMITED:
            async with self.board.transaction() as conn:
                ok = await self._requeue(conn, task, now, outcome=RunOutcome.RATE_LIMITED, error=verdict.error,
                                         extra_sets=", last_failure_error = ?", extra_params=(verdict.error,))
                if ok:
                    await add_event(conn, task.id, EventKind.RATE_LIMITED, {
                        "error": verdict.error, "cooldown_seconds": self.k.rate_limit_cooldown_seconds,
                        **exit_info}, now, run_id)
            if ok:
                tally.rate_limited.append(task.id)
            return
        if verdict.outcome == RunOutcome.KILLED:  # a person's kill: held, never counted as a failure
            async with self.board.transaction() as conn:
                ok = await self._requeue(conn, task, now, outcome=RunOutcome.KILLED, error=verdict.error,
                                         to_status=BLOCKED, extra_sets=", last_failure_error = ?",
                                         extra_params=(verdict.error,))
                if ok:
                    await add_event(conn, task.id, EventKind.WORKER_KILLED, {"error": verdict.error, **exit_info}, now, run_id)
            if ok:
                tally.warnings.append(f"{task.id}: {verdict.error}")
            return
        words = await asyncio.to_thread(last_words, self._log_of(task.id))
        error = with_last_words(verdict.error, words)
        payload = {"error": error, "worker_output": words, **exit_info}
        if verdict.outcome == RunOutcome.PROTOCOL_VIOLATION:
            async with self.board.transaction() as conn:
                ok = await self._requeue(conn, task, now, outcome=RunOutcome.PROTOCOL_VIOLATION, error=error)
                if ok:
                    await add_event(conn, task.id, EventKind.PROTOCOL_VIOLATION, payload, now, run_id)
                    pv = await breaker.record_protocol_violation(conn, task, error=error, now=now, run_id=run_id,
                                                                 retry_status=READY)
            if ok:
                tally.protocol_violations.append(task.id)
                if pv.gave_up:
                    tally.auto_blocked.append(task.id)
            return
        if await self._requeue_failed(task, now, outcome=RunOutcome.CRASHED, event=EventKind.CRASHED, error=error,
                                      payload=payload, tally=tally):
            tally.crashed.append(task.id)

    # -- 4. max runtime ----------------------------------------------------------------------------

    async def _enforce_max_runtime(self, tally: _Tally) -> None:
        """A run over its card's max runtime is stopped and requeued, counted. A verified
        live worker's runtime is its own age on this machine's boot clock (its start
        time to now), which no step of the wall clock moves: a clock set an hour ahead
        stops nothing. Otherwise (a worker gone or never verified) it is the run's age on
        the board's clock."""
        now = self.board.now()
        boot_now = self.board.boot_time()
        for task, (run_started, session_id, *_rest, run_status) in await self._running(
                "AND t.max_runtime_seconds IS NOT NULL"):
            if not is_host_local(task.claim_lock) or run_status == LAUNCHING:
                continue
            state = liveness(task.worker_pid, task.worker_started_at)
            age = identity.age_of(task.worker_started_at, boot_now) if state is Liveness.ALIVE else None
            elapsed = age if age is not None else now - (run_started or now)
            limit = task.max_runtime_seconds
            if elapsed <= limit:
                continue
            if state is Liveness.UNVERIFIED_ALIVE:
                tally.warnings.append(f"{task.id}: over its max runtime, but its worker pid {task.worker_pid} "
                                      "was never verified, so it is not signalled")
                continue
            stop = None
            if state is Liveness.ALIVE:
                stop = await asyncio.to_thread(stop_worker, task.worker_pid, task.worker_started_at,
                                               task.claim_lock, self.grace, session_id)
                if stop.survived:
                    tally.warnings.append(f"{task.id}: worker pid {task.worker_pid} survived SIGKILL "
                                          f"({stop.alive or stop.refused}); card held")
                    continue
            error = f"timed_out: elapsed {elapsed:.0f}s > limit {limit:g}s"
            if task.current_run_id is not None:
                await self._copy_output((task.current_run_id,))
            payload = {"pid": task.worker_pid, "elapsed_seconds": round(elapsed, 3), "limit_seconds": limit,
                       "sigkill": bool(stop and any(s == "SIGKILL" for _p, s in stop.signals)),
                       "retry_status": READY, **({"termination": stop.to_json()} if stop else {})}
            if await self._requeue_failed(task, now, outcome=RunOutcome.TIMED_OUT, event=EventKind.TIMED_OUT, error=error,
                                          payload=payload, tally=tally):
                tally.timed_out.append(task.id)

    # -- 5. promotion ------------------------------------------------------------------------------

    async def _promote(self, tally: _Tally, rows: list | None = None) -> bool:
        """Todo cards whose parents are all finished become ready (``rows``: read already).
        True when any was promoted."""
        if rows is None:
            rows = await self.board.fetch(PROMOTABLE_SQL)
        if not rows:
            return False
        now = self.board.now()

        async def promote(conn) -> None:  # one call on the board's thread, however many cards
            for (task_id,) in rows:
                cur = await conn.execute("UPDATE tasks SET status = ? WHERE id = ? AND status = ?",
                                         (READY, task_id, TODO))
                if cur.rowcount == 1:
                    await add_event(conn, task_id, EventKind.PROMOTED, {"reason": "parents_done"}, now)
                    tally.promoted.append(task_id)

        await self.board.atomic(promote)
        return bool(tally.promoted)

    # -- 6. spawning -------------------------------------------------------------------------------

    async def _spawn(self, tally: _Tally, ready: list | None = None) -> None:
        """Claim and start ready cards. ``ready``: read already, at a look that found no
        card running (so none counts against a cap)."""
        now = self.board.now()
        running: list = []
        if ready is None:
            # kanban.max_in_progress counts this host's running cards; a profile's own cap
            # counts the profile's running cards on every host of the board.
            here, params = host_lock_sql("claim_lock", hostname())
            running, ready = await self.board.fetch_many([(
                f"SELECT assignee, count(*), sum(CASE WHEN {here} THEN 1 ELSE 0 END) "
                f"FROM tasks WHERE status = '{RUNNING}' GROUP BY assignee", params), (READY_SQL, ())])
        per_profile = {r[0]: int(r[1]) for r in running}
        budget = self.k.max_in_progress - sum(int(r[2] or 0) for r in running)
        awaiting = await self._awaiting_host_stop(ready, now)
        # A big board in a thread: it holds back 100,000 cards a tick, each with its reason
        # (0.4 s of CPU that the app's event loop, which ticks, must not spend).
        classify = (asyncio.to_thread(self._classify, ready, now, per_profile, budget, awaiting)
                    if len(ready) > CLASSIFY_IN_THREAD
                    else _done(self._classify(ready, now, per_profile, budget, awaiting)))
        skipped, picked, nonspawnable = await classify
        tally.skipped.extend(skipped)
        await self._note_nonspawnable(nonspawnable, now)
        if not picked:
            return
        if getattr(self.board, "claim_cards", None) is None:
            chosen = await self._with_texts(picked)
        else:  # a server board's claim reads the titles and bodies of the cards it wins
            chosen = [(task_id, profile, "", "", newly) for task_id, profile, newly in picked]
        with launch_guard.launch_batch() as name_tokens:
            # Claim, launch and record are one unit: a cancelled tick waits for the
            # record (else its workers would run unrecorded until the recovery found them).
            batch = asyncio.ensure_future(self._claim_launch_record(chosen, now, tally, name_tokens))
            cancelled = False
            while not batch.done():
                try:
                    await asyncio.shield(batch)
                except asyncio.CancelledError:
                    cancelled = True
            batch.result()
            if cancelled:
                raise asyncio.CancelledError

    async def _claim_launch_record(self, chosen: list[tuple[str, str, str, str, bool]], now: float,
                                   tally: _Tally, name_tokens) -> None:
        claimed = await self._claim(chosen, now, tally, name_tokens)
        if claimed:
            launched = await self._launch_all(claimed)
            await self._record_launches(list(zip(claimed, launched, strict=True)), tally)

    async def _awaiting_host_stop(self, ready: list, now: float) -> dict[str, tuple[str, int]]:
        """The ready cards whose last run's worker runs on another host, which has not
        confirmed its stop yet (card -> (host, pid)): starting one here would run two
        workers. A host confirms a stop by clearing the run's evidence (its tick's
        terminal-worker reaper stops the worker, or sees it gone, and records it), so
        while the evidence stays the worker may live; it is judged from here only where
        it can be. On a server board: nothing waits for a host whose lease lapsed (it is
        lost: its cards move on, and it stops its old workers when it returns); a worker
        of this very boot (another host id on this machine) is checked by its pid and
        start time; any other waits for its host. A file board lives on one machine (it
        must not be shared over a network), so every worker on it is checked from here:
        one of another boot is gone with that boot."""
        here = hostname()
        foreign = [(task_id, host, pid, fp) for task_id, *_r, pid, fp, lock in ready
                   if pid is not None and (host := lock_host(lock)) is not None and host != here]
        if not foreign:
            return {}
        this_boot = boot_id()
        live_hosts = set(await self.board.live_hosts(now)) if self.board.has_host_leases else None
        awaiting = {}
        for task_id, host, pid, fp in foreign:
            if live_hosts is not None:
                if host not in live_hosts:
                    continue  # lost, or never held a lease: nothing waits for it
                of_this_boot = bool(this_boot) and identity.is_verifiable(fp) and str(fp).split("|")[0] == this_boot
                if of_this_boot and liveness(pid, fp) not in RUNS:
                    continue  # seen gone from here
            elif liveness(pid, fp) not in RUNS:
                continue
            awaiting[task_id] = (host, pid)
        return awaiting

    def _classify(self, ready: list, now: float, per_profile: dict[str, int], budget: int,
                  awaiting: dict[str, tuple[str, int]] | None = None):
        """Each ready card, in dispatch order: held back (a Skip with its reason) or picked
        (id, profile, newly assigned), within the caps; and those whose assignee may not
        be spawned here (for their event). ``awaiting``: the cards whose last worker's
        host has not confirmed its stop (see _awaiting_host_stop)."""
        awaiting = awaiting or {}
        allowed = allowed_profiles(self.settings)
        default = self.k.default_assignee if self.k.default_assignee in allowed else None
        skipped: list[Skip] = []
        picked: list[tuple[str, str, bool]] = []
        nonspawnable: list[tuple[str, str]] = []
        for task_id, assignee, last_outcome, last_ended, last_pid, _last_fp, last_lock in ready:
            newly = False
            if not assignee:
                if default is None:
                    skipped.append(Skip(task_id, HoldReason.SKIPPED_UNASSIGNED))
                    continue
                assignee, newly = default, True
            if assignee not in allowed:
                skipped.append(Skip(task_id, HoldReason.SKIPPED_NONSPAWNABLE, profile=assignee))
                nonspawnable.append((task_id, assignee))
                continue
            if last_pid is not None and is_host_local(last_lock):
                # Something of its last run may still run here: its evidence is dropped only
                # once nothing of that run's tree is left (phases 1 and 4b).
                skipped.append(Skip(task_id, HoldReason.LAST_RUN_ALIVE, profile=assignee, pid=last_pid))
                continue
            if task_id in awaiting:
                host, pid = awaiting[task_id]
                skipped.append(Skip(task_id, HoldReason.AWAITING_HOST_STOP, profile=assignee, host=host, pid=pid))
                continue
            if (last_outcome == RunOutcome.RATE_LIMITED and last_ended is not None
                    and now - last_ended < self.k.rate_limit_cooldown_seconds):
                self._wake_at = min(self._wake_at, last_ended + self.k.rate_limit_cooldown_seconds)
                skipped.append(Skip(task_id, HoldReason.RATE_LIMIT_COOLDOWN, profile=assignee))
                continue
            if budget <= 0:
                skipped.append(Skip(task_id, HoldReason.AT_CAPACITY, running=self.k.max_in_progress - budget,
                                    limit=self.k.max_in_progress, profile=assignee))
                continue
            cap = self.k.profiles[assignee].max_in_progress
            if cap is not None and per_profile.get(assignee, 0) >= cap:
                skipped.append(Skip(task_id, HoldReason.PER_PROFILE_CAPPED, running=per_profile.get(assignee, 0),
                                    limit=cap, profile=assignee))
                continue
            budget -= 1
            per_profile[assignee] = per_profile.get(assignee, 0) + 1
            picked.append((task_id, assignee, newly))
        return skipped, picked, nonspawnable

    async def _with_texts(self, picked: list[tuple[str, str, bool]]) -> list[tuple[str, str, str, str, bool]]:
        """The picked cards with their titles and bodies (the worker's environment), in
        the picked order; a card gone meanwhile is left out (its claim would fail)."""
        ids = [task_id for task_id, _profile, _newly in picked]
        rows = await self.board.fetch(f"SELECT id, title, body FROM tasks WHERE id IN ({','.join('?' * len(ids))})",
                                      ids)
        texts = {task_id: (title, body) for task_id, title, body in rows}
        return [(task_id, profile, *texts[task_id], newly) for task_id, profile, newly in picked if task_id in texts]

    async def _note_nonspawnable(self, cards: list[tuple[str, str]], now: float) -> None:
        """One ``skipped_nonspawnable`` event per card and assignee, not one per tick."""
        if not cards:
            return
        last: dict[str, tuple[str, str]] = {}  # card -> its newest event (kind, payload): one read per 500 cards
        for i in range(0, len(cards), 500):
            chunk = [task_id for task_id, _assignee in cards[i : i + 500]]
            rows = await self.board.fetch(
                "SELECT task_id, kind, payload FROM task_events WHERE id IN (SELECT max(id) FROM task_events "
                f"WHERE task_id IN ({','.join('?' * len(chunk))}) GROUP BY task_id)", chunk)
            last.update({task_id: (kind, payload) for task_id, kind, payload in rows})
        fresh = [(task_id, None, EventKind.SKIPPED_NONSPAWNABLE, {"assignee": assignee}) for task_id, assignee in cards
                 if not (last.get(task_id, ("", ""))[0] == EventKind.SKIPPED_NONSPAWNABLE
                         and f'"{assignee}"' in last[task_id][1])]
        if fresh:
            async def note(conn) -> None:
                await add_events(conn, fresh, now)

            await self.board.atomic(note)

    async def _within_profile_caps(self, conn, wanted: dict, tally: _Tally) -> None:
        """Inside the claim's transaction: drop from ``wanted`` what would take a capped
        profile over its cap, counted again now. On a shared board the store first locks
        those profiles (``lock_profiles``) until commit, so hosts claiming at once for
        one profile take turns and the cap holds across hosts."""
        capped = self._capped(wanted)
        if not capped:
            return
        await self.board.lock_profiles(conn, capped)
        rows = await conn.execute_fetchall(
            f"SELECT assignee, count(*) FROM tasks WHERE status = '{RUNNING}' "
            f"AND assignee IN ({','.join('?' * len(capped))}) GROUP BY assignee", capped)
        room = {p: self.k.profiles[p].max_in_progress for p in capped}
        for profile, count in rows:
            room[profile] -= int(count)
        for task_id, (profile, *_rest) in list(wanted.items()):
            if profile in room:
                if room[profile] <= 0:
                    del wanted[task_id]
                    tally.skipped.append(Skip(task_id, HoldReason.PER_PROFILE_CAPPED))
                else:
                    room[profile] -= 1

    def _capped(self, wanted: dict) -> list[str]:
        """The profiles of ``wanted`` that have a cap of their own, sorted."""
        return sorted({p for p, *_ in wanted.values() if self.k.profiles[p].max_in_progress is not None})

    async def _claim(self, chosen: list[tuple[str, str, str, str, bool]], now: float,
                     tally: _Tally, name_tokens=None) -> list[_Claimed]:
        """Claim every chosen card in one transaction (CAS on ready + no lock); each run
        is written ``launching`` with its launch token (named to ``name_tokens`` first:
        this process's own ticks never resolve a launch it is still making)."""
        if not chosen:
            return []
        lock = claim_lock_here()
        owner = claim_owner_payload(self.home.root)
        expires = now + self.k.claim_ttl_seconds
        wanted = {task_id: (profile, title, body, newly) for task_id, profile, title, body, newly in chosen}
        default = self.k.default_assignee
        tokens = {task_id: new_session_id() for task_id in wanted}
        if name_tokens is not None:
            name_tokens(tokens.values())

        async def claim(conn) -> tuple[list[str], dict[str, int]]:
            await self._within_profile_caps(conn, wanted, tally)
            if not wanted:
                return [], {}
            # One compare-and-set for all: only cards still ready and unclaimed are taken
            # (another dispatcher, or a person, may have got there first).
            rows = await conn.execute_fetchall(self.board.claim_statement(len(wanted)),
                                               (RUNNING, default, lock, expires, now, *wanted, READY))
            won = [r[0] for r in rows]
            if not won:
                return [], {}
            # Each run is written ``launching`` with its token before any process exists.
            runs = await conn.execute_fetchall(
                "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, started_at, process_id) "
                "VALUES " + ",".join([f"(?, ?, '{LAUNCHING}', ?, ?, ?, ?)"] * len(won)) + " RETURNING id, task_id",
                [v for task_id in won for v in (task_id, wanted[task_id][0], lock, expires, now, tokens[task_id])])
            run_of = {task_id: run_id for run_id, task_id in runs}
            await conn.executemany("UPDATE tasks SET current_run_id = ? WHERE id = ?",
                                   [(run_of[task_id], task_id) for task_id in won])
            events = []
            for task_id in won:
                profile, _title, _body, newly = wanted[task_id]
                if newly:
                    tally.auto_assigned.append(task_id)
                events.extend((task_id, run_of[task_id] if of_run else None, kind, payload)
                              for kind, payload, of_run in _claim_events(profile, newly, lock, tokens[task_id],
                                                                          owner))
            await add_events(conn, events, now)
            return won, run_of

        claim_cards = getattr(self.board, "claim_cards", None)
        if claim_cards is None:
            # One transaction, one call on the board's thread (Board.atomic).
            won, run_of = await self.board.atomic(claim)
            texts = {task_id: wanted[task_id][1:3] for task_id in won}
        else:
            won, run_of, texts = await self._claim_in_one(claim_cards, wanted, tokens, lock, expires, now, tally)
        if not won:
            return []
        order = {task_id: i for i, (task_id, *_rest) in enumerate(chosen)}
        return [_Claimed(task_id, run_of[task_id], self.k.profiles[wanted[task_id][0]], *texts[task_id],
                         tokens[task_id]) for task_id in sorted(won, key=order.__getitem__)]

    async def _claim_in_one(self, claim_cards, wanted: dict, tokens: dict[str, str], lock: str, expires: float,
                            now: float, tally: _Tally) -> tuple[list[str], dict[str, int], dict[str, tuple]]:
        """A server board's claim (``PgBoard.claim_cards``): the same compare-and-set,
        runs and events as ``claim`` above, in one statement, which is its own transaction
        unless a capped profile is among the cards (then the caps are counted under their
        locks first, in one transaction with it). The cards' titles and bodies come back
        with the claim. Returns (won, run of each, (title, body) of each)."""
        values = {"running": RUNNING, "ready": READY, "launching": LAUNCHING, "default": self.k.default_assignee,
                  "lock": lock, "expires": expires, "now": now}
        owner = claim_owner_payload(self.home.root)

        async def claim(conn) -> list[tuple]:
            await self._within_profile_caps(conn, wanted, tally)
            if not wanted:
                return []
            cards = [(task_id, profile, tokens[task_id]) for task_id, (profile, *_rest) in wanted.items()]
            events = [(task_id, kind, payload, of_run) for task_id, (profile, _t, _b, newly) in wanted.items()
                      for kind, payload, of_run in _claim_events(profile, newly, lock, tokens[task_id], owner)]
            return await claim_cards(conn, cards, events, **values)

        rows = await (self.board.atomic(claim) if self._capped(wanted) else claim(None))
        won = [task_id for task_id, _run, _title, _body in rows]
        taken = set(won)
        tally.auto_assigned.extend(task_id for task_id, (*_rest, newly) in wanted.items() if newly and task_id in taken)
        return (won, {task_id: run_id for task_id, run_id, _t, _b in rows},
                {task_id: (title, body) for task_id, _run, title, body in rows})

    async def _launch_all(self, claimed: list[_Claimed]) -> list[LaunchedWorker | Exception]:
        """Start the claimed cards' workers, in claim order, side by side in a few
        threads (see LAUNCHES_PER_THREAD); each thread launches its share one after
        another: one thread hop per share, not per worker."""
        threads = min(LAUNCH_THREADS, -(-len(claimed) // LAUNCHES_PER_THREAD))
        shares = await asyncio.gather(*(asyncio.to_thread(self._launch_share, claimed[i::threads])
                                        for i in range(threads)))
        return [shares[n % threads][n // threads] for n in range(len(claimed))]

    def _launch_share(self, share: list[_Claimed]) -> list[LaunchedWorker | Exception]:
        try:
            self.home.ensure_dir(self.home.kanban_logs_dir)
        except Exception as exc:  # every card of the share fails to spawn, each recorded
            return [exc] * len(share)
        out: list[LaunchedWorker | Exception] = []
        for c in share:
            try:
                out.append(self._launch(c))
            except Exception as exc:  # a failed spawn is recorded on the card, not raised
                out.append(exc)
        return out

    def _launch(self, c: _Claimed) -> LaunchedWorker:
        cwd = self.home.scratch_dir / f"kanban-{c.task_id}"
        self.home.ensure_dir(cwd)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.board.now()))
        append_log_line(self._log_of(c.task_id),
                        f"{RUN_HEADER_PREFIX}{c.run_id} · profile {c.profile.name} · {stamp} ===")
        env = worker_env(home=self.home.root, db=self.board.worker_location, task_id=c.task_id, run_id=c.run_id,
                         profile=c.profile.name, title=c.title, body=c.body, extra=c.profile.env)
        return self.spawner.launch(WorkerLaunch(c.task_id, c.run_id, c.profile.name, c.profile.command, env,
                                                cwd, self._log_of(c.task_id), c.token))

    async def _stop_taken_launch(self, run_id: int, task_id: str, outcome: str, pid, fp, lock,
                                 tally: _Tally) -> None:
        """A run taken while its worker was being launched (no pid to signal then): the
        worker that did start is stopped now, before anything can start another."""
        stop = await asyncio.to_thread(stop_worker, pid, fp, lock, self.grace)
        if not stop.stopped:
            tally.warnings.append(f"{task_id}: the worker pid {pid} of run {run_id}, taken while it launched, "
                                  f"is still running ({stop.refused or 'it survived SIGKILL'}); will retry")
        if stop.attempted:
            async with self.board.transaction() as conn:
                await add_event(conn, task_id, EventKind.TERMINAL_WORKER_REAPED, {
                    "pid": pid, "worker_started_at": fp, "reason": f"its run ended ({outcome}) while it launched",
                    **stop.to_json()}, self.board.now(), run_id)
            tally.reaped.append(task_id)

    async def _record_launches(self, results: list[tuple[_Claimed, LaunchedWorker | Exception]],
                               tally: _Tally) -> None:
        now = self.board.now()
        failed: list[tuple[_Claimed, str]] = []
        ok: list[tuple[_Claimed, LaunchedWorker, str]] = []
        for c, launched in results:
            if isinstance(launched, Exception):
                failed.append((c, f"spawn_failed: {launched}"))
            else:
                ok.append((c, launched, launched.fingerprint or identity.UNVERIFIED))
        if ok:
            async def record(conn) -> list[tuple]:
                # launching -> running. A run that ended meanwhile keeps the evidence all
                # the same: a very fast worker's own call (the terminal-worker reaper then
                # stops what still runs of it after its grace), or a run taken from the
                # launch (a person's reclaim or archive, a recovery that released it):
                # its worker is stopped at once, below.
                await conn.executemany(
                    f"UPDATE task_runs SET status = CASE WHEN status = '{LAUNCHING}' THEN '{RUNNING}' ELSE status END, "
                    "worker_pid = ?, worker_started_at = ?, process_id = ?, output_path = ? "
                    "WHERE id = ? AND worker_pid IS NULL",
                    [(w.pid, fp, w.session_id, w.output_path, c.run_id) for c, w, fp in ok])
                # The worker may already have ended its run (a very fast worker): then only
                # the run row keeps the evidence.
                await conn.executemany(
                    "UPDATE tasks SET worker_pid = ?, worker_started_at = ? WHERE id = ? AND current_run_id = ?",
                    [(w.pid, fp, c.task_id, c.run_id) for c, w, fp in ok])
                await add_events(conn, [(c.task_id, c.run_id, EventKind.SPAWNED, _spawned_payload(c, w, fp))
                                        for c, w, fp in ok], now)
                ids = [c.run_id for c, _w, _fp in ok]
                return await conn.execute_fetchall(
                    "SELECT id, task_id, outcome, worker_pid, worker_started_at, claim_lock FROM task_runs "
                    f"WHERE id IN ({','.join('?' * len(ids))}) AND ended_at IS NOT NULL "
                    "AND outcome NOT IN (?, ?, ?)", (*ids, *WORKERS_OWN_ENDS))

            record_launches = getattr(self.board, "record_launches", None)
            if record_launches is None:
                taken = await self.board.atomic(record)
            else:  # a server board: the same writes and read in one statement
                taken = await record_launches(
                    [(c.run_id, c.task_id, w.pid, fp, w.session_id, w.output_path, _spawned_payload(c, w, fp))
                     for c, w, fp in ok],
                    launching=LAUNCHING, running=RUNNING, kind=EventKind.SPAWNED, now=now, own_ends=WORKERS_OWN_ENDS)
            tally.spawned.extend(SpawnedCard(c.task_id, c.profile.name, w.pid, w.session_id) for c, w, _fp in ok)
            for run_id, task_id, outcome, pid, fp, lock in taken:
                await self._stop_taken_launch(run_id, task_id, outcome, pid, fp, lock, tally)
        for c, error in failed:
            task = await self.board.get_task(c.task_id)
            if task.current_run_id != c.run_id:
                continue
            if await self._requeue_failed(task, now, outcome=RunOutcome.SPAWN_FAILED, event=EventKind.SPAWN_FAILED,
                                          error=error, payload={"profile": c.profile.name}, tally=tally):
                tally.spawn_failed.append(c.task_id)
