"""Board concurrency benchmark: 4 processes x 250 cards, with and without an app open.

    python tests/bench/bench_board_concurrency.py

Each writer process creates its 250 cards one at a time through the path ``hermes-tui
kanban create`` takes (open the BoardService, create, close: one connection and one
transaction per card), minus the interpreter start. Two rounds on fresh boards, side by
side:

- alone: only the 4 writers;
- with the app open: a holder process keeps one BoardService open the way the app does
  (its board view re-read every 50 ms, a dispatch tick every 200 ms with a spawner that
  starts nothing) for the whole round.

Printed per round: cards on the board, ``PRAGMA integrity_check``, wall time, cards/s,
the writers' mean and p95 per-card latency, the holder's reads and ticks, and whether
the holder ever held an unlinked -wal/-shm (must be "no").
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

WRITERS = 4
CARDS_EACH = 250

WRITER = """
import asyncio, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.models import NewTask
from engine.kanban.service import BoardService


async def main(root, name, count, go):
    home = HomeLayout(Path(root))
    settings = Settings()
    while not Path(go).exists():
        await asyncio.sleep(0.005)
    latencies = []
    for i in range(count):
        start = time.perf_counter()
        async with await BoardService.open(home, settings, create=False) as board:
            await board.create(NewTask(f"{name} card {i}"))
        latencies.append(time.perf_counter() - start)
    print(json.dumps(latencies))


asyncio.run(main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
"""

HOLDER = """
import asyncio, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.support.kanban import deleted_board_files as deleted
from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.service import BoardService
from engine.kanban.statuses import STATUSES
from engine.kanban.workers import NullSpawner


async def main(root, ready, stop):
    home = HomeLayout(Path(root))
    board = await BoardService.open(home, Settings(), create=False, spawner=NullSpawner())
    reads = ticks = 0
    seen = set()
    Path(ready).write_text("ready")
    while not Path(stop).exists():
        for _ in range(4):
            await board.view(STATUSES)
            reads += 1
            seen.update(deleted())
            await asyncio.sleep(0.05)
        await board.tick()
        ticks += 1
    await board.close()
    print(json.dumps({"reads": reads, "ticks": ticks, "deleted": sorted(seen)}))


asyncio.run(main(sys.argv[2], sys.argv[3], sys.argv[4]))
"""


def _new_home(tmp: Path):
    import asyncio

    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.kanban.service import BoardService

    home = HomeLayout(tmp / "home").ensure()

    async def create() -> None:
        await (await BoardService.open(home, Settings())).close()

    asyncio.run(create())
    return home


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():
        if proc.poll() is not None:
            raise SystemExit(f"the holder died: {proc.stderr.read()}")
        time.sleep(0.01)


def run_round(with_app: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-board-") as raw:
        tmp = Path(raw)
        home = _new_home(tmp)
        go, ready, stop = tmp / "go", tmp / "ready", tmp / "stop"
        holder = None
        if with_app:
            holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(REPO), str(home.root), str(ready),
                                       str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _wait_for(ready, holder)
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(REPO), str(home.root), f"w{n}",
                                     str(CARDS_EACH), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for n in range(WRITERS)]
        time.sleep(1.0)  # let every writer import and wait at the gate
        start = time.perf_counter()
        go.write_text("go")
        latencies: list[float] = []
        for proc in writers:
            out, err = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"a writer failed: {err.strip().splitlines()[-1:]}")
            latencies += json.loads(out)
        wall = time.perf_counter() - start
        held = {"reads": 0, "ticks": 0, "deleted": []}
        if holder is not None:
            stop.write_text("stop")
            out, err = holder.communicate()
            if holder.returncode != 0:
                raise SystemExit(f"the holder failed: {err.strip().splitlines()[-1:]}")
            held = json.loads(out)
        con = sqlite3.connect(home.kanban_db)
        try:
            count = con.execute("SELECT count(*) FROM tasks").fetchone()[0]
            check = con.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            con.close()
    latencies.sort()
    return {
        "cards": count, "integrity": check, "wall_s": wall, "cards_per_s": count / wall,
        "mean_ms": statistics.mean(latencies) * 1000, "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
        "reads": held["reads"], "ticks": held["ticks"], "deleted": "yes" if held["deleted"] else "no",
    }


def main() -> None:
    alone = run_round(with_app=False)
    shared = run_round(with_app=True)
    rows = [
        ("cards on the board", "cards", "{:d}"), ("integrity_check", "integrity", "{}"),
        ("wall time (s)", "wall_s", "{:.2f}"), ("cards/s", "cards_per_s", "{:.0f}"),
        ("per-card mean (ms)", "mean_ms", "{:.1f}"), ("per-card p95 (ms)", "p95_ms", "{:.1f}"),
        ("app reads of the board", "reads", "{:d}"), ("app dispatch ticks", "ticks", "{:d}"),
        ("app held a deleted -wal/-shm", "deleted", "{}"),
    ]
    print(f"{WRITERS} processes x {CARDS_EACH} cards, one connection and transaction per card "
          f"(the path of `hermes-tui kanban create`)")
    print(f"{'measure':<30}  {'alone':>10}  {'with app open':>14}")
    for label, key, fmt in rows:
        print(f"{label:<30}  {fmt.format(alone[key]):>10}  {fmt.format(shared[key]):>14}")
    expected = WRITERS * CARDS_EACH
    ok = all(r["cards"] == expected and r["integrity"] == "ok" and r["deleted"] == "no" for r in (alone, shared))
    print("OK" if ok else "FAILED: cards lost, a damaged board, or a deleted -wal/-shm")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    os.environ.pop("HERMES_KANBAN_DB", None)
    main()
