"""The dispatch tick end to end with real workers (process sessions of the registry).

Time is faked only at the clock boundary (the board's and the dispatcher's clock);
workers, exits, signals and logs are real.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from engine import identity
from engine.kanban import transitions as tr
from engine.kanban.dispatcher import dispatch_lock
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.wording import held_back_words, skip_reason
from engine.kanban.workers import NullSpawner, claim_lock_here
from tests.support import wait_until_async
from tests.support.kanban import (
    CLI,
    FakeClock,
    dispatcher,
    kanban_settings,
    kill_all_workers,
    read_log,
)
from tests.support.kanban import wait_for_exit as wait_exit


@pytest.fixture
def world(home, board_backend, open_test_board):
    """(home, clock, make(settings) -> (board, dispatcher, spawner)); every worker is killed
    and every board closed after. Each test runs on the SQLite board and on a PostgreSQL
    board (``board_backend``)."""
    clock = FakeClock()
    made = []

    async def make(settings, spawner=None):
        board = await open_test_board(clock, board_backend)
        spawner = spawner or RegistrySpawner(home, settings)
        made.append((board, spawner))
        return board, dispatcher(board, home, settings, spawner), spawner

    yield home, clock, make
    for _board, spawner in made:
        if isinstance(spawner, RegistrySpawner):
            kill_all_workers(spawner)


async def _close(board):
    await board.close()


async def _status_is(board, task_id: str, status: str) -> bool:
    return (await board.get_task(task_id)).status == status




async def test_worker_completes_its_card_through_the_cli(world):
    home, clock, make = world
    settings = kanban_settings({"w": f'echo "working on $HERMES_KANBAN_TITLE in $PWD"; '
                                     f'{CLI} complete "$HERMES_KANBAN_TASK" --summary "all good"'})
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("write docs", assignee="w"))
        result = await disp.tick()
        assert [s.task_id for s in result.spawned] == [t.id]
        assert result.spawned[0].pid and result.spawned[0].session_id
        running = await board.get_task(t.id)
        assert running.status == "running"
        assert running.worker_pid == result.spawned[0].pid
        assert identity.is_verifiable(running.worker_started_at)
        wait_exit(spawner, result.spawned[0].session_id)
        done = await board.get_task(t.id)
        assert (done.status, done.result, done.worker_pid) == ("done", "all good", None)
        await disp.tick()  # copies the rest of the output into the card log
        log = read_log(home, t.id)
        assert "working on write docs" in log
        assert f"kanban-{t.id}" in log  # cwd = the card's scratch entry
        assert (home.scratch_dir / f"kanban-{t.id}").is_dir()
        run = (await board.runs_of(t.id))[0]
        assert (run.outcome, run.summary) == ("completed", "all good")
    finally:
        await _close(board)


async def test_crash_twice_gives_up_into_blocked_with_last_words(world):
    home, clock, make = world
    settings = kanban_settings({"w": 'echo "step one ok"; echo; echo "cannot open config.toml"; exit 3'},
                               crash_grace_seconds=0, failure_limit=2)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("fragile", assignee="w"))
        first = await disp.tick()
        wait_exit(spawner, first.spawned[0].session_id)
        clock.advance(1)
        second = await disp.tick()
        assert second.crashed == (t.id,)
        assert [s.task_id for s in second.spawned] == [t.id]  # requeued and retried
        after_one = await board.get_task(t.id)
        assert after_one.consecutive_failures == 1
        assert after_one.last_failure_error.startswith(f"pid {first.spawned[0].pid} exited with code 3")
        wait_exit(spawner, second.spawned[0].session_id)
        clock.advance(1)
        third = await disp.tick()
        assert third.crashed == (t.id,) and third.auto_blocked == (t.id,)
        assert not third.spawned
        blocked = await board.get_task(t.id)
        assert blocked.status == "blocked" and blocked.consecutive_failures == 2
        assert blocked.last_failure_error.endswith("Worker's last output: 'step one ok cannot open config.toml'")
        events = await board.events(t.id)
        assert [e.kind for e in events][-2:] == ["crashed", "gave_up"]
        gave_up = events[-1].payload
        assert (gave_up["failures"], gave_up["effective_limit"], gave_up["limit_source"]) == (2, 2, "dispatcher")
        assert events[-2].payload["worker_output"] == "step one ok cannot open config.toml"
        assert events[-2].payload["exit_code"] == 3
    finally:
        await _close(board)


async def test_task_max_retries_wins_over_failure_limit(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exit 1"}, crash_grace_seconds=0, failure_limit=5)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("once", assignee="w", max_retries=1))
        first = await disp.tick()
        wait_exit(spawner, first.spawned[0].session_id)
        second = await disp.tick()
        assert second.auto_blocked == (t.id,)
        gave_up = (await board.events(t.id))[-1]
        assert gave_up.kind == "gave_up"
        assert (gave_up.payload["effective_limit"], gave_up.payload["limit_source"]) == (1, "task")
    finally:
        await _close(board)


async def test_exit_zero_without_a_board_call_is_a_protocol_violation_with_its_own_budget(world):
    home, clock, make = world
    settings = kanban_settings({"w": 'echo "I think I am done"; exit 0'}, crash_grace_seconds=0, failure_limit=1)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("forgetful", assignee="w"))
        result = await disp.tick()
        for round_ in range(3):
            wait_exit(spawner, result.spawned[0].session_id)
            clock.advance(1)
            result = await disp.tick()
            assert result.protocol_violations == (t.id,)
            card = await board.get_task(t.id)
            assert card.consecutive_failures == 0  # not the crash budget (failure_limit is 1)
            assert "protocol_violation" in card.last_failure_error
            assert card.last_failure_error.endswith("Worker's last output: 'I think I am done'")
            if round_ < 2:
                assert card.status == "running"  # requeued and spawned again
        assert card.status == "blocked" and result.auto_blocked == (t.id,)
        gave_up = (await board.events(t.id))[-1].payload
        assert gave_up["trigger_outcome"] == "protocol_violation" and gave_up["failures"] == 3
    finally:
        await _close(board)


async def test_complete_on_exit_profile_finishes_the_card_on_exit_zero(world):
    """Judged on the next tick, although crash_grace_seconds is 30 and the board's clock
    does not move: the recorded exit is enough (the grace is for a worker gone without one)."""
    home, clock, make = world
    settings = kanban_settings({"plain": {"command": "sleep 1", "complete_on_exit": True}},
                               crash_grace_seconds=30)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("plain command", assignee="plain"))
        result = await disp.tick()
        wait_exit(spawner, result.spawned[0].session_id)
        result = await disp.tick()
        assert result.completed_on_exit == (t.id,)
        assert (await board.get_task(t.id)).status == "done"
    finally:
        await _close(board)


async def test_rate_limited_exit_is_not_a_failure_and_waits_out_the_cooldown(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exit 75"}, crash_grace_seconds=0, failure_limit=1,
                               rate_limit_cooldown_seconds=300)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("busy api", assignee="w"))
        first = await disp.tick()
        wait_exit(spawner, first.spawned[0].session_id)
        result = await disp.tick()
        assert result.rate_limited == (t.id,)
        card = await board.get_task(t.id)
        assert (card.status, card.consecutive_failures) == ("ready", 0)
        assert "rate-limited" in card.last_failure_error
        assert [(s.task_id, s.reason) for s in result.skipped] == [(t.id, "rate_limit_cooldown")]
        assert result.held_back == "Last tick held back: rate_limit_cooldown=1"
        assert (await board.runs_of(t.id))[-1].outcome == "rate_limited"
        clock.advance(100)
        assert [s.reason for s in (await disp.tick()).skipped] == ["rate_limit_cooldown"]
        clock.advance(250)
        assert [s.task_id for s in (await disp.tick()).spawned] == [t.id]
    finally:
        await _close(board)


async def test_max_runtime_terminates_the_worker_and_counts_a_failure(world):
    home, clock, make = world
    settings = kanban_settings({"w": "echo started; exec sleep 60"}, crash_grace_seconds=3600)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("slow", assignee="w", max_runtime_seconds=5))
        first = await disp.tick()
        pid = first.spawned[0].pid
        fp = (await board.get_task(t.id)).worker_started_at
        assert identity.is_alive(pid, fp)
        clock.advance(3)
        assert not (await disp.tick()).timed_out  # under the limit: left alone
        clock.advance(30)
        result = await disp.tick()
        assert result.timed_out == (t.id,)
        assert not identity.is_alive(pid, fp)
        card = await board.get_task(t.id)
        assert card.consecutive_failures == 1 and card.worker_pid != pid  # retried by a new worker
        event = [e for e in await board.events(t.id) if e.kind == "timed_out"][0]
        assert event.payload["limit_seconds"] == 5 and event.payload["elapsed_seconds"] >= 30
        assert ("SIGTERM" in {s["signal"] for s in event.payload["termination"]["signals"]})
    finally:
        await _close(board)


async def test_stale_claim_with_a_live_heartbeating_worker_is_extended(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exec sleep 60"}, claim_ttl_seconds=900, crash_grace_seconds=3600)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("long job", assignee="w"))
        first = await disp.tick()
        card = await board.get_task(t.id)
        clock.advance(600)
        await tr.heartbeat(board, t.id, tr.WorkerCall(t.id, card.current_run_id), 900)
        clock.advance(1000)  # past the heartbeat's extended claim
        result = await disp.tick()
        assert result.extended == (t.id,) and not result.reclaimed
        card = await board.get_task(t.id)
        assert card.status == "running" and card.claim_expires == clock.now + 900
        assert identity.is_alive(first.spawned[0].pid, card.worker_started_at)
        assert (await board.events(t.id))[-1].kind == "claim_extended"
    finally:
        await _close(board)


async def test_stale_claim_with_a_dead_worker_is_reclaimed_and_counted(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exit 0"}, claim_ttl_seconds=900, crash_grace_seconds=99999, failure_limit=3)
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("vanishing", assignee="w"))
        first = await disp.tick()
        wait_exit(spawner, first.spawned[0].session_id)
        clock.advance(901)
        result = await disp.tick()
        assert result.reclaimed == (t.id,)
        event = [e for e in await board.events(t.id) if e.kind == "reclaimed"][0]
        assert event.payload["host_local"] is True and event.payload["worker_pid"] == first.spawned[0].pid
        assert event.payload["stale_lock"].startswith(claim_lock_here().split(":")[0] + ":")
        assert (await board.get_task(t.id)).consecutive_failures == 1
        assert (await board.runs_of(t.id))[0].outcome == "reclaimed"
    finally:
        await _close(board)


async def test_worker_alive_120s_after_its_run_closed_is_reaped(world):
    home, clock, make = world
    settings = kanban_settings({"w": f'echo lingering; {CLI} complete "$HERMES_KANBAN_TASK"; exec sleep 60'})
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("lingers", assignee="w"))
        first = await disp.tick()
        pid = first.spawned[0].pid
        await wait_until_async(lambda: _status_is(board, t.id, "done"), what="the card done by its worker")
        run = (await board.runs_of(t.id))[0]
        assert run.outcome == "completed" and run.worker_pid == pid  # evidence kept on the closed run
        # The run was closed by the worker's own CLI call, at a real time: the fake clock
        # is set relative to that time, so a slow machine cannot move the grace window.
        clock.now = run.ended_at + 60
        assert not (await disp.tick()).reaped_terminal_workers  # inside the grace: not signalled
        assert identity.is_alive(pid, run.worker_started_at)
        clock.now = run.ended_at + 121
        result = await disp.tick()
        assert result.reaped_terminal_workers == (t.id,)
        assert not identity.is_alive(pid, run.worker_started_at)
        assert (await board.runs_of(t.id))[0].worker_pid is None
        assert (await board.events(t.id))[-1].kind == "terminal_worker_reaped"
        assert "lingering" in read_log(home, t.id)
    finally:
        await _close(board)


async def _plant_running(board, pid: int, fp: str, started_ago: float, **task_fields):
    """A running card whose worker is ``pid`` with fingerprint ``fp`` (claimed here)."""
    t = await tr.create_task(board, NewTask("planted", assignee="w", **task_fields))
    now = board.now()
    lock = claim_lock_here()
    async with board.transaction() as conn:
        cur = await conn.execute(
            "INSERT INTO task_runs (task_id, profile, status, claim_lock, worker_pid, worker_started_at, started_at) "
            "VALUES (?, 'w', 'running', ?, ?, ?, ?)", (t.id, lock, pid, fp, now - started_ago))
        await conn.execute(
            "UPDATE tasks SET status = 'running', claim_lock = ?, claim_expires = ?, worker_pid = ?, "
            "worker_started_at = ?, current_run_id = ?, started_at = ? WHERE id = ?",
            (lock, now - 1, pid, fp, cur.lastrowid, now - started_ago, t.id))
    return t.id


async def test_recycled_or_unverified_pid_is_never_signalled(world, children):
    home, clock, make = world
    settings = kanban_settings({"w": "true"}, crash_grace_seconds=0)
    board, disp, _spawner = await make(settings, NullSpawner())
    try:
        stranger = children([sys.executable, "-c", "import time; time.sleep(60)"])
        real_fp = identity.fingerprint(stranger.pid)
        boot, _, ticks = real_fp.partition("|")
        other_boot = ("0" if boot[0] != "0" else "1") + boot[1:]
        recycled = await _plant_running(board, stranger.pid, f"{other_boot}|{ticks}", 600, max_runtime_seconds=1)
        unverified = await _plant_running(board, stranger.pid, identity.UNVERIFIED, 600, max_runtime_seconds=1)
        result = await disp.tick()
        assert stranger.poll() is None  # never signalled
        # The recycled pid is not our worker: the card is freed, without a signal.
        assert recycled in result.reclaimed
        card = await board.get_task(recycled)
        assert card.status in ("ready", "running") and card.worker_pid != stranger.pid
        # An unverified worker that still exists holds its card: never signalled, never doubled.
        assert unverified in result.deferred
        assert (await board.get_task(unverified)).status == "running"
        assert any("never verified" in w for w in result.warnings)
        # An operator may archive it, but that still sends nothing.
        archived = await tr.archive(board, unverified, grace=0.5)
        assert not archived.stop.attempted and "never verified" in archived.stop.refused
        assert stranger.poll() is None
        stranger.send_signal(signal.SIGKILL)
        stranger.wait(5)
    finally:
        await _close(board)


async def test_dispatch_profiles_and_default_assignee_gating(world):
    home, clock, make = world
    spawner = NullSpawner()
    allowed = kanban_settings({"a": "true", "b": "true"}, dispatch_profiles=("a",), default_assignee="b")
    board, disp, _ = await make(allowed, spawner)
    try:
        for_b = await tr.create_task(board, NewTask("for b", assignee="b"))
        nobody = await tr.create_task(board, NewTask("nobody"))
        for_a = await tr.create_task(board, NewTask("for a", assignee="a"))
        result = await disp.tick()
        assert [s.task_id for s in result.spawned] == [for_a.id]
        reasons = {s.task_id: s.reason for s in result.skipped}
        assert reasons == {for_b.id: "skipped_nonspawnable", nobody.id: "skipped_unassigned"}
        # a default that is not allowed here leaves the card untouched
        assert (await board.get_task(nobody.id)).assignee is None
        # the nonspawnable event is written once, not on every tick
        await disp.tick()
        assert [e.kind for e in await board.events(for_b.id)].count("skipped_nonspawnable") == 1

        default_ok = kanban_settings({"a": "true", "b": "true"}, dispatch_profiles=("a",), default_assignee="a")
        result = await dispatcher(board, home, default_ok, spawner).tick()
        assert [s.task_id for s in result.spawned] == [nobody.id]
        assert result.auto_assigned == (nobody.id,)
        assert (await board.get_task(nobody.id)).assignee == "a"

        none_allowed = kanban_settings({"a": "true", "b": "true"}, dispatch_profiles=())
        another = await tr.create_task(board, NewTask("another for a", assignee="a"))
        result = await dispatcher(board, home, none_allowed, spawner).tick()
        assert not result.spawned
        assert {s.task_id: s.reason for s in result.skipped}[another.id] == "skipped_nonspawnable"
    finally:
        await _close(board)


async def test_caps_priority_and_the_held_back_line(world):
    home, clock, make = world
    spawner = NullSpawner()
    settings = kanban_settings({"a": {"command": "true", "max_in_progress": 1}, "b": "true"}, max_in_progress=2)
    board, disp, _ = await make(settings, spawner)
    try:
        low = await tr.create_task(board, NewTask("low", assignee="b", priority=0))
        high_a1 = await tr.create_task(board, NewTask("a1", assignee="a", priority=5))
        clock.advance(1)  # same priority: the older card goes first
        high_a2 = await tr.create_task(board, NewTask("a2", assignee="a", priority=5))
        mid = await tr.create_task(board, NewTask("mid", assignee="b", priority=3))
        result = await disp.tick()
        assert [s.task_id for s in result.spawned] == [high_a1.id, mid.id]
        assert {s.task_id: s.reason for s in result.skipped} == {high_a2.id: "per_profile_capped",
                                                                 low.id: "at_capacity"}
        # The numbers behind each cap travel with the code, and the words are made of them.
        by_id = {s.task_id: s for s in result.skipped}
        assert skip_reason(by_id[high_a2.id]) == "waiting: 1 of 1 running, the profile's cap (a)"
        assert skip_reason(by_id[low.id]) == "waiting: 2 of 2 running, the board's cap"
        result = await disp.tick()
        assert not result.spawned
        assert result.held_back_counts == {"at_capacity": 2}
        assert result.held_back == "Last tick held back: at_capacity=2"
        assert held_back_words(result) == "held back: 2 cards waiting: 2 of 2 running, the board's cap"
    finally:
        await _close(board)


async def test_a_second_dispatcher_is_skipped_locked_and_writes_nothing(world, board_backend):
    if board_backend:
        pytest.skip("the file lock is SQLite's; tests/test_pg_board.py pins the PostgreSQL host lock")
    home, clock, make = world
    settings = kanban_settings({"a": "true"})
    board, disp, _ = await make(settings, NullSpawner())
    try:
        await tr.create_task(board, NewTask("waiting", assignee="a"))
        events_before = len(await board.events())
        holder = subprocess.Popen([sys.executable, "-c", (
            "import sys, time; from pathlib import Path; from engine.kanban.dispatcher import dispatch_lock\n"
            f"with dispatch_lock(Path({str(home.kanban_db)!r})) as held:\n"
            "    print(held, flush=True); sys.stdin.read()")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        try:
            assert holder.stdout.readline().strip() == "True"
            result = await disp.tick()
            assert result.skipped_locked and not result.spawned
            assert result.held_back == "Last tick held back: skipped_locked=1"
            assert len(await board.events()) == events_before
        finally:
            holder.communicate("", timeout=10)
        with dispatch_lock(home.kanban_db) as held:
            assert held
        assert (await disp.tick()).spawned
    finally:
        await _close(board)


async def test_archiving_a_running_card_terminates_its_worker(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exec sleep 60"})
    board, disp, _spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("abandon", assignee="w"))
        pid = (await disp.tick()).spawned[0].pid
        fp = (await board.get_task(t.id)).worker_started_at
        result = await tr.archive(board, t.id, grace=1.0)
        assert result.stop.attempted and result.stop.stopped
        assert not identity.is_alive(pid, fp)
        assert (await board.events(t.id))[-1].kind == "archive_worker_termination"
        assert (await board.get_task(t.id)).status == "archived"
    finally:
        await _close(board)


async def test_operator_reclaim_stops_the_worker_and_resets_failures(world):
    home, clock, make = world
    settings = kanban_settings({"w": "exec sleep 60"})
    board, disp, _spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("stuck", assignee="w"))
        pid = (await disp.tick()).spawned[0].pid
        card = await board.get_task(t.id)
        await board.conn.execute("UPDATE tasks SET consecutive_failures = 1 WHERE id = ?", (t.id,))
        result = await tr.reclaim(board, t.id, reason="wrong approach", grace=1.0)
        assert result.to_status == "ready" and result.stop.stopped
        assert not identity.is_alive(pid, card.worker_started_at)
        card = await board.get_task(t.id)
        assert (card.status, card.consecutive_failures, card.worker_pid) == ("ready", 0, None)
        run = (await board.runs_of(t.id))[0]
        assert (run.outcome, run.error) == ("reclaimed", "manual_reclaim: wrong approach")
    finally:
        await _close(board)


async def test_failed_spawn_is_recorded_and_counted(world, tmp_path):
    home, clock, make = world

    class Refusing(NullSpawner):
        def launch(self, launch):
            raise OSError("no such shell")

    settings = kanban_settings({"w": "true"}, failure_limit=2)
    board, disp, _ = await make(settings, Refusing())
    try:
        t = await tr.create_task(board, NewTask("doomed", assignee="w"))
        result = await disp.tick()
        assert result.spawn_failed == (t.id,) and not result.spawned
        card = await board.get_task(t.id)
        assert (card.status, card.consecutive_failures) == ("ready", 1)
        assert "no such shell" in card.last_failure_error
        result = await disp.tick()
        assert result.auto_blocked == (t.id,)
    finally:
        await _close(board)


async def test_parents_done_promote_the_child(world):
    home, clock, make = world
    board, disp, _ = await make(kanban_settings({}), NullSpawner())
    try:
        p1 = await tr.create_task(board, NewTask("p1"))
        p2 = await tr.create_task(board, NewTask("p2"))
        child = await tr.create_task(board, NewTask("child", parents=(p1.id, p2.id)))
        await tr.complete(board, p1.id)
        assert not (await disp.tick()).promoted
        await tr.archive(board, p2.id)
        assert (await disp.tick()).promoted == (child.id,)
        assert (await board.get_task(child.id)).status == "ready"
    finally:
        await _close(board)


async def test_a_card_promoted_by_a_tick_is_spawned_by_the_same_tick(world):
    home, clock, make = world
    board, disp, spawner = await make(kanban_settings({"coder": "true"}), NullSpawner())
    try:
        parent = await tr.create_task(board, NewTask("parent"))
        child = await tr.create_task(board, NewTask("child", assignee="coder", parents=(parent.id,)))
        await tr.complete(board, parent.id)
        result = await disp.tick()  # nothing running: the tick's first look read the board before the promotion
        assert result.promoted == (child.id,)
        assert [s.task_id for s in result.spawned] == [child.id]
        assert (await board.get_task(child.id)).status == "running"
    finally:
        await _close(board)


async def test_a_worker_whose_fingerprint_capture_failed_is_never_signalled(world, monkeypatch):
    """The boot id cannot be read at spawn (fake boundary): the worker is stored as
    'unverified' and no tick, timeout or archive ever signals it."""
    import os

    home, clock, make = world
    settings = kanban_settings({"w": "exec sleep 60"}, crash_grace_seconds=0)
    board, disp, spawner = await make(settings)
    monkeypatch.setattr(identity, "_boot_id_cache", None)
    monkeypatch.setattr(identity, "_read_boot_id", lambda: None)
    pid = None
    try:
        t = await tr.create_task(board, NewTask("unverifiable", assignee="w", max_runtime_seconds=1))
        pid = (await disp.tick()).spawned[0].pid
        card = await board.get_task(t.id)
        assert card.worker_started_at == identity.UNVERIFIED
        clock.advance(5000)  # past the max runtime and the claim TTL
        result = await disp.tick()
        assert t.id in result.deferred and not result.timed_out and not result.crashed
        assert any("never verified" in w for w in result.warnings)
        archived = await tr.archive(board, t.id, grace=0.2)
        assert not archived.stop.attempted and archived.stop.refused
        assert identity.read_stat(pid) is not None and not identity.read_stat(pid).is_zombie
    finally:
        if pid:
            os.killpg(pid, signal.SIGKILL)  # the test's own cleanup of what the product may not touch
        await _close(board)


async def test_a_gone_worker_without_an_exit_record_still_waits_out_the_grace(world, children):
    home, clock, make = world
    settings = kanban_settings({"w": "true"}, crash_grace_seconds=30)
    board, disp, spawner = await make(settings)
    try:
        child = children(["true"])
        child.wait()
        task_id = await _plant_running(board, child.pid, identity.UNVERIFIED, started_ago=0)
        async with board.transaction() as conn:  # a fresh claim: only the crash check may act
            await conn.execute("UPDATE tasks SET claim_expires = ? WHERE id = ?", (clock.now + 3600, task_id))
        assert task_id not in (await disp.tick()).crashed
        clock.advance(31)
        assert (await disp.tick()).crashed == (task_id,)
    finally:
        await _close(board)


async def test_a_worker_s_leftover_children_end_with_its_run_and_it_is_logged(world, tmp_path):
    home, clock, make = world
    pid_file = tmp_path / "leftover.pid"
    settings = kanban_settings({"w": {"command": f"sleep 1000 & echo $! > {pid_file}; exit 0",
                                      "complete_on_exit": True}})
    board, disp, spawner = await make(settings)
    try:
        t = await tr.create_task(board, NewTask("leaves a child", assignee="w"))
        result = await disp.tick()
        wait_exit(spawner, result.spawned[0].session_id)
        leftover = int(pid_file.read_text())
        fp = identity.fingerprint(leftover)
        assert identity.is_alive(leftover, fp)
        result = await disp.tick()
        assert result.completed_on_exit == (t.id,)
        assert result.reaped_terminal_workers == (t.id,)
        assert not identity.is_alive(leftover, fp)
        event = next(e for e in await board.events(t.id) if e.kind == "worker_group_ended")
        assert {"pid": leftover, "signal": "SIGTERM"} in event.payload["signals"]
        assert event.payload["terminated"] is True
        assert (await board.runs_of(t.id))[0].worker_pid is None  # evidence dropped once all ended
    finally:
        await _close(board)
