"""Issue 34 case 6: a healthy worker is never stopped for being silent, nor for a clock
that jumps. The family: every age that decides to stop a running worker. A worker whose
process is verified alive (pid and start time) on its own host is alive, whether it ever
calls ``heartbeat`` or not: its host extends its claim. Only a missing process (or, on a
shared board, a lapsed host lease) ends a run, and max runtime is the worker's own age on
the boot clock, so a forward step of the wall clock stops nothing.

Real workers (held by a gate file) on the SQLite board and on a PostgreSQL board; time
is faked only at the clock boundary (FakeClock: ``advance`` lets time pass, ``step``
moves the wall clock alone)."""

from __future__ import annotations

import pytest

from engine import identity
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from tests.support import wait_until_async
from tests.support.commands import until
from tests.support.kanban import CLI, FakeClock, dispatcher, kanban_settings, kill_all_workers

KILLS = ("reclaimed", "timed_out", "crashed", "auto_blocked", "protocol_violations")


def _silent_worker(gate) -> str:
    """Never calls heartbeat: works until the test opens the gate, then completes."""
    return f'{until(gate)} {CLI} complete "$HERMES_KANBAN_TASK" --summary "done, never a heartbeat"'


@pytest.fixture
def world(home, board_backend, open_test_board, tmp_path):
    clock = FakeClock()
    gate = tmp_path / "gate"
    spawners = []

    async def make(**kanban):
        settings = kanban_settings({"w": _silent_worker(gate)}, max_in_progress=5, **kanban)
        board = await open_test_board(clock, board_backend)
        spawner = RegistrySpawner(home, settings)
        spawners.append(spawner)
        return board, dispatcher(board, home, settings, spawner)

    yield clock, gate, make
    gate.touch()
    for spawner in spawners:
        kill_all_workers(spawner)


def _nothing_stopped(result) -> bool:
    return not any(getattr(result, kind) for kind in KILLS)


async def _all_done_once(board, cards) -> None:
    for card in cards:
        await wait_until_async(lambda c=card: _is_done(board, c.id), timeout=60, what=f"{card.id} done")
        runs = await board.runs_of(card.id)
        assert [r.outcome for r in runs] == ["completed"]  # one run, never stopped, never started again
        assert (await board.get_task(card.id)).consecutive_failures == 0


async def _is_done(board, task_id: str) -> bool:
    return (await board.get_task(task_id)).status == "done"


async def test_silent_workers_keep_their_cards_through_80_minutes_of_ticks(world):
    """The heartbeat is optional: five workers that never call it, ticked every 5
    minutes for 80 minutes (claims of 15 minutes), are extended, never stopped."""
    clock, gate, make = world
    board, disp = await make(claim_ttl_seconds=900, crash_grace_seconds=30)
    cards = await tr.create_tasks(board, [NewTask(f"silent {i}", assignee="w") for i in range(5)])
    first = await disp.tick()
    assert len(first.spawned) == 5
    workers = {c.id: await board.get_task(c.id) for c in cards}
    for _ in range(16):
        clock.advance(300)
        result = await disp.tick()
        assert _nothing_stopped(result), result
    for card in workers.values():
        assert identity.is_alive(card.worker_pid, card.worker_started_at)
        now = await board.get_task(card.id)
        assert now.current_run_id == card.current_run_id and now.claim_expires > clock.now
    gate.touch()
    await _all_done_once(board, cards)


async def test_a_forward_clock_step_of_3700s_stops_no_healthy_worker(world):
    """The wall clock jumps 3700 s ahead (no time passes): every claim has run out and
    every run looks an hour old on the board's clock, yet all five workers (two with a
    max runtime of an hour) keep their cards: the claims are extended (verified alive)
    and max runtime is measured on the boot clock."""
    clock, gate, make = world
    board, disp = await make(claim_ttl_seconds=900, crash_grace_seconds=30)
    cards = await tr.create_tasks(board, [
        NewTask(f"step {i}", assignee="w", max_runtime_seconds=3600 if i < 2 else None) for i in range(5)])
    assert len((await disp.tick()).spawned) == 5
    workers = {c.id: await board.get_task(c.id) for c in cards}
    clock.step(3700)
    result = await disp.tick()
    assert _nothing_stopped(result), result
    assert sorted(result.extended) == sorted(c.id for c in cards)  # the claims ran out: extended, alive
    for card in workers.values():
        assert identity.is_alive(card.worker_pid, card.worker_started_at)
    assert _nothing_stopped(await disp.tick())
    gate.touch()
    await _all_done_once(board, cards)


async def test_time_that_really_passes_still_times_a_worker_out(world):
    """The other side: 3700 s that pass on both clocks are over an hour's max runtime."""
    clock, gate, make = world
    board, disp = await make(claim_ttl_seconds=900, crash_grace_seconds=30)
    card = await tr.create_task(board, NewTask("capped", assignee="w", max_runtime_seconds=3600))
    spawned = (await disp.tick()).spawned
    fp = (await board.get_task(card.id)).worker_started_at
    clock.advance(3700)
    result = await disp.tick()
    assert result.timed_out == (card.id,)
    assert not identity.is_alive(spawned[0].pid, fp)
