"""A dispatcher that dies (SIGKILL, by its own hand) at one step of its launch batch, as
its own process: ``python tests/support/launch_driver.py HOME URL|PATH|- STEP GRACE COMMAND``
(``-``: the home's own board; a PATH: an SQLite board file, as ``--db PATH`` gives).

It ticks the board once with profile ``w`` running COMMAND (every ready card at once)
and kills itself at STEP:

- ``before_spawn``: the claim is committed, no worker's spawn has begun;
- ``unrecorded``: the first worker's wrapper waits at its gate, its session not recorded;
- ``ungated``: the first worker's session is recorded, its gate never opened;
- ``after_spawn``: every worker started, none recorded on the board.

It never gets to the end of the tick (exit 3 would say it did)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: engine, tests.support


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def main(root: str, url: str, step: str, grace: float, command: str) -> None:
    from engine.home import HomeLayout
    from engine.kanban.dispatcher import Dispatcher
    from engine.kanban.registry_spawner import RegistrySpawner
    from engine.processes import start
    from tests.support.kanban import kanban_settings, open_board

    home = HomeLayout(Path(root))
    settings = kanban_settings({"w": command}, max_in_progress=100, crash_grace_seconds=grace)
    if url == "-" or url.startswith("postgresql"):
        board = await open_board(home, url=None if url == "-" else url)
    else:  # an SQLite board file shared by several homes (--db PATH)
        from engine.kanban.backends.sqlite.store import Board

        board = await Board.open(Path(url))
    ready = await board.fetch("SELECT count(*) FROM tasks WHERE status = 'ready'")
    cards = int(ready[0][0])
    launched = []

    class Dying(RegistrySpawner):
        def launch(self, launch):
            if step == "before_spawn":
                die()
            worker = super().launch(launch)
            launched.append(worker)
            if step == "after_spawn" and len(launched) == cards:
                die()
            return worker

    if step == "unrecorded":
        start.write_meta_record = lambda *_a, **_k: die()
    elif step == "ungated":
        start.open_gate = lambda _popen: die()
    await Dispatcher(board, home=home, settings=settings, spawner=Dying(home, settings)).tick()
    sys.exit(3)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]))
