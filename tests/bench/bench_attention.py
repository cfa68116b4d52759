"""Attention benchmark: computing the attention items of a big home, against reading
the board alone (what the board pane does on every refresh), measured in the same run.

    python tests/bench/bench_attention.py [--runs N] [--cards N] [--sessions N] [--boards N] [--board-cards N]

The home: N cards (default 10,000: 8,500 done, 600 ready, 400 blocked by a worker or
by the breaker, 300 in review, 200 running with a live claim), every card with its
events, and M finished process sessions (default 1,000: one in ten exited non-zero).
Both sides open the board through the board service and read it in one event loop:

- reference: ``BoardService.view`` of every column but archived, the board pane's read
  (the finished columns' 100 newest cards, every other card in full, the counts);
- ours: the attention items of that home without a scratch survey (the board's three
  reads: blocked, review and running cards, their newest block or review event, the
  recent host_lost events; the session listing; the prune log's tail; doctor's cheap
  checks), then the items computed and the dismissed ones left out.

A second table (issue 36): a home of ``--boards`` boards (default 20) of ``--board-cards``
cards each (default 500, the same mix): the app's look at every board when none changed
(engine.attention.boards.BoardsReader: two stats a board, nothing read), and a look after
one board changed (that board read again), against one board's read.

Rounds alternate which side goes first; each row has medians with min-max and the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import Table, compare  # noqa: E402

from engine.attention.collect import collect  # noqa: E402
from engine.config import ProcessSettings, Settings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.kanban import transitions as tr  # noqa: E402
from engine.kanban.backends.sqlite.store import Board, add_events  # noqa: E402
from engine.kanban.models import NewTask  # noqa: E402
from engine.kanban.service import BoardService  # noqa: E402
from engine.kanban.statuses import ARCHIVED, STATUSES  # noqa: E402


async def build_board(home: HomeLayout, cards: int, path: Path | None = None) -> None:
    board = await Board.open(path or home.kanban_db, create=True)
    try:
        made = await tr.create_tasks(board, [NewTask(f"card {i}: a title of a usual length") for i in range(cards)])
        ids = [t.id for t in made]
        n = len(ids)
        plan = {"done": ids[: int(n * 0.85)], "ready": ids[int(n * 0.85): int(n * 0.91)],
                "blocked": ids[int(n * 0.91): int(n * 0.95)], "review": ids[int(n * 0.95): int(n * 0.98)],
                "running": ids[int(n * 0.98):]}
        now = time.time()

        async def shape(conn) -> None:
            for status, chunk in plan.items():
                await conn.executemany("UPDATE tasks SET status = ? WHERE id = ?", [(status, i) for i in chunk])
            await conn.executemany("UPDATE tasks SET claim_expires = ?, claim_lock = 'bench:1' WHERE id = ?",
                                   [(now + 900, i) for i in plan["running"]])
            await conn.executemany(
                "UPDATE tasks SET last_failure_error = 'pid 42 exited with code 1 (token=abc123secret)', "
                "consecutive_failures = 2 WHERE id = ?", [(i,) for i in plan["blocked"][::2]])
            events = [(i, None, "completed", {"summary": "ok"}) for i in plan["done"]]
            events += [(i, None, "gave_up" if k % 2 == 0 else "blocked",
                        {"failures": 2, "effective_limit": 2} if k % 2 == 0 else {"reason": "needs a person",
                                                                                  "by": "worker"})
                       for k, i in enumerate(plan["blocked"])]
            events += [(i, None, "review_requested", {"summary": "please look"}) for i in plan["review"]]
            events += [(i, None, "claimed", {"claim_lock": "bench:1"}) for i in plan["running"]]
            await add_events(conn, events, now)

        await board.atomic(shape)
    finally:
        await board.close()


def build_sessions(home: HomeLayout, count: int) -> None:
    started = time.time() - 3600
    for i in range(count):
        d = home.processes_dir / f"proc_{i:012x}"
        d.mkdir(parents=True)
        meta = {"id": d.name, "command": f"make target-{i % 50}", "argv": None, "cwd": f"/work/{i % 7}",
                "pid": 100000 + i, "fingerprint": "00000000-0000-0000-0000-000000000000|1",
                "started_at": started + i, "owner": "cli", "notify": False, "watch": [], "background": True}
        (d / "meta.json").write_text(json.dumps(meta))
        (d / "output.log").write_text("done\n")
        (d / "exit").write_text(f"{1 if i % 10 == 0 else 0}\n")
        os.utime(d / "exit", (started + i + 5, started + i + 5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cards", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=1_000)
    ap.add_argument("--boards", type=int, default=20)
    ap.add_argument("--board-cards", type=int, default=500)
    args = ap.parse_args()
    os.environ["HERMES_AUTO_PRUNE"] = "0"
    root = Path(tempfile.mkdtemp(prefix="hermes-tui-bench-attention-"))
    home = HomeLayout(root / "home").ensure()
    home.ensure_dir(home.own_dir)
    settings = replace(Settings(), processes=replace(ProcessSettings(), max_finished=args.sessions * 2,
                                                     keep_finished_hours=1e6))
    print(f"building {args.cards} cards and {args.sessions} sessions in {home.root} ...", flush=True)
    asyncio.run(build_board(home, args.cards))
    build_sessions(home, args.sessions)
    found = collect(home, settings, scratch_survey=False)
    counts: dict[str, int] = {}
    for item in found.items:
        counts[item.kind.value] = counts.get(item.kind.value, 0) + 1
    print(f"items: {len(found.items)} {counts}", flush=True)

    reference = pane_read(home, settings)

    def ours() -> float:
        start = time.perf_counter()
        collect(home, settings, scratch_survey=False)
        return time.perf_counter() - start

    table = Table(f"Attention items of a home with {args.cards:,} cards and {args.sessions:,} sessions",
                  reference_name="board read")
    table.add(compare("attention items (board + sessions + log + doctor)", ours, reference, args.runs,
                      note="ours: collect() without a scratch survey; reference: BoardService.view, the pane's read"))

    async def board_only() -> None:
        from engine.attention.board import board_items
        from engine.attention.board import read_board as facts

        async with await BoardService.open(home, settings, create=False) as service:
            board_items(await facts(service, time.time()), time.time())

    def ours_board() -> float:
        start = time.perf_counter()
        asyncio.run(board_only())
        return time.perf_counter() - start

    table.add(compare("attention's board part alone", ours_board, reference, args.runs,
                      note="the three reads of engine.attention.board and the items"))
    table.print()
    many_boards(root, args)
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return 0


def pane_read(home: HomeLayout, settings: Settings):
    """The reference: the board pane's read of the home's default board, timed."""
    shown = [s for s in STATUSES if s != ARCHIVED]

    async def read_board() -> None:
        async with await BoardService.open(home, settings, create=False) as service:
            await service.view(shown, 100)

    def reference() -> float:
        start = time.perf_counter()
        asyncio.run(read_board())
        return time.perf_counter() - start

    return reference


def many_boards(root: Path, args) -> None:
    """Issue 36: attention over every board of a home costs a stat per board file a look,
    and one board's read per board that changed."""
    from engine.attention.boards import BoardsReader
    from engine.kanban.boards import create_own_board

    home = HomeLayout(root / "boards-home").ensure()
    home.ensure_dir(home.own_dir)
    settings = Settings()
    print(f"building {args.boards} boards of {args.board_cards} cards in {home.root} ...", flush=True)
    asyncio.run(build_board(home, args.board_cards))
    for n in range(1, args.boards):
        asyncio.run(build_board(home, args.board_cards, create_own_board(home, f"board-{n:02d}")))
    reader = BoardsReader(home, settings, max_age=1e9)
    boards, problems = asyncio.run(reader.read(time.time()))
    assert len(boards) == args.boards and not problems, problems
    reference = pane_read(home, settings)

    def quiet() -> float:
        start = time.perf_counter()
        reader.markers()  # the app's look each ui.refresh_seconds: nothing moved, nothing read
        return time.perf_counter() - start

    def quiet_read() -> float:
        start = time.perf_counter()
        asyncio.run(reader.read(time.time()))  # a computation (watch's look) with no board changed
        return time.perf_counter() - start

    changed_path = home.kanban_db
    before = reader.reads

    def one_changed() -> float:
        os.utime(changed_path)  # the board's marker moves, as a commit moves it
        start = time.perf_counter()
        asyncio.run(reader.read(time.time()))
        return time.perf_counter() - start

    table = Table(f"Attention over {args.boards} boards of {args.board_cards:,} cards", reference_name="one board read")
    table.add(compare(f"the app's look at {args.boards} boards", quiet, reference, args.runs,
                      note="BoardsReader.markers(): two stats a board, what the app pays every refresh"))
    table.add(compare(f"a read of {args.boards} boards, none changed", quiet_read, reference, args.runs,
                      note="BoardsReader.read(): every board's facts kept (an event loop, the markers)"))
    table.add(compare(f"a look at {args.boards} boards, one changed", one_changed, reference, args.runs,
                      note="the changed board's three reads, the others kept"))
    table.print()
    print(f"boards read again over {args.runs} looks with one changed: {reader.reads - before}")


if __name__ == "__main__":
    sys.exit(main())
