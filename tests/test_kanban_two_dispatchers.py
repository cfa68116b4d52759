"""Two dispatchers in two processes tick one board 500 times each: no card is ever
spawned twice. The claim path is the real one (lock + CAS); the spawner only records
each launch in a shared file (O_APPEND), so the test does not start 1,000 processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from tests.support.kanban import open_board

TICKER = textwrap.dedent("""
    import asyncio, dataclasses, os, random, sys
    from pathlib import Path
    from types import MappingProxyType
    from engine.config import KanbanSettings, ProfileSettings, Settings
    from engine.home import HomeLayout
    from engine.kanban.dispatcher import Dispatcher
    from engine.kanban.models import NewTask
    from engine.kanban.backends.sqlite.store import Board
    from engine.kanban.transitions import create_task
    from engine.kanban.workers import LaunchedWorker, NullSpawner

    home = HomeLayout(Path(sys.argv[1]))
    record = sys.argv[2]
    name = sys.argv[3]

    class Recording(NullSpawner):
        def launch(self, launch):
            fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, f"{launch.task_id} {launch.run_id} {name}\\n".encode())
            os.close(fd)
            return LaunchedWorker(pid=None, fingerprint="unverified")

    settings = dataclasses.replace(Settings(), kanban=KanbanSettings(
        max_in_progress=100000, crash_grace_seconds=1e9, claim_ttl_seconds=1e9,
        profiles=MappingProxyType({"w": ProfileSettings("w", "true")})))

    async def main():
        board = await Board.open(home.kanban_db)
        disp = Dispatcher(board, home=home, settings=settings, spawner=Recording())
        spawned = locked = 0
        for i in range(500):
            if i % 2 == 0:
                await create_task(board, NewTask(f"{name} {i}", assignee="w"))
            result = await disp.tick()
            spawned += len(result.spawned)
            locked += result.skipped_locked
            await asyncio.sleep(random.random() * 0.004)  # real dispatchers do not tick in lockstep
        await board.close()
        print(spawned, locked)

    asyncio.run(main())
""")


@pytest.mark.slow  # heavy: real concurrent processes
async def test_two_dispatcher_processes_never_spawn_a_card_twice(home, tmp_path):
    board = await open_board(home)
    await tr.create_tasks(board, [NewTask(f"seed {i}", assignee="w") for i in range(200)])
    await board.close()
    record = tmp_path / "launches.txt"
    procs = [subprocess.Popen([sys.executable, "-c", TICKER, str(home.root), str(record), name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("one", "two")]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        outputs.append(tuple(int(x) for x in out.split()))
    launches = [line.split() for line in record.read_text().splitlines()]
    task_ids = [t for t, _run, _who in launches]
    assert len(task_ids) == len(set(task_ids)), "a card was spawned twice"
    assert len(task_ids) == 200 + 2 * 250  # every card was spawned exactly once
    assert sum(spawned for spawned, _locked in outputs) == len(task_ids)
    assert {who for _t, _r, who in launches} == {"one", "two"}  # both really dispatched
    board = await open_board(home)
    try:
        assert (await board.counts()) == {"running": 700}
        runs = await board.fetch("SELECT task_id, count(*) FROM task_runs GROUP BY task_id HAVING count(*) > 1")
        assert runs == []
    finally:
        await board.close()


async def test_without_the_lock_the_compare_and_set_still_claims_each_card_once(home, monkeypatch):
    """Even a dispatcher that ignored the tick lock could not double-claim: the claim
    UPDATE only wins on a card that is still ready and unclaimed."""
    import asyncio
    import contextlib

    from engine.kanban.backends.sqlite import store as store_mod
    from engine.kanban.workers import NullSpawner
    from tests.support.kanban import FakeClock, dispatcher, kanban_settings

    @contextlib.contextmanager
    def no_lock(_db):
        yield True

    monkeypatch.setattr(store_mod, "dispatch_lock", no_lock)  # the store takes it (engine/kanban/dispatch_lock.py)
    settings = kanban_settings({"w": "true"}, max_in_progress=1000)
    clock = FakeClock()
    boards = [await open_board(home, clock) for _ in range(3)]
    spawners = [NullSpawner() for _ in boards]
    try:
        await tr.create_tasks(boards[0], [NewTask(f"c{i}", assignee="w") for i in range(60)])
        for _ in range(3):
            await asyncio.gather(*(dispatcher(b, home, settings, s).tick() for b, s in zip(boards, spawners,
                                                                                          strict=True)))
        launched = [launch.task_id for s in spawners for launch in s.launched]
        assert len(launched) == 60 and len(set(launched)) == 60
    finally:
        for b in boards:
            await b.close()
