"""A person's reclaim of a card whose worker runs on another host (issue 34, case 3).

The reclaim takes the card back at once (fencing refuses the old worker's calls), but it
cannot signal a worker on another host. The card used to be started again by the next
tick anywhere while the old worker ran on (for up to the terminal grace, 120 s). Now the
card waits (``awaiting_host_stop``, said by the reclaim's reply and as the held-back
reason) until the old run's host confirms the stop (its tick stops the worker at once and
clears the run's evidence) or, on a server board, that host's lease lapses.

Two hosts are two host ids (``HERMES_KANBAN_HOST_ID``) with a home each on one board: a
file shared with ``--db`` and the real PostgreSQL server. The workers are real processes;
the reclaim and a tick are the real CLI. A machine of its own is simulated where a test
needs one by another boot id in the worker's recorded fingerprint."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from engine import identity
from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.tick_result import HoldReason
from engine.kanban.wording import held_back_words
from engine.kanban.workers import HOST_ID_VARIABLE
from tests.support import wait_until
from tests.support.commands import until
from tests.support.kanban import (
    FakeClock,
    cli_argv,
    dispatcher,
    kanban_settings,
    open_shared_board,
    shared_board_location,
)

LEASE = 120.0


@pytest.fixture
async def hosts(tmp_path, board_backend):
    """Two hosts on one board: (home of host-a, home of host-b, the board (opened from
    host-b, on a clock the test moves), its clock, the settings, host-a's and host-b's
    spawners, the workers' command, where the board is). Every worker is released by the
    gate and ended afterwards."""
    homes = [HomeLayout(tmp_path / name).ensure() for name in ("host-a", "host-b")]
    location = shared_board_location(tmp_path, board_backend)
    gate = tmp_path / "gate"
    command = f"{until(gate)} exit 0"
    for home in homes:
        home.config_file.write_text("kanban:\n  profiles:\n    w:\n"
                                    f"      command: {json.dumps(command)}\n")
    settings = kanban_settings({"w": command}, host_lease_seconds=LEASE)
    clock = FakeClock()
    board = await open_shared_board(location, homes[1], clock)
    spawners = [RegistrySpawner(home, settings) for home in homes]
    yield (*homes, board, clock, settings, *spawners, command, location)
    await board.close()
    gate.touch()
    for spawner in spawners:
        for s in spawner.registry.list(include_finished=False):
            spawner.registry.kill(s.id, grace=0.2)


def _cli(home: HomeLayout, location: str, host: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli_argv(home, "--db", location, *args), capture_output=True, text=True, timeout=120,
                          env={**os.environ, HOST_ID_VARIABLE: host})


def _live_workers(spawners, card: str) -> list[int]:
    return [s.pid for sp in spawners for s in sp.registry.list(include_finished=False)
            if s.owner == f"kanban:{card}"]


async def test_a_card_reclaimed_from_another_host_waits_for_that_host_to_stop_its_worker(
        hosts, monkeypatch):
    """The family: a card started again while its last run's worker lives on another host.
    Before: host-b's next tick started it beside the old worker (two live workers)."""
    home_a, home_b, board, clock, settings, spawner_a, spawner_b, command, location = hosts
    spawners = [spawner_a, spawner_b]
    card = (await tr.create_task(board, NewTask("long job", assignee="w"))).id
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
    assert [s.task_id for s in (await dispatcher(board, home_a, settings, spawner_a).tick()).spawned] == [card]
    old = await board.get_task(card)
    assert identity.is_alive(old.worker_pid, old.worker_started_at)

    # A person on host-b reclaims it: the card is ready, the worker is not signalled from here.
    reply = _cli(home_b, location, "host-b", "reclaim", card)
    assert reply.returncode == 0, reply.stderr
    assert reply.stdout.strip() == (
        f"Reclaimed {card}  (running -> ready); worker pid {old.worker_pid} not signalled: it runs on another "
        "host (host-a); that host stops it on its next tick; the card waits (awaiting_host_stop) until then, "
        "or until that host's lease lapses")
    assert (await board.get_task(card)).status == "ready"
    assert identity.is_alive(old.worker_pid, old.worker_started_at)

    # host-b's ticks (in process, and the real CLI) hold it, and say why.
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
    b = await dispatcher(board, home_b, settings, spawner_b).tick()
    assert not b.spawned  # (before: spawned beside the live worker)
    [skip] = [s for s in b.skipped if s.task_id == card]
    assert (skip.reason, skip.host, skip.pid) == (HoldReason.AWAITING_HOST_STOP, "host-a", old.worker_pid)
    assert held_back_words(b) == (f"held back: 1 card waiting for host host-a to stop its last worker "
                                  f"(pid {old.worker_pid}) (awaiting_host_stop)")
    tick = _cli(home_b, location, "host-b", "dispatch")
    assert tick.returncode == 0, tick.stderr
    assert "waiting for host host-a to stop its last worker" in tick.stdout
    assert _live_workers(spawners, card) == [old.worker_pid]

    # host-a's next tick stops it at once (not after the terminal grace) and records it.
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
    a = await dispatcher(board, home_a, kanban_settings({"w": command}, host_lease_seconds=LEASE,
                                                        dispatch_profiles=()), spawner_a).tick()
    assert a.reaped_terminal_workers == (card,) and not a.spawned
    assert not identity.is_alive(old.worker_pid, old.worker_started_at)
    [reaped] = [e for e in await board.events(card) if e.kind == "terminal_worker_reaped"]
    assert reaped.payload["pid"] == old.worker_pid

    # Confirmed: host-b starts it now, and it is the one live worker.
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
    b = await dispatcher(board, home_b, settings, spawner_b).tick()
    assert [s.task_id for s in b.spawned] == [card]
    new = await board.get_task(card)
    wait_until(lambda: _live_workers(spawners, card) == [new.worker_pid], what="one live worker: the new one")


@pytest.mark.parametrize("board_backend", ["postgres"], indirect=True)
async def test_a_card_reclaimed_from_a_host_that_never_returns_waits_until_its_lease_lapses(
        hosts, monkeypatch, board_backend):
    """Another machine (another boot id in its worker's fingerprint: nothing here can
    check that worker) that stops ticking: its lease lapses, and only then does the card
    move on. Before: started again at once."""
    home_a, home_b, board, clock, settings, spawner_a, spawner_b, _command, _location = hosts
    card = (await tr.create_task(board, NewTask("long job", assignee="w"))).id
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
    await dispatcher(board, home_a, settings, spawner_a).tick()
    pid = (await board.get_task(card)).worker_pid
    elsewhere = "0" * 8 + "-0000-4000-8000-" + "0" * 12 + "|1"  # another machine's boot
    await board.atomic(lambda conn: conn.execute("UPDATE tasks SET worker_started_at = ? WHERE id = ?",
                                                 (elsewhere, card)))
    await board.atomic(lambda conn: conn.execute("UPDATE task_runs SET worker_started_at = ? WHERE task_id = ?",
                                                 (elsewhere, card)))
    monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
    await tr.reclaim(board, card, reason="stuck")
    b = dispatcher(board, home_b, settings, spawner_b)
    for _ in range(4):  # host-b ticks on (the board is reachable) to host-a's lease's end: still live
        clock.advance(LEASE / 4)
        result = await b.tick()
        assert not result.spawned
    assert [s.reason for s in result.skipped if s.task_id == card] == [HoldReason.AWAITING_HOST_STOP]
    clock.advance(0.001)  # just past it: host-a is lost, so is its worker
    assert [s.task_id for s in (await b.tick()).spawned] == [card]
    assert pid != (await board.get_task(card)).worker_pid
