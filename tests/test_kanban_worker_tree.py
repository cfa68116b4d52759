"""Issue 34 case 1, the board side: a worker whose processes leave the wrapper's process
group is stopped whole, and its card never starts again while anything of its last run
lives. The family: GNU ``timeout`` (a new group), ``os.setpgid``, ``setsid`` (a new
session), ``set -m`` (a group per job); the stops: max runtime by the real dispatcher
tick, a person's reclaim. Before, a stop signalled the wrapper's group only: each max
runtime left ``timeout``/``sleep`` running and the card started beside them (3 live
workers per card in 30 s of ``kanban daemon``).

Real workers; the tick is paced by conditions (each worker seen running), time passes
only on the FakeClock (wall and boot clock), so max runtime falls due without waiting."""

from __future__ import annotations

import pytest

from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from tests.support import wait_until
from tests.support.kanban import FakeClock, dispatcher, kanban_settings, open_board
from tests.support.trees import kill_all_of_home, processes_with

LEAVERS = {
    "timeout": "exec timeout 300 sleep 100",
    "setpgid": "exec python3 -c 'import os; os.setpgid(0,0); os.execvp(\"sleep\",[\"sleep\",\"100\"])'",
    "setsid": "setsid sleep 100",
    "set -m": "exec bash -c 'set -m; sleep 100 & wait'",  # dash turns job control off without a tty
}


def _workers_of(task_id: str) -> dict[str, list[str]]:
    """The card's live workers: session id -> names of its live processes (found by the
    environment every worker's process carries, whatever group it is in)."""
    from pathlib import Path

    found: dict[str, list[str]] = {}
    for pid, name in processes_with(f"HERMES_KANBAN_TASK={task_id}").items():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        sid = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"HERMES_PROCESS_ID=")), "?")
        found.setdefault(sid, []).append(name)
    return found


@pytest.fixture
def world(home):
    clock = FakeClock()
    yield home, clock
    kill_all_of_home(home)


@pytest.mark.parametrize("how", list(LEAVERS))
async def test_max_runtime_stops_the_whole_worker_and_never_starts_one_beside_it(world, how):
    """Three max-runtime stops by the real tick: at every point at most one live worker
    for the card, and after the last stop nothing of any run is left."""
    home, clock = world
    settings = kanban_settings({"w": LEAVERS[how]}, crash_grace_seconds=30, failure_limit=10)
    board = await open_board(home, clock)
    spawner = RegistrySpawner(home, settings)
    disp = dispatcher(board, home, settings, spawner)
    try:
        card = await tr.create_task(board, NewTask("leaves its group", assignee="w", max_runtime_seconds=6,
                                                   max_retries=5))
        seen_runs = 0
        for _round in range(3):
            result = await disp.tick()
            if result.spawned:
                seen_runs += 1
            assert len(_workers_of(card.id)) <= 1, _workers_of(card.id)
            wait_until(lambda: any("sleep" in names for names in _workers_of(card.id).values()),
                       what=lambda: f"the worker's sleep: {_workers_of(card.id)}")
            assert len(_workers_of(card.id)) == 1, _workers_of(card.id)
            clock.advance(7)
            result = await disp.tick()  # max runtime: stopped whole, requeued, and (nothing left) started again
            assert card.id in result.timed_out, result
            assert len(_workers_of(card.id)) <= 1, _workers_of(card.id)
        if (await board.get_task(card.id)).status == "running":
            await tr.reclaim(board, card.id, grace=5)
        assert _workers_of(card.id) == {}
        assert seen_runs >= 1 and len(await board.runs_of(card.id)) >= 3
    finally:
        await board.close()


async def test_a_card_is_held_while_anything_of_its_last_run_lives(world, monkeypatch):
    """The hold: a worker that crashed (exit 1) and left a ``setsid sleep`` that cannot be
    stopped now (the kernel refuses the signal: faked, the tests run as one user) holds its
    ready card, ``last_run_alive`` with the one line naming the sleep; once the sleep can
    be stopped it is, and only then does the card start again."""
    from engine import identity
    from engine.kanban import wording
    from engine.processes import tree

    home, clock = world
    settings = kanban_settings({"w": "(setsid sleep 100 &); exit 1"}, crash_grace_seconds=30, failure_limit=10)
    board = await open_board(home, clock)
    spawner = RegistrySpawner(home, settings)
    disp = dispatcher(board, home, settings, spawner)
    real = identity.send_signal

    def refuse_sleep(pid, fp, sig, **kw):
        st = identity.read_stat(pid)
        if st is not None and st.comm == b"sleep":
            return identity.SignalResult(pid, identity.signal_name(sig), identity.SignalOutcome.ERROR,
                                         "Operation not permitted")
        return real(pid, fp, sig, **kw)

    try:
        card = await tr.create_task(board, NewTask("leaves a sleep", assignee="w"))
        first = (await disp.tick()).spawned[0]
        wait_until(lambda: spawner.registry.get(first.session_id).finished, what="the worker's exit")
        wait_until(lambda: "sleep" in str(_workers_of(card.id)), what="the sleep it left")
        monkeypatch.setattr(identity, "send_signal", refuse_sleep)
        monkeypatch.setattr(tree, "KILL_WAIT_SECONDS", 0.1)
        result = await disp.tick()
        assert result.crashed == (card.id,) and not result.spawned, result
        assert [s.reason for s in result.skipped] == ["last_run_alive"]
        assert "held until nothing of it is left" in wording.held_back_words(result)
        assert any("sleep" in w and "still alive" in w for w in result.warnings), result.warnings
        assert not (await disp.tick()).spawned  # still held
        monkeypatch.setattr(identity, "send_signal", real)
        result = await disp.tick()
        assert len(result.spawned) == 1, result  # the sleep stopped, the evidence dropped, started again
        assert list(_workers_of(card.id)) in ([result.spawned[0].session_id], [])
    finally:
        await board.close()
