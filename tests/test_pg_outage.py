"""Issue 34 case 7: a server outage longer than ``host_lease_seconds`` killed the work of
every host but the first one back (it found every other lease lapsed). A lease is now
judged against the time the board was reachable: when no host reached the board for
more than half a lease, the leases that were live when that began get one full lease
from the first renewal after it, so an outage is nobody's fault; a host that stays away
after it still loses its cards.

The outage is real: both hosts reach the real server through a TCP relay that the test
stops (the shared server itself is never stopped), and their ticks fail while it is
down. Its length is faked only at the boards' clock (FakeClock)."""

from __future__ import annotations

import contextlib

import pytest
from test_pg_app import Relay

from engine import identity
from engine.kanban import transitions as tr
from engine.kanban.backends.postgres.errors import BoardUnreachable
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.workers import HOST_ID_VARIABLE
from tests.support.kanban import FakeClock, dispatcher, kanban_settings, kill_all_workers, open_board

LEASE = 60.0


async def test_an_outage_longer_than_the_lease_costs_no_host_its_work_but_a_host_that_stays_away_loses_it(
        home, pg_url, monkeypatch):
    relay = Relay()
    await relay.start()
    url = relay.url_for(pg_url)
    clock = FakeClock()
    settings = kanban_settings({"w": "exec sleep 300"}, host_lease_seconds=LEASE, claim_ttl_seconds=30.0)
    board_a = await open_board(home, clock, url)
    board_b = await open_board(home, clock, url)
    spawner_a, spawner_b = RegistrySpawner(home, settings), RegistrySpawner(home, settings)
    host_a = dispatcher(board_a, home, settings, spawner_a)
    host_b = dispatcher(board_b, home, settings, spawner_b)

    async def tick(host: str, disp):
        monkeypatch.setenv(HOST_ID_VARIABLE, host)
        return await disp.tick()

    try:
        a_card = await tr.create_task(board_a, NewTask("a's", assignee="w"))
        assert [s.task_id for s in (await tick("host-a", host_a)).spawned] == [a_card.id]
        b_card = await tr.create_task(board_b, NewTask("b's", assignee="w"))
        assert [s.task_id for s in (await tick("host-b", host_b)).spawned] == [b_card.id]
        before = {c.id: await board_a.get_task(c.id) for c in (a_card, b_card)}

        await relay.stop()  # the server is away for both
        for host, disp in (("host-a", host_a), ("host-b", host_b)):
            with pytest.raises(BoardUnreachable):
                await tick(host, disp)
        clock.advance(LEASE + 30)  # longer than a lease
        await relay.start()

        first_back = await tick("host-b", host_b)
        assert not first_back.reclaimed and not first_back.spawned  # host-a's work is not host-b's fault to take
        assert not (await tick("host-a", host_a)).reclaimed  # host-a back, its lease renewed
        for card in before.values():
            now = await board_a.get_task(card.id)
            assert (now.status, now.current_run_id) == ("running", card.current_run_id)
            assert identity.is_alive(card.worker_pid, card.worker_started_at)
            assert "host_lost" not in {e.kind for e in await board_a.events(card.id)}

        # Another outage; this time host-a does not come back: once host-b has ticked a
        # full lease since, host-a's card is host_lost (and nothing is signalled).
        await relay.stop()
        clock.advance(LEASE + 30)
        await relay.start()
        reclaimed = []
        for step in range(6):  # host-b back at once, then every quarter lease
            result = await tick("host-b", host_b)
            reclaimed += result.reclaimed
            if step < 5:
                assert not result.reclaimed  # a full lease since the board was reachable again: not yet
            clock.advance(LEASE / 4)
        assert a_card.id in reclaimed and b_card.id not in reclaimed
        assert [e.kind for e in await board_a.events(a_card.id)].count("host_lost") == 1
        assert identity.is_alive(before[a_card.id].worker_pid, before[a_card.id].worker_started_at)
    finally:
        kill_all_workers(spawner_a)
        kill_all_workers(spawner_b)
        await board_a.close()
        await board_b.close()
        with contextlib.suppress(Exception):
            await relay.stop()
