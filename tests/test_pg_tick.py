"""A tick on a PostgreSQL board in few statements (engine.kanban.backends.postgres.tick):
the first look, the claim and the record each one statement, and each doing exactly
what the statement-by-statement tick (the SQLite board's) does. Against the real server,
a fresh database per test; the board's clock is pinned (a boundary), nothing else faked."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import asyncpg
import pytest

from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.backend import StoreError
from engine.kanban.dispatcher import (
    LAUNCHING_PARTS,
    LAUNCHING_SQL,
    LIVE_SQL,
    PROMOTABLE_SQL,
    READY_PARTS,
    READY_SQL,
    WORKERS_OWN_ENDS,
    Dispatcher,
)
from engine.kanban.models import EventKind, NewTask, load_payload
from engine.kanban.workers import LaunchedWorker, NullSpawner, WorkerLaunch, claim_lock_here
from tests.support.kanban import FakeClock, kanban_settings, open_board

START = 1_778_000_000.123456789  # a board time with all of a float's digits
LEASE = 120.0


class EvidenceSpawner(NullSpawner):
    """Starts nothing; each launch comes back with evidence to record (a pid, a
    fingerprint, its session id: the launch token, an output path), made from its title."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__()
        self.pids = pids

    def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        self.launched.append(launch)
        title = launch.env["HERMES_KANBAN_TITLE"]
        return LaunchedWorker(pid=self.pids[title], fingerprint=f"fp {title}", session_id=launch.token,
                              output_path=f"/nowhere/{title}.out")


async def _sql(board, statement: str, *params) -> list:
    return await board.fetch(statement, params)


# -- the first look --------------------------------------------------------------------------------


async def test_the_first_look_reads_what_the_dispatcher_s_own_reads_give_and_renews_the_lease(home, pg_url):
    clock = FakeClock(START)
    board = await open_board(home, clock, pg_url)
    try:
        # Ready cards: ties on priority and creation time (then by id), a claimed one, one
        # whose last closed run was rate limited (an older run and an open one beside it).
        ready = await tr.create_tasks(board, [NewTask(f"ready {i}", assignee="w", priority=p)
                                              for i, p in enumerate([3, 0, 3, 1, 3, 5, 0])])
        parent_done, parent_open = await tr.create_tasks(board, [NewTask("done parent"), NewTask("open parent")])
        todo = await tr.create_tasks(board, [NewTask("todo free", parents=(parent_done.id,)),
                                             NewTask("todo waiting", parents=(parent_open.id,)),
                                             NewTask("todo both", parents=(parent_done.id, parent_open.id))])
        assert [t.status for t in todo] == ["todo"] * 3
        await _sql(board, "UPDATE tasks SET status = 'done' WHERE id = ?", parent_done.id)
        await _sql(board, "UPDATE tasks SET status = 'blocked' WHERE id = ?", parent_open.id)
        await _sql(board, "UPDATE tasks SET claim_lock = 'elsewhere:1' WHERE id = ?", ready[1].id)
        limited = ready[2].id
        for started, ended, outcome in ((START - 900, START - 800, "crashed"), (START - 700, START - 1.0 / 3, "rate_limited"),
                                        (START - 10, None, None)):
            await _sql(board, "INSERT INTO task_runs (task_id, profile, status, started_at, ended_at, outcome) "
                              "VALUES (?, 'w', 'ended', ?, ?, ?)", limited, started, ended, outcome)
        # Running cards: one whose run is still launching, one whose worker is recorded.
        launching, recorded = await tr.create_tasks(board, [NewTask("launching", assignee="w"),
                                                             NewTask("recorded", assignee="w")])
        for card, status in ((launching, "launching"), (recorded, "running")):
            run_id = (await _sql(board, "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, "
                                        "started_at, process_id) VALUES (?, 'w', ?, 'h:1', ?, ?, 'tok') RETURNING id",
                                 card.id, status, START + 1.0 / 7, START))[0][0]
            await _sql(board, "UPDATE tasks SET status = 'running', claim_lock = 'h:1', claim_expires = ?, "
                              "current_run_id = ? WHERE id = ?", START + 1.0 / 7, run_id, card.id)
        for host, expires in (("host-b", START - 5), ("host-a", START - 50), ("host-c", START + 50), ("me", START - 1)):
            # Each renewed just now (no outage: see tests/test_pg_outage.py), their leases as given.
            await _sql(board, "INSERT INTO hosts (host_id, boot_id, lease_expires, renewed_at) "
                              "VALUES (?, 'boot', ?, ?) RETURNING host_id", host, expires, START - 1)

        expected = [[tuple(r) for r in await board.fetch(sql)] for sql in (LIVE_SQL, PROMOTABLE_SQL, READY_SQL,
                                                                            LAUNCHING_SQL)]
        look, promotable, ready_rows, launching_rows, lost = await board.first_look(
            live=LIVE_SQL, promotable=PROMOTABLE_SQL, ready=READY_PARTS, launching=LAUNCHING_PARTS,
            host_id="me", boot="boot-2", now=START, lease_seconds=LEASE)

        assert look == expected[0] == [(True,)]
        assert promotable == sorted(expected[1]) == [(todo[0].id,)]
        assert ready_rows == expected[2]  # the same rows in the same order, floats to the last digit
        assert [r[0] for r in ready_rows] == [ready[5].id, *sorted(ready[i].id for i in (0, 2, 4)), ready[3].id,
                                              ready[6].id]
        assert dict((r[0], r[2:4]) for r in ready_rows)[limited] == ("rate_limited", START - 1.0 / 3)
        assert launching_rows == expected[3] and [r[1] for r in launching_rows] == [launching.id]
        assert lost == ["host-a", "host-b"]  # by id; this host and the live one left out
        assert [tuple(r) for r in await board.fetch("SELECT boot_id, lease_expires, renewed_at FROM hosts "
                                                    "WHERE host_id = 'me'")] == [("boot-2", START + LEASE, START)]
    finally:
        await board.close()


async def test_an_idle_tick_is_three_statements_and_a_claiming_one_five_whatever_it_claims(home, pg_url,
                                                                                            monkeypatch):
    """And a long-lived connection prepares each of them once: the claim and the record
    read the same text whatever the number of cards."""
    board = await open_board(home, FakeClock(START), pg_url)
    sent: list[str] = []
    for name in ("execute", "executemany", "fetch", "fetchrow", "fetchval"):
        original = getattr(asyncpg.Connection, name)

        async def counted(conn, query, *args, _original=original, **kwargs):
            sent.append(query)
            return await _original(conn, query, *args, **kwargs)

        monkeypatch.setattr(asyncpg.Connection, name, counted)

    async def prepared() -> int:
        return int((await board.fetch("SELECT count(*) FROM pg_prepared_statements"))[0][0])

    async def tick(limit: int):
        sent.clear()
        result = await Dispatcher(board, home=home, settings=kanban_settings({"w": "true"}, max_in_progress=limit),
                                  spawner=NullSpawner()).tick()
        return result, len(sent)

    try:
        await prepared()
        result, statements = await tick(3)
        assert (result.spawned, statements) == ((), 3)
        cards = await tr.create_tasks(board, [NewTask(f"card {i}", assignee="w") for i in range(8)])
        result, statements = await tick(3)
        assert (len(result.spawned), statements) == (3, 5)
        for spawned in result.spawned:  # each worker finishes its card, as a worker would
            run_id = (await board.get_task(spawned.task_id)).current_run_id
            await tr.complete(board, spawned.task_id, "done", call=tr.WorkerCall(spawned.task_id, run_id))
        before = await prepared()
        result, statements = await tick(5)
        assert (len(result.spawned), statements) == (5, 5)
        assert await prepared() == before
        assert len(cards) == 8
    finally:
        await board.close()


# -- the claim -------------------------------------------------------------------------------------


async def _tick_and_read(board, home: HomeLayout, titles: dict[str, str]) -> dict:
    """One tick, then every card, run and event, with ids made comparable (titles for
    card ids, the n-th run for run ids; launch tokens named by their card)."""
    settings = kanban_settings({"w": "true", "v": "true"}, max_in_progress=4, default_assignee="w")
    pids = {title: 4000 + n for n, title in enumerate(sorted(titles.values()))}
    result = await Dispatcher(board, home=home, settings=settings, spawner=EvidenceSpawner(pids)).tick()
    runs = await board.fetch("SELECT id, task_id, profile, status, claim_lock, claim_expires, worker_pid, "
                             "worker_started_at, process_id, output_path, started_at, ended_at FROM task_runs "
                             "ORDER BY task_id, id")
    run_name = {run[0]: f"run of {titles[run[1]]}" for run in runs}
    tokens = {run[8]: f"token of {titles[run[1]]}" for run in runs}

    def same(value):  # (each side's own home, where its launches are: "the home")
        return "the home" if value == os.path.realpath(home.root) else titles.get(value, tokens.get(value, value))

    tasks = await board.fetch("SELECT id, status, assignee, claim_lock, claim_expires, started_at, worker_pid, "
                              "worker_started_at, current_run_id, last_heartbeat_at FROM tasks")
    events = await board.fetch("SELECT task_id, run_id, kind, payload, created_at FROM task_events ORDER BY id")
    per_card: dict[str, list] = {}
    for task_id, run_id, kind, payload, created_at in events:
        shown = {k: same(v) for k, v in load_payload(payload).items()}
        per_card.setdefault(titles[task_id], []).append((run_name.get(run_id), kind, shown, created_at))
    return {
        "spawned": sorted(titles[s.task_id] for s in result.spawned),
        "auto_assigned": sorted(titles[t] for t in result.auto_assigned),
        "skipped": sorted((titles[s.task_id], s.reason) for s in result.skipped),
        "tasks": sorted((titles[t[0]], *t[1:8], run_name.get(t[8]), t[9]) for t in tasks),
        "runs": sorted((run_name[r[0]], titles[r[1]], *r[2:8], same(r[8]), *r[9:]) for r in runs),
        "events": per_card,
    }


async def test_a_tick_on_postgresql_writes_what_the_same_tick_writes_on_sqlite(home, pg_url, tmp_path):
    """The same board on both stores (distinct priorities: the same cards are chosen),
    unassigned cards given the default assignee, a cap that holds some back: the same
    cards, runs and events, event for event in the same order."""
    cards = [NewTask(f"card {i}", body=f"body {i}", assignee=[None, "w", "v", "w", None, "v"][i], priority=10 - i)
             for i in range(6)]
    seen = []
    for url, where in ((None, home), (pg_url, HomeLayout(tmp_path / "pg-home").ensure())):
        board = await open_board(where, FakeClock(START), url)
        try:
            made = await tr.create_tasks(board, cards)
            seen.append(await _tick_and_read(board, where, {t.id: t.title for t in made}))
        finally:
            await board.close()
    sqlite_side, pg_side = seen
    assert pg_side == sqlite_side
    assert pg_side["spawned"] == ["card 0", "card 1", "card 2", "card 3"]
    assert pg_side["auto_assigned"] == ["card 0"]
    assert [kind for _run, kind, _p, _at in pg_side["events"]["card 0"]] == [
        "created", "assigned", "claimed", "spawned"]


async def test_a_claim_takes_only_cards_still_free_skips_a_card_another_host_is_claiming_and_writes_nothing_else(
        home, pg_url):
    board = await open_board(home, FakeClock(START), pg_url)
    other = await asyncpg.connect(pg_url)
    try:
        free, blocked, locked, taken = await tr.create_tasks(board, [NewTask(t, body=f"{t} body", assignee="w")
                                                                     for t in ("free", "blocked", "locked", "taken")])
        await _sql(board, "UPDATE tasks SET status = 'blocked' WHERE id = ?", blocked.id)
        await _sql(board, "UPDATE tasks SET claim_lock = 'elsewhere:7' WHERE id = ?", taken.id)
        events_before = len(await board.events())
        holding = other.transaction()
        await holding.start()
        await other.execute("SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", locked.id)  # another host, mid-claim
        lock = claim_lock_here()
        values = {"running": "running", "ready": "ready", "launching": "launching", "default": None,
                  "lock": lock, "expires": START + 900, "now": START}
        cards = [(c.id, "w", f"token {c.title}") for c in (taken, locked, blocked, free)]
        events = [e for c in (taken, locked, blocked, free)
                  for e in ((c.id, EventKind.ASSIGNED, {"n": 1}, False), (c.id, EventKind.CLAIMED, {"n": 2}, True))]
        # A claim that waited for the locked row would never end: the guard fails it instead of hanging.
        won = await asyncio.wait_for(board.claim_cards(None, cards, events, **values), timeout=120)
        assert len(won) == 1 and won[0][0] == free.id and won[0][2:] == ("free", "free body")
        run_id = won[0][1]
        card = await board.get_task(free.id)
        assert (card.status, card.claim_lock, card.claim_expires, card.current_run_id, card.started_at) == (
            "running", lock, START + 900, run_id, START)
        runs = await board.fetch("SELECT id, task_id, profile, status, claim_lock, process_id FROM task_runs")
        assert [tuple(r) for r in runs] == [(run_id, free.id, "w", "launching", lock, "token free")]
        new = (await board.events())[events_before:]
        assert [(e.task_id, e.run_id, e.kind) for e in new] == [(free.id, None, "assigned"), (free.id, run_id, "claimed")]
        for card, status, claim in ((blocked, "blocked", None), (locked, "ready", None), (taken, "ready", "elsewhere:7")):
            now_card = await board.get_task(card.id)
            assert (now_card.status, now_card.claim_lock, now_card.current_run_id) == (status, claim, None)
        await holding.commit()  # the other host let go without claiming: the card is free again
        again = await board.claim_cards(None, [(locked.id, "w", "token locked")],
                                        [(locked.id, EventKind.CLAIMED, {}, True)], **values)
        assert [r[0] for r in again] == [locked.id] and again[0][1] > run_id  # a run id is never handed out twice
    finally:
        await other.close()
        await board.close()


async def test_a_claim_the_server_refuses_halfway_leaves_no_trace(home, pg_url):
    """The server refuses the claim's events (a trigger of the test's own): the cards, the
    runs and the earlier events are as before the tick, and the next tick claims."""
    board = await open_board(home, FakeClock(START), pg_url)
    settings = kanban_settings({"w": "true"}, default_assignee="w")
    try:
        cards = await tr.create_tasks(board, [NewTask("assigned", assignee="w"), NewTask("unassigned")])
        await board.conn.raw.execute(
            "CREATE FUNCTION hk_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$")
        await board.conn.raw.execute("CREATE TRIGGER hk_test_refuse BEFORE INSERT ON task_events FOR EACH ROW "
                                     "WHEN (NEW.kind = 'claimed') EXECUTE FUNCTION hk_test_refuse()")
        events_before = [(e.id, e.kind) for e in await board.events()]
        with pytest.raises(StoreError, match="refused by the test"):
            await Dispatcher(board, home=home, settings=settings, spawner=NullSpawner()).tick()
        for card in cards:
            now_card = await board.get_task(card.id)
            assert (now_card.status, now_card.assignee, now_card.claim_lock, now_card.current_run_id) == (
                "ready", card.assignee, None, None)
        assert (await board.fetch("SELECT count(*) FROM task_runs"))[0][0] == 0
        assert [(e.id, e.kind) for e in await board.events()] == events_before
        await board.conn.raw.execute("DROP TRIGGER hk_test_refuse ON task_events")
        result = await Dispatcher(board, home=home, settings=settings, spawner=NullSpawner()).tick()
        assert sorted(s.task_id for s in result.spawned) == sorted(c.id for c in cards)
    finally:
        await board.close()


# -- the record ------------------------------------------------------------------------------------


async def test_the_record_writes_each_worker_once_and_names_the_runs_that_ended_meanwhile(home, pg_url):
    board = await open_board(home, FakeClock(START), pg_url)
    try:
        titles = ("kept", "ended", "moved on", "recorded already")
        cards = await tr.create_tasks(board, [NewTask(t, assignee="w") for t in titles])
        values = {"running": "running", "ready": "ready", "launching": "launching", "default": None,
                  "lock": "here:1", "expires": START + 900, "now": START}
        won = await board.claim_cards(None, [(c.id, "w", f"token {c.title}") for c in cards], [], **values)
        run_of = {task_id: run_id for task_id, run_id, _t, _b in won}
        kept, ended, moved, recorded = (c.id for c in cards)
        # Meanwhile: a person's reclaim ends one run; one card is on a newer run; one run
        # already has its worker written (by nobody this tick knows of), and ended.
        await _sql(board, "UPDATE task_runs SET status = 'ended', ended_at = ?, outcome = 'reclaimed' WHERE id = ?",
                   START + 1, run_of[ended])
        await _sql(board, "UPDATE tasks SET current_run_id = current_run_id + 1000 WHERE id = ?", moved)
        await _sql(board, "UPDATE task_runs SET worker_pid = 77, worker_started_at = 'fp 77', status = 'ended', "
                          "ended_at = ?, outcome = 'crashed' WHERE id = ?", START + 1, run_of[recorded])
        workers = [(run_of[c], c, 500 + n, f"fp {n}", f"session {n}", f"/out/{n}", {"pid": 500 + n})
                   for n, c in enumerate((kept, ended, moved, recorded))]
        events_before = len(await board.events())
        taken = await board.record_launches(workers, launching="launching", running="running",
                                            kind=EventKind.SPAWNED, now=START + 2, own_ends=WORKERS_OWN_ENDS)
        assert [tuple(t) for t in taken] == sorted([(run_of[ended], ended, "reclaimed", 501, "fp 1", "here:1"),
                                                    (run_of[recorded], recorded, "crashed", 77, "fp 77", "here:1")])
        runs = {r[0]: tuple(r[1:]) for r in await board.fetch(
            "SELECT id, status, worker_pid, worker_started_at, process_id, output_path FROM task_runs")}
        assert runs[run_of[kept]] == ("running", 500, "fp 0", "session 0", "/out/0")
        assert runs[run_of[ended]] == ("ended", 501, "fp 1", "session 1", "/out/1")  # evidence kept, still ended
        assert runs[run_of[moved]] == ("running", 502, "fp 2", "session 2", "/out/2")  # its run, not its card
        assert runs[run_of[recorded]] == ("ended", 77, "fp 77", "token recorded already", None)  # left as it was
        pids = {t.id: t.worker_pid for t in await board.list_tasks()}
        assert pids == {kept: 500, ended: 501, moved: None, recorded: 503}
        new = (await board.events())[events_before:]
        assert [(e.task_id, e.run_id, e.kind, e.payload) for e in new] == [
            (c, run_of[c], "spawned", {"pid": 500 + n}) for n, c in enumerate((kept, ended, moved, recorded))]
    finally:
        await board.close()


def test_the_tick_module_keeps_to_types_the_driver_knows_without_asking_the_server():
    """bigint[], boolean[] or record[] on the wire makes asyncpg look the type up on each
    new connection (two more round trips; 12-17 ms on a server with JIT): arrays go in as
    text[] (a bigint[] is only ever a cast of one, on the server) and rows come back as json."""
    code = (Path(__file__).resolve().parents[1] / "engine/kanban/backends/postgres/tick.py").read_text()
    assert set(re.findall(r"::(\w+)\[\]", code)) == {"text", "bigint"}
    assert code.count("::bigint[]") == code.count("::text[]::bigint[]") > 0
    assert not re.search(r"array_agg\((ROW|q\b[^.])", code)
