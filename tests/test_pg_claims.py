"""Claims on a shared (PostgreSQL) board belong to their live host, on the server's clock,
named by exact host ids. Real workers (held by gate files), the real server (a fresh
database per test); time is faked only at a boundary: the board's clock, or one host's
wall clock (``time.time``) in a real process of its own."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from engine import identity
from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.backends.postgres.board import PgBoard
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.workers import HOST_ID_VARIABLE, NullSpawner, is_host_local
from tests.support import wait_until_async
from tests.support.commands import until
from tests.support.kanban import CLI, FakeClock, dispatcher, kanban_settings, kill_all_workers, open_board

SKEW_SECONDS = 200.0


def _gated_worker(gate: Path) -> str:
    """A worker that runs until the test opens ``gate``, then completes its card."""
    return f'{until(gate)} {CLI} complete "$HERMES_KANBAN_TASK" --summary "done after the gate"'


async def _kinds(board, task_id: str) -> list[str]:
    return [e.kind for e in await board.events(task_id)]


async def _server_now(board) -> float:
    return float((await board.fetch("SELECT extract(epoch FROM clock_timestamp())::float8"))[0][0])


# -- 1. claims belong to their live host ------------------------------------------------------------


async def test_a_long_worker_keeps_its_card_while_another_host_ticks_past_the_claim_ttl(home, pg_url, monkeypatch,
                                                                                        tmp_path):
    gate = tmp_path / "gate"
    ttl = 6.0
    clock = FakeClock()
    settings = kanban_settings({"w": _gated_worker(gate)}, claim_ttl_seconds=ttl, host_lease_seconds=30.0,
                               crash_grace_seconds=3600)
    board = await open_board(home, clock, pg_url)
    spawner = RegistrySpawner(home, settings)
    host_a = dispatcher(board, home, settings, spawner)
    host_b = dispatcher(board, home, settings, NullSpawner())  # would start a second worker if it took the card
    try:
        card = await tr.create_task(board, NewTask("long job", assignee="w"))
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
        first = (await host_a.tick()).spawned
        assert [s.task_id for s in first] == [card.id]
        pid, run = first[0].pid, (await board.get_task(card.id)).current_run_id
        fp = (await board.get_task(card.id)).worker_started_at

        # Both hosts tick, host-b twice as often, four TTLs long: host-a renews its claim.
        for step in range(12):
            clock.advance(ttl / 3)
            if step % 2:
                monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
                assert not (await host_a.tick()).reclaimed
                assert (await board.get_task(card.id)).claim_expires > clock.now + ttl / 2  # renewed ahead
            monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
            result = await host_b.tick()
            assert not result.reclaimed and not result.spawned

        # host-a stops ticking; its lease (30 s) outlives its claim (6 s): host-b still takes nothing.
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
        for _ in range(5):
            clock.advance(ttl / 2)
            result = await host_b.tick()
            assert not result.reclaimed and not result.spawned
        assert (await board.get_task(card.id)).claim_expires < clock.now  # the claim did run out

        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")  # back on host-a: its expired claim is its own
        assert (await host_a.tick()).extended == (card.id,)
        assert identity.is_alive(pid, fp)
        gate.touch()
        await wait_until_async(lambda: _is_done(board, card.id), timeout=60)
        runs = await board.runs_of(card.id)
        assert [(r.id, r.outcome) for r in runs] == [(run, "completed")]  # one start, no reclaim
        kinds = await _kinds(board, card.id)
        assert kinds.count("spawned") == 1
        assert not {"reclaimed", "host_lost", "crashed"} & set(kinds)
        assert (await board.get_task(card.id)).consecutive_failures == 0
    finally:
        gate.touch()
        kill_all_workers(spawner)
        await board.close()


async def _is_done(board, task_id: str) -> bool:
    return (await board.get_task(task_id)).status == "done"


async def test_a_host_whose_lease_lapsed_loses_its_expired_claims_to_another_host(home, pg_url, monkeypatch):
    """The other side of the rule: no live lease, and host_lost applies (once)."""
    clock = FakeClock()
    settings = kanban_settings({"w": "exec sleep 300"}, claim_ttl_seconds=6.0, host_lease_seconds=30.0)
    board = await open_board(home, clock, pg_url)
    spawner = RegistrySpawner(home, settings)
    try:
        card = await tr.create_task(board, NewTask("job", assignee="w"))
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-a")
        assert (await dispatcher(board, home, settings, spawner).tick()).spawned
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
        host_b = dispatcher(board, home, settings, NullSpawner())
        for _ in range(3):  # host-b ticks on (the board is reachable), host-a stays silent
            clock.advance(10)
            assert not (await host_b.tick()).reclaimed
        clock.advance(1)
        assert (await host_b.tick()).reclaimed == (card.id,)
        kinds = await _kinds(board, card.id)
        assert kinds.count("host_lost") == 1 and "reclaimed" not in kinds
    finally:
        kill_all_workers(spawner)
        await board.close()


# -- 2. one clock: the server's --------------------------------------------------------------------------


def _skewed_python(tmp_path: Path, seconds: float) -> Path:
    """A folder whose sitecustomize moves this process's wall clock (time.time) by
    ``seconds``: a host whose clock runs ahead. Nothing else about it is faked."""
    folder = tmp_path / "skewed"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        f"import time\n_real = time.time\ntime.time = lambda: _real() + {seconds!r}\n")
    return folder


async def test_a_host_whose_clock_runs_200s_ahead_takes_nothing_and_runs_its_own_cards(pg_url, tmp_path):
    gate = tmp_path / "gate"
    a_home = HomeLayout(tmp_path / "a").ensure()
    b_home = HomeLayout(tmp_path / "b").ensure()
    a_settings = kanban_settings({"aw": _gated_worker(gate)})  # default TTL, lease (120 s) and grace
    b_home.config_file.write_text(
        "kanban:\n  profiles:\n    bw: " + json.dumps(f'{CLI} complete "$HERMES_KANBAN_TASK" --summary b-done') + "\n")
    old = os.environ.get(HOST_ID_VARIABLE)
    os.environ[HOST_ID_VARIABLE] = "host-a"
    board = await PgBoard.open(DatabaseUrl.parse(pg_url))  # the server's clock, as in use
    spawner = RegistrySpawner(a_home, a_settings)
    host_a = dispatcher(board, a_home, a_settings, spawner)
    try:
        a_cards = await tr.create_tasks(board, [NewTask(f"a {i}", assignee="aw") for i in range(3)])
        b_card = await tr.create_task(board, NewTask("b's own", assignee="bw"))
        assert len((await host_a.tick()).spawned) == 3
        before = {t.id: await board.get_task(t.id) for t in a_cards}

        skewed = _skewed_python(tmp_path, SKEW_SECONDS)
        env = {HOST_ID_VARIABLE: "host-b", "HERMES_KANBAN_DATABASE_URL": pg_url,
               "PYTHONPATH": os.pathsep.join([str(skewed), *sys.path])}
        clock_there = run_cli_python(["-c", "import time; print(time.time())"], env)
        assert float(clock_there) - await _server_now(board) > SKEW_SECONDS - 60  # the skew is real there

        out = run_cli("--home", str(b_home.root), "kanban", "dispatch", "--json", env=env)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["reclaimed"] == [] and [s["task_id"] for s in result["spawned"]] == [b_card.id]
        for t in a_cards:  # host-a's cards: untouched, their workers alive
            now_t = await board.get_task(t.id)
            assert (now_t.status, now_t.current_run_id, now_t.claim_lock) == (
                "running", before[t.id].current_run_id, before[t.id].claim_lock)
            assert identity.is_alive(now_t.worker_pid, now_t.worker_started_at)
            assert "host_lost" not in await _kinds(board, t.id)
        # host-b's run and lease were written in the server's time, not 200 s ahead of it.
        b_run = (await board.runs_of(b_card.id))[0]
        assert b_run.started_at <= await _server_now(board)
        b_lease = (await board.fetch("SELECT lease_expires FROM hosts WHERE host_id = 'host-b'"))[0][0]
        assert b_lease <= await _server_now(board) + a_settings.kanban.host_lease_seconds
        await wait_until_async(lambda: _is_done(board, b_card.id), timeout=60)

        again = run_cli("--home", str(b_home.root), "kanban", "dispatch", "--json", env=env)
        assert again.returncode == 0 and json.loads(again.stdout)["reclaimed"] == []
        assert not (await host_a.tick()).reclaimed  # and host-a's own view of the clock agrees
        gate.touch()
        for t in a_cards:
            await wait_until_async(lambda t=t: _is_done(board, t.id), timeout=60)
        assert [len(await board.runs_of(t.id)) for t in [*a_cards, b_card]] == [1, 1, 1, 1]
    finally:
        gate.touch()
        kill_all_workers(spawner)
        await board.close()
        if old is None:
            os.environ.pop(HOST_ID_VARIABLE, None)
        else:
            os.environ[HOST_ID_VARIABLE] = old


def run_cli_python(argv: list[str], env: dict[str, str]) -> str:
    import subprocess

    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, check=True, timeout=60,
                          env={**os.environ, **env}).stdout.strip()


# -- 3. host ids: exact, never a prefix -------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["hostA:x", "host a", "h\x1b[31m", "x" * 65, "hôte"])
def test_a_host_id_outside_the_rule_is_exit_2_with_one_line(home, bad):
    for argv in (("kanban", "dispatch"), ("kanban", "list")):
        out = run_cli("--home", str(home.root), *argv, env={HOST_ID_VARIABLE: bad})
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and HOST_ID_VARIABLE in out.stderr and "\x1b" not in out.stderr
        assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert not home.kanban_db.exists()  # refused before the board was opened


async def test_a_lapsed_host_a_and_a_live_host_a_x_are_kept_apart(home, pg_url, monkeypatch, children):
    """``hostA:x`` cannot be a host id any more, but a board may hold one (written before
    the rule): its cards are not ``hostA``'s, in SQL as in Python."""
    clock = FakeClock()
    settings = kanban_settings({"w": "exec sleep 300"}, host_lease_seconds=30.0)
    board = await open_board(home, clock, pg_url)
    try:
        lapsed, live = await tr.create_tasks(board, [NewTask("hostA's", assignee="w"),
                                                     NewTask("hostA:x's", assignee="w")])
        proc = children(["sleep", "300"])
        fp = identity.fingerprint(proc.pid)
        now = clock.now
        for card, host in ((lapsed, "hostA"), (live, "hostA:x")):
            lock = f"{host}:{proc.pid}"
            async with board.transaction() as conn:
                run_id = (await conn.execute(
                    "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, started_at, "
                    "worker_pid, worker_started_at) VALUES (?, 'w', 'running', ?, ?, ?, ?, ?)",
                    (card.id, lock, now + 900, now, proc.pid, fp))).lastrowid
                await conn.execute(
                    "UPDATE tasks SET status = 'running', claim_lock = ?, claim_expires = ?, started_at = ?, "
                    "current_run_id = ?, worker_pid = ?, worker_started_at = ? WHERE id = ?",
                    (lock, now + 900, now, run_id, proc.pid, fp, card.id))
        for host, expires in (("hostA", now - 70), ("hostA:x", now + 30)):  # lapsed 70 s ago; live
            await board.fetch("INSERT INTO hosts (host_id, boot_id, lease_expires, renewed_at) VALUES (?, 'boot', ?, ?) "
                              "RETURNING host_id", (host, expires, now))
        monkeypatch.setenv(HOST_ID_VARIABLE, "host-b")
        result = await dispatcher(board, home, settings, NullSpawner()).tick()
        assert result.reclaimed == (lapsed.id,)
        kept = await board.get_task(live.id)
        assert kept.status == "running" and kept.claim_lock == f"hostA:x:{proc.pid}"
        assert identity.is_alive(proc.pid, fp)
        monkeypatch.setenv(HOST_ID_VARIABLE, "hostA")
        assert not is_host_local(f"hostA:x:{proc.pid}") and is_host_local(f"hostA:{proc.pid}")
    finally:
        await board.close()
