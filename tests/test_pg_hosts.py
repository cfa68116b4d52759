"""Several hosts on one PostgreSQL board (against the real server, a fresh database
per test): racing dispatchers, fencing by run id, host leases and their expiry.

A "host" is a home with its own host id (``HERMES_KANBAN_HOST_ID``); the race runs
each host as its own process. Time is faked only at the board's clock, and only
advanced to the lease boundary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from engine import identity
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.workers import HOST_ID_VARIABLE, NullSpawner
from tests.support.kanban import FakeClock, dispatcher, kanban_settings, kill_all_workers, open_board

DRIVER = Path(__file__).parent / "support" / "pg_race_driver.py"
PROFILE_CAP = 3  # as in pg_race_driver.py
CARDS = 240
TICKS = 500


@pytest.mark.slow
@pytest.mark.parametrize("hosts", [2, 4])
async def test_hosts_racing_500_ticks_spawn_every_card_once_within_their_caps(home, pg_url, tmp_path, hosts):
    board = await open_board(home, url=pg_url)
    try:
        made = await tr.create_tasks(board, [NewTask(f"card {i}", assignee="wg"[i % 2]) for i in range(CARDS)])
    finally:
        await board.close()
    outs = [tmp_path / f"host-{n}.json" for n in range(hosts)]
    procs = [subprocess.Popen([sys.executable, str(DRIVER), pg_url, f"host-{n}", str(TICKS), str(out)])
             for n, out in enumerate(outs)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    reports = [json.loads(out.read_text()) for out in outs]
    launched = [tuple(x) for r in reports for x in r["launched"]]
    task_ids = [task_id for task_id, _run in launched]
    assert len(task_ids) == len(set(task_ids)) == CARDS  # none twice, none lost
    assert set(task_ids) == {t.id for t in made}
    assert all(r["most_running"] <= 4 for r in reports)  # kanban.max_in_progress per host
    assert max(r["most_capped"] for r in reports) <= PROFILE_CAP  # the profile's cap over all hosts
    assert max(r["most_capped"] for r in reports) >= 2  # the cap was really contended
    assert all(r["refused"] == 0 for r in reports)
    assert sum(1 for r in reports if r["launched"]) >= 2  # the hosts really shared the work
    board = await open_board(home, url=pg_url)
    try:
        assert await board.counts() == {"done": CARDS}
        runs = await board.fetch("SELECT task_id, count(*) FROM task_runs GROUP BY task_id")
        assert {n for _t, n in runs} == {1}
    finally:
        await board.close()


@pytest.mark.slow  # heavy: real concurrent processes
async def test_an_expired_host_s_card_is_reclaimed_unsignalled_and_its_stale_worker_stopped_when_it_returns(
        home, pg_url, monkeypatch, tmp_path):
    lease = 60.0
    clock = FakeClock()
    settings = kanban_settings({"w": "exec sleep 300"}, host_lease_seconds=lease)
    board = await open_board(home, clock, pg_url)
    spawner_a = RegistrySpawner(home, settings)
    host_a = dispatcher(board, home, settings, spawner_a)
    host_b = dispatcher(board, home, settings, NullSpawner())
    try:
        card = await tr.create_task(board, NewTask("long job", assignee="w"))
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
        spawned = (await host_a.tick()).spawned
        assert [s.task_id for s in spawned] == [card.id]
        first = await board.get_task(card.id)
        pid, fp, old_run = first.worker_pid, first.worker_started_at, first.current_run_id
        assert identity.is_alive(pid, fp)

        monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
        for _ in range(4):  # host-b ticks on (the board is reachable) up to host-a's lease expiry: not lost yet
            clock.advance(lease / 4)
            assert not (await host_b.tick()).reclaimed
        assert (await board.get_task(card.id)).current_run_id == old_run

        clock.advance(0.001)  # just past it
        result = await host_b.tick()
        assert result.reclaimed == (card.id,)
        assert identity.is_alive(pid, fp)  # nothing was signalled
        events = [e for e in await board.events(card.id) if e.kind == "host_lost"]
        assert len(events) == 1 and events[0].payload["host"] == "host-a"
        assert events[0].payload["signalled"] is False
        runs = await board.runs_of(card.id)
        assert runs[0].outcome == "host_lost"
        now = await board.get_task(card.id)
        assert now.consecutive_failures == 1  # counted as a failure
        assert now.status == "running" and now.current_run_id != old_run  # host-b claimed it anew
        assert now.claim_lock.startswith("host-b:")

        # The stale worker's complete is refused (through the real CLI, as a worker calls it).
        stale = run_cli("kanban", "complete", card.id, "--summary", "late", env={
            "HERMES_KANBAN_DB": pg_url, "HERMES_KANBAN_TASK": card.id, "HERMES_KANBAN_RUN_ID": str(old_run),
            "HERMES_HOME": str(home.root)})
        assert stale.returncode == 1 and f"run {old_run} is not the current run" in stale.stderr
        fresh = run_cli("kanban", "complete", card.id, "--summary", "on time", env={
            "HERMES_KANBAN_DB": pg_url, "HERMES_KANBAN_TASK": card.id,
            "HERMES_KANBAN_RUN_ID": str(now.current_run_id), "HERMES_HOME": str(home.root)})
        assert fresh.returncode == 0, fresh.stderr
        assert (await board.get_task(card.id)).result == "on time"

        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")  # host-a comes back
        back = await host_a.tick()
        assert back.reaped_terminal_workers == (card.id,)
        assert not identity.is_alive(pid, fp)
        reaped = [e for e in await board.events(card.id) if e.kind == "terminal_worker_reaped"]
        assert reaped and reaped[0].payload["pid"] == pid
    finally:
        kill_all_workers(spawner_a)
        await board.close()


# -- issue 34 case 8: a lease read before a pause ----------------------------------------------------


@pytest.mark.parametrize("decision", ["host_lost", "stale_claim"])
async def test_a_host_that_renews_while_another_host_s_tick_is_paused_keeps_its_card(home, pg_url, monkeypatch,
                                                                                   decision):
    """The family: every decision to take another host's card on its lease (``host_lost``
    for a host whose lease ran out, the stale-claim reclaim of a host that held none) is
    checked again, on the lease, by the very statement that takes the card. host-b's tick
    reads host-a as lost (or leaseless), then pauses; meanwhile host-a renews its lease
    (on a connection of its own, as another machine does). host-b's requeue must then
    find the lease live and take nothing."""
    lease = 30.0
    clock = FakeClock()
    settings = kanban_settings({"w": "exec sleep 300"}, host_lease_seconds=lease, claim_ttl_seconds=10.0)
    board_a = await open_board(home, clock, pg_url)
    board_b = await open_board(home, clock, pg_url)
    spawner = RegistrySpawner(home, settings)
    try:
        card = await tr.create_task(board_a, NewTask("long job", assignee="w"))
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
        assert (await dispatcher(board_a, home, settings, spawner).tick()).spawned
        before = await board_a.get_task(card.id)
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
        host_b = dispatcher(board_b, home, settings, NullSpawner())
        for _ in range(3):
            clock.advance(lease / 3)
            assert not (await host_b.tick()).reclaimed  # host-b ticks on: the board is reachable
        clock.advance(1)  # host-a's lease (and claim) have run out: host-a is paused, not gone
        if decision == "stale_claim":  # host-a holds no lease row at all (a board from before leases)
            await board_a.fetch("DELETE FROM hosts WHERE host_id = 'host-a' RETURNING host_id")

        paused = {"done": False}

        async def host_a_renews_meanwhile() -> None:
            if not paused["done"]:
                paused["done"] = True
                await board_a.renew_lease("host-a", "boot-a", clock.now, lease)

        if decision == "host_lost":
            read_running = host_b._running

            async def running_then_pause(where: str = "", params: tuple = ()):
                rows = await read_running(where, params)
                if "claim_lock" in where:  # host_lost's read of host-a's cards
                    await host_a_renews_meanwhile()
                return rows

            monkeypatch.setattr(host_b, "_running", running_then_pause)
        else:
            read_live = board_b.live_hosts

            async def live_then_pause(now: float) -> list[str]:
                live = await read_live(now)
                assert "host-a" not in live
                await host_a_renews_meanwhile()
                return live

            monkeypatch.setattr(board_b, "live_hosts", live_then_pause)
        result = await host_b.tick()
        assert paused["done"]  # the pause did come between the read and the requeue
        assert not result.reclaimed
        now = await board_a.get_task(card.id)
        assert (now.status, now.current_run_id, now.claim_lock) == ("running", before.current_run_id,
                                                                    before.claim_lock)
        assert not {"host_lost", "reclaimed"} & {e.kind for e in await board_a.events(card.id)}
        assert identity.is_alive(before.worker_pid, before.worker_started_at)
    finally:
        kill_all_workers(spawner)
        await board_b.close()
        await board_a.close()
