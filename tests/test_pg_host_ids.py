"""Issue 34 case 5: two machines with one host id (two ``localhost``s, a cloned VM).
Each took the other's live workers for its own crashed ones and started them again (8
workers for 4 cards), and the hosts row's boot id flipped every tick. Now a live lease
held under this host id by another boot is refused with one line naming the host id and
both boots, before the tick acts on anything: the CLI's ``dispatch`` and ``daemon`` exit
1, the app says so and dispatches nothing, and ``doctor`` warns.

"Another machine" is simulated by another boot id, the one boundary that cannot be
real: machine A is this test process with its boot id (and so its workers'
fingerprints) set to another boot's; machine B is the real CLI in processes of its own,
on this machine's real boot. The workers, the server and the CLI are real."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import run_cli
from test_kanban_pane import WIDE, make_app, wait_for

from engine import identity
from engine.home import HomeLayout
from engine.kanban import dispatcher as dispatcher_module
from engine.kanban import transitions as tr
from engine.kanban.backends.postgres.board import PgBoard
from engine.kanban.backends.postgres.errors import HostIdInUse
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.hosts import boot_id
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.workers import HOST_ID_VARIABLE
from tests.support.kanban import dispatcher, kanban_settings, kill_all_workers
from tests.support.notes import capture_notes
from widgets.board.board_pane import BoardPane

TWIN = "twin"
BOOT_A = "0a0a0a0a-aaaa-4aaa-8aaa-machine-a000"


@pytest.fixture
def machine_a(monkeypatch):
    """This process is machine A: another boot (its fingerprints too), host id TWIN."""
    monkeypatch.setenv(HOST_ID_VARIABLE, TWIN)
    monkeypatch.setattr(identity, "_boot_id_cache", BOOT_A)
    monkeypatch.setattr(dispatcher_module, "boot_id", lambda: BOOT_A)


def _machine_b(tmp_path, url: str) -> tuple[HomeLayout, dict[str, str]]:
    """Machine B's home (it would start the same cards' workers at once) and env."""
    b_home = HomeLayout(tmp_path / "machine-b").ensure()
    b_home.config_file.write_text(
        f"kanban:\n  database: {url}\n  crash_grace_seconds: 0\n  profiles:\n    w: {{command: 'exec sleep 300'}}\n")
    return b_home, {HOST_ID_VARIABLE: TWIN}


async def _spawn_on_a(home, url: str) -> tuple[PgBoard, RegistrySpawner, list]:
    settings = kanban_settings({"w": "exec sleep 300"})
    board = await PgBoard.open(DatabaseUrl.parse(url))  # the server's clock, as in use
    spawner = RegistrySpawner(home, settings)
    cards = await tr.create_tasks(board, [NewTask(f"card {i}", assignee="w") for i in range(4)])
    assert len((await dispatcher(board, home, settings, spawner).tick()).spawned) == 4
    return board, spawner, [await board.get_task(c.id) for c in cards]


async def _untouched(board, before) -> None:
    for card in before:
        now = await board.get_task(card.id)
        assert (now.status, now.current_run_id, now.claim_lock, now.worker_pid) == (
            "running", card.current_run_id, card.claim_lock, card.worker_pid)
        assert identity.is_alive(card.worker_pid, card.worker_started_at)
        assert not {"crashed", "reclaimed", "host_lost"} & {e.kind for e in await board.events(card.id)}
    assert (await board.fetch("SELECT boot_id FROM hosts WHERE host_id = ?", (TWIN,)))[0][0] == BOOT_A
    assert (await board.fetch("SELECT count(*) FROM task_runs"))[0][0] == len(before)  # nothing started again


def _one_line_naming_both(stderr: str) -> None:
    assert stderr.count("\n") == 1, stderr
    assert f"'{TWIN}'" in stderr and BOOT_A in stderr and boot_id() in stderr
    assert "Traceback" not in stderr


async def test_a_second_machine_with_the_same_host_id_is_refused_by_dispatch_daemon_and_doctor(
        home, pg_url, tmp_path, machine_a):
    board, spawner, before = await _spawn_on_a(home, pg_url)
    b_home, b_env = _machine_b(tmp_path, pg_url)
    try:
        tick = await asyncio.to_thread(run_cli, "--home", str(b_home.root), "kanban", "dispatch", env=b_env)
        assert tick.returncode == 1, tick.stdout + tick.stderr
        _one_line_naming_both(tick.stderr)
        await _untouched(board, before)

        daemon = await asyncio.to_thread(run_cli, "--home", str(b_home.root), "kanban", "daemon", "--interval", "1",
                                         env=b_env, timeout=60)
        assert daemon.returncode == 1, daemon.stdout + daemon.stderr
        _one_line_naming_both(daemon.stderr)
        await _untouched(board, before)

        doctor = await asyncio.to_thread(run_cli, "--home", str(b_home.root), "doctor", env=b_env)
        warning = [line for line in doctor.stdout.splitlines() if "WARNING host twin" in line]
        assert len(warning) == 1 and BOOT_A in warning[0] and boot_id() in warning[0], doctor.stdout
        as_json = json.loads((await asyncio.to_thread(run_cli, "--home", str(b_home.root), "doctor", "--json",
                                                      env=b_env)).stdout)["shared_board"]
        assert (as_json["lease_boot_id"], as_json["this_boot_id"]) == (BOOT_A, boot_id())

        # Machine A's own ticks go on, on its own lease.
        assert not (await dispatcher(board, home, kanban_settings({"w": "exec sleep 300"}), spawner).tick()).crashed
        await _untouched(board, before)
    finally:
        kill_all_workers(spawner)
        kill_all_workers(RegistrySpawner(b_home, kanban_settings({"w": "exec sleep 300"})))
        await board.close()


async def test_once_the_other_boot_s_lease_lapsed_the_host_id_is_taken_over(home, pg_url, tmp_path, machine_a):
    """A machine that rebooted (a new boot of the same host id) is refused only until its
    old boot's lease lapses."""
    board, spawner, before = await _spawn_on_a(home, pg_url)
    b_home, b_env = _machine_b(tmp_path, pg_url)
    try:
        kill_all_workers(spawner)  # machine A is powered off
        await board.fetch("UPDATE hosts SET lease_expires = extract(epoch FROM clock_timestamp())::float8 - 1 "
                          "WHERE host_id = ? RETURNING host_id", (TWIN,))  # ... and its lease has lapsed
        tick = await asyncio.to_thread(run_cli, "--home", str(b_home.root), "kanban", "dispatch", env=b_env)
        assert tick.returncode == 0, tick.stderr
        assert (await board.fetch("SELECT boot_id FROM hosts WHERE host_id = ?", (TWIN,)))[0][0] == boot_id()
        with pytest.raises(HostIdInUse, match=BOOT_A[:8]):  # now machine A (come back) is the one refused
            await dispatcher(board, home, kanban_settings({"w": "exec sleep 300"}), spawner).tick()
    finally:
        kill_all_workers(spawner)
        kill_all_workers(RegistrySpawner(b_home, kanban_settings({"w": "exec sleep 300"})))
        await board.close()


async def test_the_app_on_a_machine_whose_host_id_is_taken_says_so_and_dispatches_nothing(
        home, pg_url, tmp_path, machine_a):
    board, spawner, before = await _spawn_on_a(home, pg_url)
    b_home, _b_env = _machine_b(tmp_path, pg_url)
    try:
        app = make_app(b_home, b_home.config_file.read_text()
                       + "  dispatch: true\n  dispatch_interval_seconds: 0.2\nui:\n  refresh_seconds: 0.2\n")
        notes = capture_notes(app)
        # The app is machine B: this machine's real boot (its own identity checks too).
        identity._boot_id_cache = None
        dispatcher_module.boot_id = boot_id
        async with app.run_test(size=WIDE) as pilot:
            pane = app.query_one(BoardPane)
            loop = app.dispatch_loop
            await wait_for(pilot, lambda: "dispatcher STOPPED" in str(pane.query_one("#board-info").content),
                           timeout=30)
            info = str(pane.query_one("#board-info").content)
            assert TWIN in info and BOOT_A in info
            assert pane.border_subtitle.endswith("dispatch STOPPED")
            stopped = [n for n in notes if "dispatch stopped" in n]
            await wait_for(pilot, lambda: loop.stopped and app.attention is not None, timeout=30)
            for _ in range(3):  # more ticks, all refused, said once
                loop.request()
                await pilot.pause(0.3)
            assert len([n for n in notes if "dispatch stopped" in n]) == len(stopped) == 1, "\n".join(notes)
            assert loop.ticks == 0
        identity._boot_id_cache = BOOT_A
        await _untouched(board, before)
    finally:
        kill_all_workers(spawner)
        kill_all_workers(RegistrySpawner(b_home, kanban_settings({"w": "exec sleep 300"})))
        await board.close()
