"""Kanban benchmark: card creation rate and one dispatch tick on a 10,000-card board.

    python tests/bench/bench_kanban.py

The board: 10,000 cards of which 100 are ready (the rest done, archived, blocked, in
review, or todo behind an open parent), done cards with a closed run each. The tick
uses a spawner that starts nothing (``NullSpawner``), default caps (max_in_progress 4),
so it claims 4 cards and gives the other 96 a reason. Each tick is timed on a fresh
copy of the same board file (opening the connection is not part of the tick).

Reference (hermes-agent 0.19.0 on this machine): about 2,400 cards/s and 77 ms for the
tick; the goal is 5x better on both (>= 12,000 cards/s, <= 15 ms).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from engine.config import KanbanSettings, ProfileSettings, Settings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.kanban import transitions as tr  # noqa: E402
from engine.kanban.dispatcher import Dispatcher  # noqa: E402
from engine.kanban.models import NewTask  # noqa: E402
from engine.kanban.store import Board  # noqa: E402
from engine.kanban.workers import NullSpawner  # noqa: E402

REFERENCE_CARDS_PER_S = 2400.0
REFERENCE_TICK_MS = 77.0
TOTAL = 10_000
READY = 100
TICK_REPEATS = 9

SETTINGS = Settings(kanban=KanbanSettings(profiles=MappingProxyType({
    "coder": ProfileSettings("coder", "true"), "writer": ProfileSettings("writer", "true")})))


async def build_board(path: Path) -> float:
    """Create the 10,000-card board; returns the bulk creation time (seconds)."""
    board = await Board.open(path)
    try:
        profiles = ("coder", "writer")
        start = time.perf_counter()
        cards = await tr.create_tasks(board, [
            NewTask(f"card {i}", body="benchmark card " * 4, assignee=profiles[i % 2], priority=i % 5)
            for i in range(TOTAL)])
        elapsed = time.perf_counter() - start
        ids = [c.id for c in cards]
        ready, rest = ids[:READY], ids[READY:]
        todo, done, archived, blocked, review = rest[:1500], rest[1500:5500], rest[5500:8500], \
            rest[8500:9500], rest[9500:]
        now = time.time()
        async with board.transaction() as conn:
            await conn.executemany("UPDATE tasks SET status = 'done', completed_at = ? WHERE id = ?",
                                   [(now, i) for i in done])
            await conn.executemany("UPDATE tasks SET status = 'archived' WHERE id = ?", [(i,) for i in archived])
            await conn.executemany("UPDATE tasks SET status = 'blocked', consecutive_failures = 2 WHERE id = ?",
                                   [(i,) for i in blocked])
            await conn.executemany("UPDATE tasks SET status = 'review' WHERE id = ?", [(i,) for i in review])
            await conn.executemany("UPDATE tasks SET status = 'todo' WHERE id = ?", [(i,) for i in todo])
            await conn.executemany("INSERT INTO task_links (parent_id, child_id) VALUES (?, ?)",
                                   [(ready[n % READY], i) for n, i in enumerate(todo)])
            await conn.executemany(
                "INSERT INTO task_runs (task_id, profile, status, claim_lock, started_at, ended_at, outcome) "
                "VALUES (?, 'coder', 'ended', 'bench:1', ?, ?, 'completed')", [(i, now - 60, now) for i in done])
        counts = await board.counts()
        assert counts["ready"] == READY and sum(counts.values()) == TOTAL, counts
        await board.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return elapsed
    finally:
        await board.close()


async def time_tick(template: Path, workdir: Path) -> tuple[float, int, int]:
    """One tick on a fresh copy of the board: (seconds, spawned, skipped)."""
    db = workdir / "kanban.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    shutil.copyfile(template, db)
    home = HomeLayout(workdir)
    board = await Board.open(db)
    try:
        dispatcher = Dispatcher(board, home=home, settings=SETTINGS, spawner=NullSpawner())
        start = time.perf_counter()
        result = await dispatcher.tick()
        elapsed = time.perf_counter() - start
        return elapsed, len(result.spawned), len(result.skipped)
    finally:
        await board.close()


async def per_card_rate(path: Path, n: int = 1000) -> float:
    """Cards/s creating one card per transaction (the API a person's click uses)."""
    board = await Board.open(path)
    try:
        start = time.perf_counter()
        for i in range(n):
            await tr.create_task(board, NewTask(f"single {i}", assignee="coder"))
        return n / (time.perf_counter() - start)
    finally:
        await board.close()


def cli_rate(home: Path, n: int = 15) -> float:
    """Cards/s through ``hermes-tui kanban create`` (a new Python process per card)."""
    start = time.perf_counter()
    for i in range(n):
        subprocess.run([sys.executable, "-m", "hermes_tui", "--home", str(home), "kanban", "create", f"cli {i}"],
                       check=True, capture_output=True)
    return n / (time.perf_counter() - start)


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kanban-") as tmp:
        tmp_path = Path(tmp)
        template = tmp_path / "template.db"
        bulk_s = await build_board(template)
        ticks = []
        for i in range(TICK_REPEATS):
            work = tmp_path / f"tick{i}"
            work.mkdir()
            ticks.append(await time_tick(template, work))
        spawned, skipped = ticks[0][1], ticks[0][2]
        tick_ms = statistics.median(t[0] for t in ticks) * 1000
        tick_min = min(t[0] for t in ticks) * 1000
        single = await per_card_rate(tmp_path / "single.db")
        cli_home = tmp_path / "cli-home"
        cli_home.mkdir()
        cli = cli_rate(cli_home)

    bulk_rate = TOTAL / bulk_s
    rows = [
        ("create 10,000 cards (bulk API, 1 txn)", f"{bulk_rate:,.0f} cards/s", f"{REFERENCE_CARDS_PER_S:,.0f} cards/s",
         f"{bulk_rate / REFERENCE_CARDS_PER_S:.1f}x"),
        ("create 1,000 cards (1 txn per card)", f"{single:,.0f} cards/s", "", f"{single / REFERENCE_CARDS_PER_S:.1f}x"),
        ("create via CLI (process per card)", f"{cli:,.1f} cards/s", "", ""),
        (f"tick, 10,000 cards / 100 ready (median of {TICK_REPEATS})", f"{tick_ms:.1f} ms (min {tick_min:.1f})",
         f"{REFERENCE_TICK_MS:.0f} ms", f"{REFERENCE_TICK_MS / tick_ms:.1f}x"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'hermes-tui':>22}  {'reference':>15}  {'vs ref':>6}")
    for name, ours, ref, ratio in rows:
        print(f"{name:<{width}}  {ours:>22}  {ref:>15}  {ratio:>6}")
    print(f"(tick: spawned {spawned} with a spawner that starts nothing, {skipped} held back with a reason)")


if __name__ == "__main__":
    asyncio.run(main())
