"""A launch belongs to the home that made it (issue 34, case 2).

Several homes of one host may tick one board (``--db PATH`` on one SQLite file, or one
host id on a server board). A dispatcher killed mid-launch leaves runs ``launching``;
their sessions are in *its* home's folder, so only that home can look them up. Another
home's tick used to look the tokens up in its own folder, find nothing, "release" the
launches and start the cards again beside the live workers, which then ran on no run,
never stopped. Now the other home holds such a card (or releases it only when the launch
is proven dead from there: its dispatcher verified gone, no recorded session in the
owner's folder), and the owner's next tick adopts it.

Two real homes, one real board file (or the real PostgreSQL server), a real dispatcher
process killing itself with SIGKILL at the launch step (tests/support/launch_driver.py),
workers that are real sessions paced by a gate file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import identity
from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.processes import session as sess
from tests.support import wait_until, wait_until_async
from tests.support.commands import until
from tests.support.kanban import (
    FakeClock,
    cli_argv,
    dispatcher,
    kanban_settings,
    open_shared_board,
    shared_board_location,
)

GRACE = 60.0
CARDS = 3
DRIVER = Path(__file__).resolve().parent / "support" / "launch_driver.py"


@pytest.fixture
def world(tmp_path, board_backend):
    """Two homes and where their one board is (a file path, or a server URL); the
    workers' gate is opened and every worker awaited afterwards."""
    homes = [HomeLayout(tmp_path / name).ensure() for name in ("home-a", "home-b")]
    location = shared_board_location(tmp_path, board_backend)
    gate = tmp_path / "gate"
    spawners: list[RegistrySpawner] = []
    yield homes, location, gate, spawners
    gate.touch()
    for spawner in spawners:
        for s in spawner.registry.list(include_finished=False):
            spawner.registry.wait(s.id, timeout=30)


def _settings(command: str):
    return kanban_settings({"w": command}, max_in_progress=100, crash_grace_seconds=GRACE)


def _kill_a_mid_launch(home: HomeLayout, location: str, step: str, command: str) -> None:
    proc = subprocess.run([sys.executable, str(DRIVER), str(home.root), location, step, str(GRACE), command],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, (proc.returncode, proc.stderr[-2000:])


def _live(spawners) -> dict[str, list[tuple[int, str]]]:
    """Each card's live worker sessions, in every home: (pid, session id)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for spawner in spawners:
        for s in spawner.registry.list(include_finished=False):
            found.setdefault(s.owner.removeprefix("kanban:"), []).append((s.pid, s.id))
    return found


async def _recorded(board, cards) -> dict[str, tuple[int, str]]:
    """Each card's recorded worker on its open run: (pid, session id)."""
    out = {}
    for card in cards:
        task = await board.get_task(card)
        if task.worker_pid is not None:
            run = next(r for r in await board.runs_of(card) if r.id == task.current_run_id)
            out[card] = (task.worker_pid, run.session_id)
    return out


@pytest.mark.parametrize("step", ["after_spawn", "ungated", "unrecorded", "before_spawn"])
async def test_another_home_on_the_board_never_releases_a_launch_it_cannot_see_so_no_card_gets_two_workers(
        world, tmp_path, step):
    """The family: a launch resolved by a home that did not make it. Before: home B's
    tick released all of A's launches and started them again (two live workers per card,
    A's never stopped)."""
    (home_a, home_b), location, gate, spawners = world
    command = f'touch "{tmp_path}/ran-$HERMES_KANBAN_RUN_ID"; {until(gate)} exit 0'
    settings = _settings(command)
    board = await open_shared_board(location, home_b, FakeClock(time.time() + GRACE + 5))
    try:
        cards = [t.id for t in await tr.create_tasks(board, [NewTask(f"card {i}", assignee="w")
                                                              for i in range(CARDS)])]
        _kill_a_mid_launch(home_a, location, step, command)
        spawner_a, spawner_b = RegistrySpawner(home_a, settings), RegistrySpawner(home_b, settings)
        spawners += [spawner_a, spawner_b]
        claimed = {c: (await board.runs_of(c))[0] for c in cards}
        # The card whose spawn began (the first launched: "unrecorded", "ungated").
        begun = [c for c in cards if spawner_a.registry.session_dir(claimed[c].session_id).exists()]
        first = begun[0] if len(begun) == 1 else None
        if step == "ungated":  # A is gone: its first wrapper reads the end of its gate, marks it and leaves
            folder = spawner_a.registry.session_dir(claimed[first].session_id)
            wait_until(lambda: (folder / sess.NOT_STARTED_FILE).exists(), what="the wrapper's not_started mark")
        before = _live(spawners)

        async def lock_free() -> bool:
            async with board.dispatch_guard() as held:
                return held

        await wait_until_async(lock_free, what="the killed dispatcher's lock let go")

        b = await dispatcher(board, home_b, settings, spawner_b).tick()
        live = _live(spawners)
        assert all(len(workers) == 1 for workers in live.values()), live  # (before: 3 cards with two)
        assert not b.launch_adopted and not b.crashed
        if step == "after_spawn":  # A's workers run: only A may adopt them; B holds the cards
            assert sorted(b.launch_held) == sorted(cards) and not b.spawned and not b.launch_released
            assert live == before and set(live) == set(cards)
            for card in cards:
                assert any(w.startswith(f"{card}: its launch was never recorded and it was claimed by home "
                                        f"{home_a.root}") for w in b.warnings), b.warnings
                [held] = [e for e in await board.events(card) if e.kind == "launch_held"]
                assert str(home_a.root) in held.payload["reason"]
            # A person at home B cannot take one back either: its worker is unseen from there.
            refused = subprocess.run(cli_argv(home_b, "--db", location, "reclaim", cards[0]), capture_output=True,
                                     text=True, timeout=120)
            assert refused.returncode == 1, refused.stdout
            assert f"run a dispatcher tick of home {home_a.root}, which claimed it," in refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1
        else:  # A verified gone, and A's folder (read only) shows no session, a session never
            # recorded, or one that ended at its gate: proven never started, released
            assert sorted(b.launch_released) == sorted(cards) and not b.launch_held
        assert sorted(s.task_id for s in b.spawned) == sorted(b.launch_released)
        for card in b.launch_released:
            [ended, _again] = await board.runs_of(card)
            assert (ended.outcome, ended.id) == ("not_started", claimed[card].id)
            # Proven from A's folder, read only (before: "proven" by B's own folder, where
            # no launch of A's can ever be, and that token fenced there).
            assert ended.summary.startswith(f"it was claimed by home {home_a.root} (dispatcher pid ")
            assert not spawner_b.registry.session_dir(claimed[card].session_id).exists()
            assert (await board.get_task(card)).consecutive_failures == 0

        # A runs again: it adopts (or releases) what is its own; B never started a second worker.
        a = await dispatcher(board, home_a, settings, spawner_a).tick()
        assert not a.spawned
        if step == "after_spawn":
            assert sorted(a.launch_adopted) == sorted(cards)
        again = await dispatcher(board, home_b, settings, spawner_b).tick()
        assert not (again.spawned or again.launch_released or again.launch_adopted or again.launch_held)

        live = _live(spawners)
        recorded = await _recorded(board, cards)
        assert {card: workers[0] for card, workers in live.items()} == recorded  # every live worker is on its run
        assert all(len(workers) == 1 for workers in live.values()) and set(live) == set(cards)
        assert all(identity.is_alive(pid, identity.fingerprint(pid)) for pid, _sid in recorded.values())
        for card in cards:  # a launch released as never started never ran
            if any(e.kind == "launch_released" for e in await board.events(card)):
                assert not (tmp_path / f"ran-{claimed[card].id}").exists()
    finally:
        await board.close()


async def _one_cut_short_launch(world, tmp_path, children):
    """Home A's dispatcher killed after its worker started, unrecorded; a live process
    that is not it (``sleep``). Returns (board, card, that process, A's launch token)."""
    (home_a, home_b), location, gate, spawners = world
    command = f"{until(gate)} exit 0"
    board = await open_shared_board(location, home_b, FakeClock(time.time() + GRACE + 5))
    [card] = [t.id for t in await tr.create_tasks(board, [NewTask("card", assignee="w")])]
    _kill_a_mid_launch(home_a, location, "after_spawn", command)
    spawners += [RegistrySpawner(home_a, _settings(command)), RegistrySpawner(home_b, _settings(command))]
    other = children(["sleep", "100"])
    wait_until(lambda: identity.fingerprint(other.pid) != identity.UNVERIFIED, what="the sleep's identity")
    return board, card, other, command


async def _forge_the_claim(board, card: str, pid: int, fp: str | None) -> None:
    """The claim's dispatcher as ``pid`` (its lock), and its recorded start time ``fp``
    (None: as claimed). Pids are not reused on demand: this stands for a reused one."""
    from engine.kanban.hosts import hostname

    lock = f"{hostname()}:{pid}"

    async def forge(conn) -> None:
        await conn.execute("UPDATE tasks SET claim_lock = ? WHERE id = ?", (lock, card))
        await conn.execute("UPDATE task_runs SET claim_lock = ? WHERE task_id = ?", (lock, card))
        if fp is not None:
            [(event_id, payload)] = await conn.execute_fetchall(
                "SELECT id, payload FROM task_events WHERE task_id = ? AND kind = 'claimed'", (card,))
            await conn.execute("UPDATE task_events SET payload = ? WHERE id = ?",
                               (json.dumps({**json.loads(payload), "launcher_started_at": fp}), event_id))

    await board.atomic(forge)


async def test_a_launch_whose_home_s_dispatcher_still_runs_is_left_to_it(world, tmp_path, children):
    """While the claiming dispatcher (its pid and start time) still runs, it records its
    own launch: another home neither holds nor releases it, and starts nothing beside it."""
    (home_a, home_b), _location, _gate, spawners = world
    board, card, launcher, command = await _one_cut_short_launch(world, tmp_path, children)
    try:
        await _forge_the_claim(board, card, launcher.pid, identity.fingerprint(launcher.pid))
        b = dispatcher(board, home_b, _settings(command), spawners[1])
        quiet = await b.tick()
        assert not (quiet.launch_held or quiet.launch_released or quiet.spawned or quiet.warnings)
        assert not [e for e in await board.events(card) if e.kind.startswith("launch_")]
        launcher.kill()
        launcher.wait()
        assert (await b.tick()).launch_held == (card,)  # gone: now held for home A
        assert {c: len(w) for c, w in _live(spawners).items()} == {card: 1}
    finally:
        await board.close()


async def test_a_person_cannot_take_back_a_cut_short_launch_whose_dispatcher_s_pid_now_names_another_process(
        world, tmp_path, children):
    """The claiming dispatcher is judged by its pid *and* the start time its claim
    recorded: a pid reused by another process does not make its launch look in flight.
    Before: the pid alone was asked, the reclaim went through, and the worker ran on
    unseen."""
    (home_a, home_b), location, _gate, spawners = world
    board, card, other, _command = await _one_cut_short_launch(world, tmp_path, children)
    try:
        await _forge_the_claim(board, card, other.pid, None)  # the dead dispatcher's start time stays
        refused = subprocess.run(cli_argv(home_b, "--db", location, "reclaim", card), capture_output=True,
                                 text=True, timeout=120)
        assert refused.returncode == 1, refused.stdout
        assert "was cut short and is not resolved yet" in refused.stderr
        assert (await board.get_task(card)).status == "running"
    finally:
        await board.close()
