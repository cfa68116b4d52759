"""Crash-consistent launches: a dispatcher stopped at any step of a launch batch leaves
runs ``launching`` with their launch token; the next tick finds each launch by its
token and adopts its worker, releases a card whose worker never started (no failure
counted), or holds a card it cannot tell about. Never a second worker beside a live one.

The dispatcher that dies is a real process killing itself at the step
(tests/support/launch_driver.py); workers are real sessions paced by gate files; the
clock of the ticks after is moved past the crash grace relative to the real time of
the claim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from engine import identity
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.processes import session as sess
from tests.support import wait_until, wait_until_async
from tests.support.commands import until
from tests.support.kanban import FakeClock, cli_argv, dispatcher, kanban_settings

GRACE = 60.0
DRIVER = Path(__file__).resolve().parent / "support" / "launch_driver.py"


def _driver(home, url, step: str, command: str, env=None) -> None:
    proc = subprocess.run([sys.executable, str(DRIVER), str(home.root), url or "-", step, str(GRACE), command],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == -9, (proc.returncode, proc.stderr[-2000:])


@pytest.fixture
def launch_world(home, board_backend, open_test_board, tmp_path):
    """(home, url, gate, open_after): ``open_after()`` opens the board on a clock past the
    crash grace and a fresh spawner; every worker is released by the gate afterwards."""
    gate = tmp_path / "gate"
    opened = []

    async def open_after(settings, clock=None):
        board = await open_test_board(clock or FakeClock(time.time() + GRACE + 5), board_backend)
        spawner = RegistrySpawner(home, settings)
        opened.append(spawner)

        async def lock_free() -> bool:
            async with board.dispatch_guard() as held:
                return held

        # The killed dispatcher's lock goes with it, but not at once: on PostgreSQL its
        # server session ends only once the server notices the client is gone (a loaded
        # machine: a tick then was skipped as locked, and found nothing to resolve).
        await wait_until_async(lock_free, what=lambda: "the killed dispatcher's lock let go (held by "
                               f"{_holders_of_the_dispatch_lock(home)})")
        return board, spawner, dispatcher(board, home, settings, spawner)

    yield home, board_backend, gate, open_after
    gate.touch()
    for spawner in opened:
        for s in spawner.registry.list(include_finished=False):
            spawner.registry.wait(s.id, timeout=30)


def _command(tmp_path: Path, gate: Path) -> str:
    """Notes that the worker's command ran (one file per run), then waits for the gate."""
    return f'touch "{tmp_path}/ran-$HERMES_KANBAN_RUN_ID"; {until(gate)} exit 0'


def _settings(command: str):
    return kanban_settings({"w": command}, max_in_progress=100, crash_grace_seconds=GRACE)


async def _cards(home, url, open_test_board, n: int) -> list[str]:
    board = await open_test_board(FakeClock(), url)
    made = await tr.create_tasks(board, [NewTask(f"card {i}", assignee="w") for i in range(n)])
    await board.close()
    return [t.id for t in made]


def _live_workers(spawner) -> Counter:
    """Running worker sessions per card."""
    return Counter(s.owner.removeprefix("kanban:") for s in spawner.registry.list(include_finished=False))


async def test_a_launch_cut_short_after_its_spawn_is_adopted_not_called_crashed(launch_world, open_test_board,
                                                                               tmp_path):
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    cards = await _cards(home, url, open_test_board, 3)
    _driver(home, url, "after_spawn", command)
    board, spawner, disp = await open_after(_settings(command))
    assert _live_workers(spawner) == Counter(cards)
    assert [(await board.get_task(c)).worker_pid for c in cards] == [None] * 3  # none recorded
    result = await disp.tick()
    assert not result.crashed and not result.spawned  # (before: 3 crashed, 3 second workers)
    assert sorted(result.launch_adopted) == sorted(cards)
    for card in cards:
        task = await board.get_task(card)
        run = (await board.runs_of(card))[-1]
        meta = json.loads((spawner.registry.session_dir(run.session_id) / sess.META_FILE).read_text())
        assert (task.status, run.status) == ("running", "running")
        assert (task.worker_pid, task.worker_started_at) == (meta["pid"], meta["fingerprint"])
        assert identity.is_alive(task.worker_pid, task.worker_started_at)
        events = [e for e in await board.events(card) if e.kind == "launch_adopted"]
        assert len(events) == 1 and events[0].payload["pid"] == meta["pid"]
    again = await disp.tick()
    assert not (again.crashed or again.spawned or again.launch_adopted or again.reclaimed)
    assert _live_workers(spawner) == Counter(cards)
    assert [(await board.get_task(c)).consecutive_failures for c in cards] == [0, 0, 0]


@pytest.mark.parametrize("step", ["before_spawn", "unrecorded", "ungated", "ungated, looked up at once"])
async def test_a_launch_cut_short_before_its_worker_ran_is_released_once_without_a_failure(
        launch_world, open_test_board, tmp_path, step):
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    [card] = await _cards(home, url, open_test_board, 1)
    _driver(home, url, step.partition(",")[0], command)
    board, spawner, disp = await open_after(_settings(command))
    [first] = await board.runs_of(card)
    # "looked up at once": its wrapper may still be at its gate: the lookup waits for it.
    if step == "ungated":
        # Its spawner is gone: the wrapper reads the end of its gate, marks it and leaves.
        folder = spawner.registry.session_dir(first.session_id)
        wait_until(lambda: (folder / sess.NOT_STARTED_FILE).exists(), what="the wrapper's not_started mark")
        # Had it been adopted while still at its gate, its exit would say the same.
        assert spawner.exit_of(first.session_id, None).started is False
    result = await disp.tick()
    assert not result.crashed  # (before: crashed, a failure counted)
    assert result.launch_released == (card,)
    assert [s.task_id for s in result.spawned] == [card]  # launched again, at once
    runs = await board.runs_of(card)
    assert [(r.status, r.outcome) for r in runs] == [("ended", "not_started"), ("running", None)]
    task = await board.get_task(card)
    assert (task.consecutive_failures, task.last_failure_error) == (0, None)
    assert [e.kind for e in await board.events(card)].count("launch_released") == 1
    again = await disp.tick()
    assert not (again.launch_released or again.spawned or again.crashed)
    assert _live_workers(spawner) == Counter([card])
    # The first launch's command never ran, and never will: a late spawn cannot use its id.
    wait_until(lambda: (tmp_path / f"ran-{runs[1].id}").exists(), what="the second worker's command")
    assert not (tmp_path / f"ran-{first.id}").exists()
    with pytest.raises(Exception, match="exists already"):
        spawner.registry.spawn("true", session_id=first.session_id)


@pytest.mark.parametrize("damage", ["unverified_fingerprint", "unreadable_meta"])
async def test_a_launch_whose_worker_cannot_be_verified_is_held_and_nothing_spawned(
        launch_world, open_test_board, tmp_path, damage):
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    [card] = await _cards(home, url, open_test_board, 1)
    _driver(home, url, "after_spawn", command)
    clock = FakeClock(time.time() + GRACE + 5)
    board, spawner, disp = await open_after(_settings(command), clock)
    [run] = await board.runs_of(card)
    meta_file = spawner.registry.session_dir(run.session_id) / sess.META_FILE
    meta = json.loads(meta_file.read_text())
    if damage == "unverified_fingerprint":  # a spawn that could not read its child's identity
        meta_file.write_text(json.dumps({**meta, "fingerprint": identity.UNVERIFIED}))
    else:
        meta_file.write_text(json.dumps(meta)[:40])
    for _ in range(3):
        result = await disp.tick()
        assert not (result.crashed or result.spawned or result.launch_adopted or result.launch_released)
        assert not result.reclaimed  # its claim is kept fresh while it is held
        assert result.launch_held == (card,)
        clock.advance(_settings(command).kanban.claim_ttl_seconds + 1)
        assert any(w.startswith(f"{card}: its launch was never recorded") and "card held" in w
                   for w in result.warnings)
    task = await board.get_task(card)
    [run] = await board.runs_of(card)
    assert (task.status, run.status, task.worker_pid) == ("running", "launching", None)
    assert [e.kind for e in await board.events(card)].count("launch_held") == 1
    assert task.consecutive_failures == 0
    assert identity.is_alive(meta["pid"], meta["fingerprint"])  # spared: nothing signalled it


async def test_another_host_s_launching_run_is_not_resolved_here(launch_world, open_test_board, tmp_path):
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    [card] = await _cards(home, url, open_test_board, 1)
    _driver(home, url, "before_spawn", command, env={**os.environ, "HERMES_KANBAN_HOST_ID": "elsewhere"})
    board, spawner, disp = await open_after(_settings(command))
    result = await disp.tick()
    assert not (result.launch_released or result.launch_adopted or result.launch_held or result.spawned)
    [run] = await board.runs_of(card)
    assert run.status == "launching"
    assert not spawner.registry.session_dir(run.session_id).exists()  # not even fenced from here


# -- a real dispatcher (kanban dispatch / kanban daemon) signalled by its first worker ------

CARDS = 20
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "HUP": signal.SIGHUP, "KILL": signal.SIGKILL}
# What each dispatcher does once the signal takes effect (after its batch is recorded).
EXITS = {"dispatch": {"INT": 130, "TERM": -signal.SIGTERM, "HUP": -signal.SIGHUP, "KILL": -signal.SIGKILL},
         "daemon": {"INT": 0, "TERM": 0, "HUP": -signal.SIGHUP, "KILL": -signal.SIGKILL}}


def _signalling_command(tmp_path: Path, gate: Path, sig: str) -> str:
    """The first worker to start signals the process that spawned it (its session's
    ``spawner_pid``: the dispatcher) while the batch's other launches go on."""
    meta = '"$HERMES_HOME/processes/$HERMES_PROCESS_ID/meta.json"'
    spawner = f"$(sed -n 's/.*\"spawner_pid\": \\([0-9]*\\).*/\\1/p' {meta})"
    return (f'if mkdir "{tmp_path}/first" 2>/dev/null; then kill -{sig} "{spawner}"; fi; '
            + _command(tmp_path, gate))


def _write_config(home, command: str, **kanban) -> None:
    lines = ["kanban:", f"  max_in_progress: {CARDS}", f"  crash_grace_seconds: {GRACE:g}"]
    lines += [f"  {key}: {value}" for key, value in kanban.items()]
    lines += ["  profiles:", "    w:", f"      command: {json.dumps(command)}"]
    home.config_file.write_text("\n".join(lines) + "\n")


def _holders_of_the_dispatch_lock(home) -> dict[int, str]:
    from engine.kanban.dispatcher import lock_path_for

    wanted = str(lock_path_for(home.kanban_db))
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
            if any(os.readlink(f"/proc/{name}/fd/{fd}") == wanted for fd in fds):
                found[int(name)] = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:300]
        except OSError:
            continue
    return found


async def _after_the_dispatcher(home, url, open_after, cards, command, recorded_by_it: bool) -> None:
    """Ticks after the crash grace: one live worker per card, each the one its run
    records, nothing called crashed, no failure counted; the runs say what happened."""
    board, spawner, disp = await open_after(_settings(command))
    if recorded_by_it:  # the signal waited for the batch: every launch was recorded by its dispatcher
        for card in cards:
            [run] = await board.runs_of(card)
            assert (run.status, run.outcome) == ("running", None) and run.worker_pid, (card, run)
    async def unlocked_tick():
        result = await disp.tick()
        return None if result.skipped_locked else result

    for _ in range(2):
        # A child the killed dispatcher was forking may hold its lock's descriptor until
        # it execs (its spawn folder has no record yet): that passes within moments.
        result = await wait_until_async(unlocked_tick, what=lambda: "the dispatch lock free (held by "
                                        f"{_holders_of_the_dispatch_lock(home)})")
        assert not (result.crashed or result.reclaimed or result.launch_held), result
    live = _live_workers(spawner)
    if live != Counter(cards):  # say what the board and the sessions say of each card that differs
        odd = [c for c in cards if live[c] != 1]
        seen = {c: ((await board.get_task(c)).status, [(r.status, r.outcome, r.session_id, r.worker_pid)
                                                        for r in await board.runs_of(c)]) for c in odd}
        sessions = {s.id: (s.owner, s.status, s.exit_code) for s in spawner.registry.list()}
        raise AssertionError(f"cards with other than one live worker: {seen}; sessions: {sessions}")
    by_session = {s.id: s for s in spawner.registry.list(include_finished=False)}
    for card in cards:
        task = await board.get_task(card)
        runs = await board.runs_of(card)
        assert task.consecutive_failures == 0
        assert [r.outcome for r in runs[:-1]] == ["not_started"] * (len(runs) - 1)  # released, never run
        current = runs[-1]
        assert (current.status, current.id) == ("running", task.current_run_id)
        session = by_session[current.session_id]
        assert (current.worker_pid, current.worker_started_at) == (session.pid, session.fingerprint)
        # Each run says what happened to it: recorded by its dispatcher (spawned) or found
        # again (launch_adopted), or released as never started (launch_released; also a
        # recorded one whose wrapper then ended at its gate).
        said = {r.id: [e.kind for e in await board.events(card) if e.run_id == r.id] for r in runs}
        for run in runs:
            recorded = ("spawned" in said[run.id]) + ("launch_adopted" in said[run.id])
            assert ("launch_released" in said[run.id]) == (run.outcome == "not_started"), said
            assert recorded == 1 or (recorded == 0 and run.outcome == "not_started"), said


@pytest.mark.slow
@pytest.mark.parametrize("sig", list(SIGNALS))
@pytest.mark.parametrize("verb", ["dispatch", "daemon"])
async def test_a_dispatcher_signalled_during_a_20_card_launch_leaves_one_worker_per_card(
        launch_world, open_test_board, tmp_path, verb, sig):
    home, url, gate, open_after = launch_world
    command = _signalling_command(tmp_path, gate, sig)
    _write_config(home, command)
    cards = await _cards(home, url, open_test_board, CARDS)
    env = {**os.environ, **({"HERMES_KANBAN_DATABASE_URL": url} if url else {})}
    argv = cli_argv(home, verb, *(["--interval", "0.2"] if verb == "daemon" else []))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "first").is_dir()
    assert proc.returncode == EXITS[verb][sig], err[-2000:]
    assert "Traceback" not in err
    await _after_the_dispatcher(home, url, open_after, cards, command, recorded_by_it=sig != "KILL")


# -- the app as the dispatcher: SIGHUP, or its terminal closed, during a 20-card launch -----


def _drain(master: int, until_gone: subprocess.Popen, screen: bytearray) -> None:
    """Keep reading the app's terminal (so it never blocks on a full pty) until it exits."""
    import select

    deadline = time.monotonic() + 120
    while until_gone.poll() is None:
        assert time.monotonic() < deadline, "the app never exited"
        if select.select([master], [], [], 0.05)[0]:
            try:
                screen.extend(os.read(master, 65536))
            except OSError:
                return


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGHUP", "terminal closed"])
async def test_the_app_stopped_during_a_20_card_launch_records_it_first(launch_world, open_test_board, tmp_path,
                                                                        how):
    import fcntl
    import struct
    import termios

    home, url, gate, open_after = launch_world
    command = (_signalling_command(tmp_path, gate, "HUP") if how == "SIGHUP"
               else f'mkdir "{tmp_path}/first" 2>/dev/null; ' + _command(tmp_path, gate))
    _write_config(home, command, dispatch="true", dispatch_interval_seconds="0.5")
    cards = await _cards(home, url, open_test_board, CARDS)
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", **({"HERMES_KANBAN_DATABASE_URL": url} if url else {})}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root)], stdin=slave,
                            stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen = bytearray()
    try:
        if how == "terminal closed":  # the moment its first worker runs, the app's terminal goes away
            import select

            deadline = time.monotonic() + 120
            while not (tmp_path / "first").is_dir():
                assert time.monotonic() < deadline and proc.poll() is None, bytes(screen[-2000:])
                if select.select([master], [], [], 0.01)[0]:
                    screen.extend(os.read(master, 65536))
            os.close(master)
            master = None
            proc.wait(timeout=120)
        else:
            _drain(master, proc, screen)
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGHUP
    await _after_the_dispatcher(home, url, open_after, cards, command, recorded_by_it=True)


@pytest.mark.parametrize("verb", ["reclaim", "archive"])
async def test_a_card_taken_by_a_person_while_its_worker_launches_has_that_worker_stopped_at_once(
        launch_world, open_test_board, tmp_path, verb):
    """``kanban reclaim`` (or ``archive``) run by a person between the claim and the record:
    it had no pid to stop; the record finds the run taken and stops the worker then, so
    the card's next worker never runs beside it (before: it ran on until the
    terminal-worker reaper's grace)."""
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    [card] = await _cards(home, url, open_test_board, 1)
    env = {**os.environ, **({"HERMES_KANBAN_DATABASE_URL": url} if url else {})}

    class PersonActsMidLaunch(RegistrySpawner):
        def launch(self, launch):
            worker = super().launch(launch)
            done = subprocess.run(cli_argv(home, verb, launch.task_id), capture_output=True, text=True, env=env,
                                  timeout=120)
            assert done.returncode == 0, done.stderr
            return worker

    board = await open_test_board(FakeClock(), url)
    settings = _settings(command)
    spawner = PersonActsMidLaunch(home, settings)
    result = await dispatcher(board, home, settings, spawner).tick()
    [spawned] = result.spawned
    [run] = await board.runs_of(card)
    assert run.outcome == ("reclaimed" if verb == "reclaim" else "archived")
    assert not identity.is_alive(spawned.pid, run.worker_started_at)  # stopped by this tick
    assert result.reaped_terminal_workers == (card,)
    assert "terminal_worker_reaped" in [e.kind for e in await board.events(card)]
    if verb == "reclaim":
        plain = RegistrySpawner(home, settings)
        again = await dispatcher(board, home, settings, plain).tick()
        assert [s.task_id for s in again.spawned] == [card]
        assert _live_workers(plain) == Counter([card])
        gate.touch()
        plain.registry.wait(again.spawned[0].session_id, timeout=30)


async def test_a_released_launch_neither_counts_nor_breaks_a_protocol_violation_streak(home, open_test_board,
                                                                                     board_backend):
    from engine.kanban import breaker

    board = await open_test_board(FakeClock(), board_backend)
    [card] = await tr.create_tasks(board, [NewTask("streaky", assignee="w")])

    async def runs(conn):
        for outcome in ("protocol_violation", "not_started", "rate_limited", "protocol_violation", "not_started"):
            await conn.execute("INSERT INTO task_runs (task_id, profile, status, started_at, ended_at, outcome) "
                               "VALUES (?, 'w', 'ended', 1, 2, ?)", (card.id, outcome))
        return await breaker.protocol_violation_streak(conn, card.id)

    assert await board.atomic(runs) == 2


@pytest.mark.parametrize("verb", ["reclaim", "archive"])
async def test_a_person_cannot_take_back_a_launch_its_dead_dispatcher_left_unresolved(
        launch_world, open_test_board, tmp_path, verb):
    """The gap a person's reclaim or archive left: after a dispatcher was killed in the
    middle of its launch and before any tick resolved it, the run had no pid, so taking
    the card back closed it and left its worker running unseen. Now the change is refused
    in one line (nothing changes, nothing is signalled) until a tick found the worker;
    then it goes through and stops that worker."""
    home, url, gate, open_after = launch_world
    command = _command(tmp_path, gate)
    [card] = await _cards(home, url, open_test_board, 1)
    _driver(home, url, "after_spawn", command)
    board, spawner, disp = await open_after(_settings(command))
    [worker] = spawner.registry.list(include_finished=False)
    refused = subprocess.run(cli_argv(home, verb, card), capture_output=True, text=True, timeout=120,
                             env={**os.environ, **({"HERMES_KANBAN_DATABASE_URL": url} if url else {})})
    assert refused.returncode == 1
    assert "cut short and is not resolved yet" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    task = await board.get_task(card)
    assert task.status == "running" and identity.is_alive(worker.pid, worker.fingerprint)
    assert (await disp.tick()).launch_adopted == (card,)
    done = subprocess.run(cli_argv(home, verb, card), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **({"HERMES_KANBAN_DATABASE_URL": url} if url else {})})
    assert done.returncode == 0, done.stderr
    await wait_until_async(lambda: not identity.is_alive(worker.pid, worker.fingerprint), timeout=60,
                           what="the adopted worker stopped by the change")
