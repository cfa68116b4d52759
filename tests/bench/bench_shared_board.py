"""Shared-board benchmark: the PostgreSQL board against the SQLite board (and the
reference, hermes-agent 0.19.0, when its virtual environment can be had), in one run.

    python tests/bench/bench_shared_board.py [--runs N] [--cards N] [--no-reference]
                                             [--only tick|reference|claims]... [--latency-ms MS] [--warm]

Rows:
- a tick on the same 10,000-card board (100 ready; bench_kanban's shape), claim limit
  100, then 4, a spawner that starts nothing: PostgreSQL vs SQLite, then (claim 100)
  PostgreSQL vs the reference. Each tick runs on a fresh copy of its side's board (a
  file copy; a ``CREATE DATABASE ... TEMPLATE``), opening it is not timed (so each
  PostgreSQL tick runs on a new connection: every statement is prepared on it for the
  first time); rounds alternate sides. The note gives the statements and round trips
  of one PostgreSQL tick (an extra, untimed tick, counted by the forwarder below);
- 4 hosts x 2 dispatchers (8 processes, host ids host-0..3) claiming N cards on one
  PostgreSQL board, each finishing its claims at once as their worker would: claims per
  second, cards claimed twice (must be 0), and the claim latency (the duration of the
  tick that claimed a card) at p50/p95.

``--warm``: each side keeps one board open over all its rounds, as the app's dispatcher
does (on PostgreSQL every statement is then prepared already and the trigger function
compiled); between rounds the board's rows are put back to the template's (untimed:
TRUNCATE and INSERT from a kept copy, then ANALYZE; on SQLite DELETE and INSERT from an
attached copy). Without it each tick opens its board anew, as ``kanban dispatch`` does.
The tick rows' note also gives the median of the rounds' own ratios (each round's two
sides ran back to back), steadier than the ratio of the medians when disk flushes swing.

``--latency-ms MS``: the PostgreSQL side as a remote server: every connection of the run
(the board's, the claimers', the set-up's) goes through tests/bench/latency_forwarder.py,
which adds MS milliseconds to each round trip (half each way; ``--latency-ms 0`` is the
forwarder alone, to see what it costs). Nothing of the machine's network is changed; the
forwarder is a child of the bench and ends with it. The SQLite side is the same in both.
Without it, the server is reached over loopback (a round trip of about 0.1-0.2 ms here).

The server is the one on 127.0.0.1:5432 ($HERMES_BENCH_PG_ADMIN_URL); every database
made here is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_kanban import (  # noqa: E402
    BENCH_ROOT,
    REF_VENV,
    REFERENCE_VERSION,
    SHAPE,
    Reference,
    ensure_reference_venv,
    fresh_copy,
    ours_build,
    ours_tick,
    settings_with_limit,
    timed_tick,
)
from harness import Table, compare, loadavg, row_from, user_env  # noqa: E402

from engine.home import HomeLayout  # noqa: E402
from engine.kanban import transitions as tr  # noqa: E402
from engine.kanban.backends.postgres.board import PgBoard  # noqa: E402
from engine.kanban.backends.postgres.url import DatabaseUrl  # noqa: E402
from engine.kanban.backends.sqlite.store import Board  # noqa: E402
from engine.kanban.dispatcher import Dispatcher  # noqa: E402
from engine.kanban.models import NewTask  # noqa: E402
from engine.kanban.workers import NullSpawner  # noqa: E402

ADMIN_URL = os.environ.get("HERMES_BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
TABLES = ("tasks", "task_runs", "task_events", "task_links")
FORWARDER = Path(__file__).resolve().parent / "latency_forwarder.py"
PARTS = ("tick", "reference", "claims")


# -- a server farther away -------------------------------------------------------------------------


class Forwarder:
    """tests/bench/latency_forwarder.py as a child: ``url(u)`` is ``u`` through it (the
    same server, ``rtt_ms`` farther away); ``turns()`` the round trips it has carried."""

    def __init__(self, target_url: str, rtt_ms: float) -> None:
        parts = urlsplit(target_url)
        if not parts.hostname:
            raise SystemExit(f"cannot forward to {target_url!r}: it names no host")
        target = f"{parts.hostname}:{parts.port or 5432}"
        self.proc = subprocess.Popen([sys.executable, str(FORWARDER), "--target", target, "--rtt-ms", str(rtt_ms)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self.close()
            raise SystemExit(f"the latency forwarder did not start (it said {' '.join(line)!r})")
        self.port = int(line[1])

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        user = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=(user + "@" if user else "") + f"127.0.0.1:{self.port}"))

    def turns(self) -> int:
        self.proc.stdin.write("turns\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline().split()[1])

    def close(self) -> None:
        """End the child (its stdin closes; killed by its pid if it does not go)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class StatementCount:
    """The statements asyncpg sends while it is open (BEGIN and COMMIT included)."""

    METHODS = ("execute", "executemany", "fetch", "fetchrow", "fetchval")

    def __enter__(self) -> StatementCount:
        import asyncpg

        self.count = 0
        self._saved = {name: getattr(asyncpg.Connection, name) for name in self.METHODS}

        def counting(original):
            async def method(conn, *args, **kwargs):
                self.count += 1
                return await original(conn, *args, **kwargs)
            return method

        for name, original in self._saved.items():
            setattr(asyncpg.Connection, name, counting(original))
        return self

    def __exit__(self, *exc: object) -> None:
        import asyncpg

        for name, original in self._saved.items():
            setattr(asyncpg.Connection, name, original)


# -- databases ----------------------------------------------------------------------------------


def url_of(dbname: str) -> str:
    return ADMIN_URL.rpartition("/")[0] + "/" + dbname


async def admin(statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def pg_template_from(sqlite_board: Path, dbname: str) -> dict[str, int]:
    """A PostgreSQL board holding the same rows as the SQLite template (setup, not timed)."""
    await admin(f'CREATE DATABASE "{dbname}"')
    board = await PgBoard.open(DatabaseUrl.parse(url_of(dbname)))
    try:
        source = sqlite3.connect(sqlite_board)
        try:
            for table in TABLES:
                cursor = source.execute(f"SELECT * FROM {table}")
                columns = [d[0] for d in cursor.description]
                await board.conn.raw.copy_records_to_table(table, records=cursor.fetchall(), columns=columns)
        finally:
            source.close()
        for table in ("task_runs", "task_events"):
            await board.conn.raw.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 1)) FROM {table}")
        await board.conn.raw.execute("VACUUM ANALYZE")
        return {k: v for k, v in (await board.counts()).items() if v}
    finally:
        await board.close()


async def pg_tick(template: str, home: HomeLayout, limit: int) -> tuple[float, int]:
    """One tick on a fresh copy of the template database: (seconds, claimed)."""
    name = "hk_bench_" + secrets.token_hex(6)
    await admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        board = await PgBoard.open(DatabaseUrl.parse(url_of(name)))
        try:
            return await timed_tick(board, home, limit)
        finally:
            await board.close()
    finally:
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def pg_tick_counted(template: str, home: HomeLayout, limit: int, warm: bool) -> tuple[int, int]:
    """One untimed tick on a fresh copy (``warm``: the second on a board kept open),
    through a forwarder of its own that adds nothing: (statements, round trips) of the
    tick, opening the board and putting its rows back not counted."""
    counter = Forwarder(ADMIN_URL, 0.0)
    kept = await WarmPg.open(template, counter.url)
    try:
        if warm:
            await warm_tick(kept, home, limit)
        await kept.reset()
        before = counter.turns()
        with StatementCount() as statements:
            _seconds, claimed = await timed_tick(kept.board, home, limit)
        assert claimed == limit, claimed
        return statements.count, counter.turns() - before
    finally:
        await kept.close()
        counter.close()


# -- boards kept open over the rounds (--warm) ------------------------------------------------------

PG_KEPT = ("tasks", "task_runs", "task_events", "task_links", "hosts", "run_usage")
SQLITE_KEPT = ("tasks", "task_runs", "task_events", "task_links", "run_usage", "sqlite_sequence")


class WarmPg:
    """One copy of the template database with one board open on it; :meth:`reset` puts
    its rows back to the template's (another connection, untimed)."""

    @classmethod
    async def open(cls, template: str, route=lambda url: url) -> WarmPg:
        import asyncpg

        self = cls()
        self.name = "hk_bench_warm_" + secrets.token_hex(4)
        await admin(f'CREATE DATABASE "{self.name}" TEMPLATE "{template}"')
        self.keeper = await asyncpg.connect(url_of(self.name))
        await self.keeper.execute("CREATE SCHEMA hk_kept; " + " ".join(
            f"CREATE TABLE hk_kept.{t} AS SELECT * FROM {t};" for t in PG_KEPT))
        self.board = await PgBoard.open(DatabaseUrl.parse(route(url_of(self.name))))
        return self

    async def reset(self) -> None:
        await self.keeper.execute(
            f"TRUNCATE {', '.join(PG_KEPT)}; "
            + " ".join(f"INSERT INTO {t} SELECT * FROM hk_kept.{t};" for t in PG_KEPT)
            + " ".join(f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), coalesce(max(id), 1)) FROM {t};"
                       for t in ("task_runs", "task_events"))
            + " ANALYZE")

    async def close(self) -> None:
        await self.board.close()
        await self.keeper.close()
        await admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class WarmSqlite:
    """A copy of the template board file with one board open on it; :meth:`reset` puts
    its rows back to the template's (from a second copy, attached; untimed)."""

    @classmethod
    async def open(cls, template: Path, work: Path) -> WarmSqlite:
        self = cls()
        kept = fresh_copy(template, work / "kept.db")
        self.board = await Board.open(fresh_copy(template, work / "kanban.db"))
        await self.board.fetch("ATTACH DATABASE ? AS hk_kept", (str(kept),))
        return self

    async def reset(self) -> None:
        async def put_back(conn) -> None:
            for t in SQLITE_KEPT:
                await conn.execute(f"DELETE FROM main.{t}")
                await conn.execute(f"INSERT INTO main.{t} SELECT * FROM hk_kept.{t}")

        await self.board.atomic(put_back)

    async def close(self) -> None:
        await self.board.close()


async def warm_tick(warm, home: HomeLayout, limit: int) -> tuple[float, int]:
    await warm.reset()
    return await timed_tick(warm.board, home, limit)


# -- one claiming dispatcher (a child process) ----------------------------------------------------


async def claimer(url: str, host: str, out: Path, cap: int) -> None:
    """Tick until no card is ready or running; finish each claim at once (as its worker)."""
    os.environ["HERMES_KANBAN_HOST_ID"] = host
    home = HomeLayout(out.parent / f"home-{out.stem}").ensure()
    board = await PgBoard.open(DatabaseUrl.parse(url))
    spawner = NullSpawner()
    latencies: list[float] = []
    claimed: list[str] = []
    started = time.perf_counter()
    try:
        while True:
            before = len(spawner.launched)
            t0 = time.perf_counter()
            await Dispatcher(board, home=home, settings=settings_with_limit(cap), spawner=spawner).tick()
            took = time.perf_counter() - t0
            new = spawner.launched[before:]
            latencies.extend([took] * len(new))
            claimed.extend(w.task_id for w in new)
            for w in new:
                await tr.complete(board, w.task_id, "bench", call=tr.WorkerCall(w.task_id, w.run_id))
            if not new:
                counts = await board.counts()
                if not counts.get("ready") and not counts.get("running"):
                    break
                await asyncio.sleep(0.005)
    finally:
        await board.close()
    out.write_text(json.dumps({"claimed": claimed, "latencies": latencies, "started": started,
                               "ended": time.perf_counter()}))


def claims_row(cards: int, hosts: int, per_host: int, cap: int, work: Path) -> tuple[object, str]:
    name = "hk_bench_claims_" + secrets.token_hex(4)
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        async def seed() -> None:
            board = await PgBoard.open(DatabaseUrl.parse(url_of(name)))
            try:
                await tr.create_tasks(board, [NewTask(f"claim {i}", assignee="coder") for i in range(cards)])
            finally:
                await board.close()

        asyncio.run(seed())
        outs = [work / f"claimer-{h}-{d}.json" for h in range(hosts) for d in range(per_host)]
        load = loadavg()
        procs = [subprocess.Popen([sys.executable, __file__, "--claimer", url_of(name), f"host-{h}", str(out),
                                   str(cap)], env=user_env())
                 for (h, d), out in zip([(h, d) for h in range(hosts) for d in range(per_host)], outs, strict=True)]
        for proc in procs:
            if proc.wait(timeout=1800) != 0:
                raise RuntimeError(f"a claimer failed: {proc.args}")
        reports = [json.loads(o.read_text()) for o in outs]
        claimed = [c for r in reports for c in r["claimed"]]
        latencies = sorted(x for r in reports for x in r["latencies"])
        wall = max(r["ended"] for r in reports) - min(r["started"] for r in reports)

        async def runs_per_card() -> int:
            board = await PgBoard.open(DatabaseUrl.parse(url_of(name)))
            try:
                rows = await board.fetch("SELECT count(*) FROM (SELECT task_id FROM task_runs GROUP BY task_id "
                                         "HAVING count(*) > 1) twice")
                return int(rows[0][0])
            finally:
                await board.close()

        twice = asyncio.run(runs_per_card())
        p95 = latencies[int(0.95 * (len(latencies) - 1))]
        summary = (f"{hosts} hosts x {per_host} dispatchers, {cards} cards, cap {cap}/host: "
                   f"{len(claimed)} claims in {wall:.2f} s = {len(claimed) / wall:.0f} claims/s; "
                   f"claimed twice: {twice} (ids seen twice: {len(claimed) - len(set(claimed))}); "
                   f"claim latency p50 {statistics.median(latencies) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
        row = row_from(f"claim latency, {hosts} hosts x {per_host} dispatchers (tick that claimed)", latencies,
                       None, load, unit="ms", note=summary)
        return row, summary
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# -- the run --------------------------------------------------------------------------------------


def latency(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"--latency-ms takes milliseconds from 0 to 1000, not {text!r}")
    return value


def main() -> int:
    global ADMIN_URL
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="interleaved rounds per tick row")
    ap.add_argument("--cards", type=int, default=2000, help="cards the 8 dispatchers claim")
    ap.add_argument("--cap", type=int, default=25, help="kanban.max_in_progress per host in the claim race")
    ap.add_argument("--no-reference", action="store_true", help="skip hermes-agent (PostgreSQL vs SQLite only)")
    ap.add_argument("--only", action="append", choices=PARTS, help="measure only this part (repeatable)")
    ap.add_argument("--latency-ms", type=latency, default=None,
                    help="reach the server through a forwarder adding this round-trip time (0: forwarder only)")
    ap.add_argument("--warm", action="store_true",
                    help="keep each side's board open over its rounds (the app's dispatcher) instead of a new one a tick")
    ap.add_argument("--ref-venv", type=Path, default=REF_VENV, help="where the reference is installed (cached)")
    args = ap.parse_args()
    parts = set(args.only or PARTS)
    if args.no_reference:
        parts.discard("reference")

    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="shared-", dir=BENCH_ROOT))
    forwarder = None
    if args.latency_ms is not None:
        forwarder = Forwarder(ADMIN_URL, args.latency_ms)
        ADMIN_URL = forwarder.url(ADMIN_URL)
    where = "over loopback" if forwarder is None else f"+{args.latency_ms:g} ms round trip (forwarder)"
    loop = asyncio.new_event_loop()
    run = loop.run_until_complete
    python = ensure_reference_venv(args.ref_venv) if "reference" in parts else None
    ref = Reference(python, tmp / "ref-home") if python else None
    template = "hk_bench_tpl_" + secrets.token_hex(4)
    table = Table(f"Shared board: PostgreSQL ({where}) tick vs SQLite and hermes-agent {REFERENCE_VERSION}",
                  "other side")
    counter = iter(range(10**6))
    summary = ""
    try:
        sqlite_template = tmp / "sqlite-template.db"
        print(f"  SQLite board: {run(ours_build(sqlite_template))}", file=sys.stderr)
        print(f"  PostgreSQL board: {run(pg_template_from(sqlite_template, template))}", file=sys.stderr)
        ref_template = tmp / "ref-template.db"
        if ref:
            print(f"  reference board: {ref.ask(op='build', db=str(ref_template), shape=SHAPE)['counts']}",
                  file=sys.stderr)

        def pg_side(limit: int = 100) -> float:
            home = HomeLayout(tmp / f"pg-{next(counter)}").ensure()
            seconds, claimed = run(pg_tick(template, home, limit))
            assert claimed == limit, claimed
            return seconds

        def sqlite_side(limit: int = 100) -> float:
            work = tmp / f"sqlite-{next(counter)}"
            home = HomeLayout(work).ensure()
            seconds, claimed = run(ours_tick(fresh_copy(sqlite_template, work / "kanban.db"), home, limit))
            assert claimed == limit, claimed
            shutil.rmtree(work)
            return seconds

        def ref_side() -> float:
            work = tmp / f"ref-{next(counter)}"
            answer = ref.ask(op="tick", db=str(fresh_copy(ref_template, work / "kanban.db")), limit=100)
            shutil.rmtree(work)
            return answer["seconds"]

        if "tick" in parts:
            kept: list = []
            if args.warm:
                kept = [run(WarmPg.open(template)), run(WarmSqlite.open(sqlite_template, tmp / "warm-sqlite"))]

            def pg_kept(limit: int) -> float:
                seconds, claimed = run(warm_tick(kept[0], HomeLayout(tmp / f"pg-{next(counter)}").ensure(), limit))
                assert claimed == limit, claimed
                return seconds

            def sqlite_kept(limit: int) -> float:
                seconds, claimed = run(warm_tick(kept[1], HomeLayout(tmp / f"sqlite-{next(counter)}").ensure(),
                                                 limit))
                assert claimed == limit, claimed
                return seconds

            how = ("each side's board kept open (statements prepared already)" if args.warm
                   else "a new connection: each statement prepared once")
            try:
                for limit in (100, 4):
                    statements, turns = run(pg_tick_counted(template, HomeLayout(tmp / f"count-{limit}").ensure(),
                                                            limit, args.warm))
                    row = compare(
                        f"tick 10,000 cards / 100 ready, claim {limit}{' (warm)' if args.warm else ''}: "
                        "PostgreSQL vs SQLite",
                        lambda n=limit: (pg_kept if args.warm else pg_side)(n),
                        lambda n=limit: (sqlite_kept if args.warm else sqlite_side)(n), args.runs,
                        unit="ms", aim="<= 1.50x")
                    ratios = [p / q for p, q in zip(row.ours.values, row.reference.values, strict=True)]
                    table.add(replace(row, note=(
                        f"PostgreSQL {where}; one tick = {statements} statements, {turns} round trips ({how}); "
                        f"the rounds' own ratios: median {statistics.median(ratios):.2f}x "
                        f"({min(ratios):.2f}-{max(ratios):.2f})")))
            finally:
                for board in kept:
                    run(board.close())
        if "reference" in parts:
            table.add(compare(f"tick 10,000 cards / 100 ready: PostgreSQL vs hermes-agent {REFERENCE_VERSION}",
                              pg_side, ref_side if ref else None, args.runs, unit="ms", aim="<= 0.20x (5x faster)",
                              note="" if ref else "reference not measured (not installable)"))
        if "claims" in parts:
            row, summary = claims_row(args.cards, 4, 2, args.cap, tmp)
            table.add(row)
    finally:
        if ref:
            ref.close()
        loop.close()
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)'))
        if forwarder is not None:
            forwarder.close()
        shutil.rmtree(tmp, ignore_errors=True)
    table.print()
    if summary:
        print(summary)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--claimer":
        asyncio.run(claimer(sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5])))
        sys.exit(0)
    sys.exit(main())
