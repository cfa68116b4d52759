"""Reclaim is one decision: ``kanban reclaim`` takes the run back first (compare-and-set),
then signals the worker of the run it took. So a dispatcher running at the same time
(here a real ``kanban daemon``) never sees that exit as a crash, and reclaiming twice
never blocks the card. Real processes: the daemon, its workers, the CLI."""

from __future__ import annotations

import json
import signal
import sys

import pytest

from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from tests.support import wait_until
from tests.support.cli import run_cli
from tests.support.kanban import (
    CLI,
    FakeClock,
    dispatcher,
    kanban_settings,
    kill_all_workers,
    open_board,
    wait_for_exit,
)


def _config(home: HomeLayout) -> None:
    # The worker notes what the board says at the moment it is signalled, then exits 0.
    worker = (f'trap \'{CLI} show "$HERMES_KANBAN_TASK" --json > "$HERMES_HOME/at-term-$HERMES_KANBAN_RUN_ID.json";'
              " exit 0' TERM; sleep 600 & wait $!")
    home.config_file.write_text(
        "processes:\n  kill_grace_seconds: 60\n"  # time enough for the trap; it ends the worker itself
        "kanban:\n  dispatch_interval_seconds: 0.2\n  crash_grace_seconds: 0\n  failure_limit: 2\n"
        f"  profiles:\n    w: {json.dumps(worker)}\n")


def _card(home: HomeLayout, task_id: str) -> dict:
    out = run_cli("--home", str(home.root), "kanban", "show", task_id, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow
def test_reclaiming_twice_from_the_cli_while_a_daemon_dispatches_counts_no_crash_and_blocks_nothing(home,
                                                                                                   children):
    _config(home)
    made = run_cli("--home", str(home.root), "kanban", "create", "long job", "--assignee", "w", "--json")
    assert made.returncode == 0, made.stderr
    task_id = json.loads(made.stdout)["id"]
    log = home.root / "daemon.log"
    with open(log, "w") as out:
        daemon = children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "daemon"],
                          stdout=out, stderr=out)
    try:
        taken: list[tuple[int, int]] = []
        for _ in range(2):
            card = wait_until(lambda: (c := _card(home, task_id))["status"] == "running" and c["worker_pid"]
                              and c["current_run_id"] not in {r for r, _p in taken} and c,
                              timeout=60, what=lambda: f"a new worker; daemon says {log.read_text()!r}")
            run_id, pid = card["current_run_id"], card["worker_pid"]
            reclaim = run_cli("--home", str(home.root), "kanban", "reclaim", task_id, "--json")
            assert reclaim.returncode == 0, reclaim.stderr
            assert json.loads(reclaim.stdout)["worker"]["terminated"] is True
            taken.append((run_id, pid))
            at_term = json.loads(wait_until(lambda r=run_id: (home.root / f"at-term-{r}.json").is_file()
                                            and (home.root / f"at-term-{r}.json").read_text().strip(),
                                            timeout=60, what="the worker's note"))
            # When the signal came the run was already taken back: the exit is the reclaim's.
            assert at_term["current_run_id"] != run_id
            assert [r["outcome"] for r in at_term["runs"] if r["id"] == run_id] == ["reclaimed"]
        wait_until(lambda: _card(home, task_id)["status"] == "running", timeout=60, what="the card running again")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        run_cli("--home", str(home.root), "kanban", "archive", task_id)  # stops the last worker
    card = _card(home, task_id)
    kinds = [e["kind"] for e in card["events"]]
    assert "crashed" not in kinds and "gave_up" not in kinds and card["consecutive_failures"] == 0
    outcomes = {r["id"]: r["outcome"] for r in card["runs"]}
    assert [outcomes[r] for r, _p in taken] == ["reclaimed", "reclaimed"]


async def test_a_worker_killed_by_hand_through_proc_kill_is_recorded_as_killed_and_held_not_counted(home):
    """``hermes-tui proc kill`` of a worker's session is a person's doing, as a reclaim is:
    the run ends as ``killed``, the card is held (blocked, until someone unblocks it),
    and the breaker counts nothing."""
    settings = kanban_settings({"w": "exec sleep 300"}, crash_grace_seconds=3600)
    board = await open_board(home, FakeClock())
    spawner = RegistrySpawner(home, settings)
    try:
        card = await tr.create_task(board, NewTask("runaway", assignee="w"))
        spawned = (await dispatcher(board, home, settings, spawner).tick()).spawned
        assert [s.task_id for s in spawned] == [card.id]
        killed = run_cli("--home", str(home.root), "proc", "kill", spawned[0].session_id)
        assert killed.returncode == 0, killed.stderr
        wait_for_exit(spawner, spawned[0].session_id)
        result = await dispatcher(board, home, settings, spawner).tick()
        assert not result.crashed and not result.spawned
        now = await board.get_task(card.id)
        assert (now.status, now.consecutive_failures) == ("blocked", 0)
        assert [r.outcome for r in await board.runs_of(card.id)] == ["killed"]
        kinds = [e.kind for e in await board.events(card.id)]
        assert "worker_killed" in kinds and "crashed" not in kinds and "gave_up" not in kinds
    finally:
        kill_all_workers(spawner)
        await board.close()
