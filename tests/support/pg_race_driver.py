"""One host of the race test (tests/test_pg_hosts.py), as its own process:
``python tests/support/pg_race_driver.py URL HOST_ID TICKS OUT.json``.

Cards of profile ``g`` (capped at PROFILE_CAP over all hosts) and of ``w`` (only the
host cap of 4). It ticks the shared board TICKS times with a spawner that starts nothing but records
each launch, and after each tick finishes, as the worker would (presenting its run id),
the cards it launched on the tick before. It writes what it launched and the most
cards it ever saw running under its own host id."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: engine, tests.support

PROFILE_CAP = 3  # profile "g" runs at most this many cards over all hosts


async def main(url: str, host: str, ticks: int, out: str) -> None:
    os.environ["HERMES_KANBAN_HOST_ID"] = host
    from engine.home import HomeLayout
    from engine.kanban import transitions as tr
    from engine.kanban.backends.postgres.board import PgBoard
    from engine.kanban.backends.postgres.url import DatabaseUrl
    from engine.kanban.dispatcher import Dispatcher
    from engine.kanban.workers import NullSpawner
    from tests.support.kanban import kanban_settings

    home = HomeLayout(Path(out).parent / f"home-{host}").ensure()
    settings = kanban_settings({"w": "true", "g": {"command": "true", "max_in_progress": PROFILE_CAP}},
                               max_in_progress=4, crash_grace_seconds=1e9)
    board = await PgBoard.open(DatabaseUrl.parse(url))
    spawner = NullSpawner()
    launched: list[tuple[str, int]] = []
    most_running = 0
    most_capped = 0  # the capped profile's running cards on all hosts
    refused = 0
    previous: list[tuple[str, int]] = []
    try:
        for _ in range(ticks):
            before = len(spawner.launched)
            await Dispatcher(board, home=home, settings=settings, spawner=spawner).tick()
            mine = await board.fetch("SELECT count(*) FROM tasks WHERE status = 'running' "
                                     "AND substr(claim_lock, 1, ?) = ?", (len(host) + 1, host + ":"))
            most_running = max(most_running, int(mine[0][0]))
            capped = await board.fetch("SELECT count(*) FROM tasks WHERE status = 'running' AND assignee = 'g'")
            most_capped = max(most_capped, int(capped[0][0]))
            for task_id, run_id in previous:
                try:
                    await tr.complete(board, task_id, "raced", call=tr.WorkerCall(task_id, run_id))
                except tr.TransitionRefused:
                    refused += 1
            previous = [(w.task_id, w.run_id) for w in spawner.launched[before:]]
            launched.extend(previous)
        for task_id, run_id in previous:
            await tr.complete(board, task_id, "raced", call=tr.WorkerCall(task_id, run_id))
    finally:
        await board.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"launched": launched, "most_running": most_running, "most_capped": most_capped,
                   "refused": refused}, f)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
