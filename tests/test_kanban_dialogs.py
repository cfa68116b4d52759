"""The board's confirmations act on what they named: the archive, reclaim and
move-a-running-card dialogs show the card's run and worker pid, and the approved action
carries them. If the card moved on to another run while the dialog was open, the
action is refused with one line and nothing is signalled. The real app (Pilot), a real
board file, real worker processes (checked alive afterwards)."""

from __future__ import annotations

import sys

import pytest

from engine import identity
from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.workers import claim_lock_here
from tests.support import wait_until_pilot as wait_for
from tests.support import wait_workers
from tests.support.kanban import open_board
from tests.support.notes import capture_notes
from tests.test_kanban_pane import WIDE, make_app, select
from widgets.board.board_pane import BoardPane
from widgets.common.confirm import ConfirmModal


async def _give_run(home: HomeLayout, task_id: str, pid: int) -> int:
    """The card runs under a new run whose worker is ``pid`` (the previous run, if any,
    closed as a dispatcher would close it): what a dialog may not have seen."""
    board = await open_board(home)
    try:
        fp = identity.fingerprint(pid)
        task = await board.get_task(task_id)
        now = board.now()
        async with board.transaction() as conn:
            if task.current_run_id is not None:
                await tr.close_run(conn, task.current_run_id, tr.RunOutcome.RECLAIMED, now, error="stale_lock")
            run_id = (await conn.execute(
                "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, started_at, worker_pid, "
                "worker_started_at) VALUES (?, 'coder', 'running', ?, ?, ?, ?, ?)",
                (task_id, claim_lock_here(), now + 900, now, pid, fp))).lastrowid
            await conn.execute(
                "UPDATE tasks SET status = 'running', claim_lock = ?, claim_expires = ?, started_at = ?, "
                "current_run_id = ?, worker_pid = ?, worker_started_at = ? WHERE id = ?",
                (claim_lock_here(), now + 900, now, run_id, pid, fp, task_id))
        return run_id
    finally:
        await board.close()


async def _new_card(home: HomeLayout) -> str:
    board = await open_board(home)
    try:
        return (await tr.create_task(board, NewTask("long job", assignee="coder"))).id
    finally:
        await board.close()


async def _ask(pilot, app, task_id: str, pid: int, key: str) -> None:
    """Select the card once the pane shows it running under ``pid``, press ``key``: its dialog."""
    pane = app.query_one(BoardPane)
    await wait_for(pilot, lambda: task_id in pane.cards and pane.cards[task_id].task.worker_pid == pid)
    await select(pilot, pane, task_id)
    await pilot.press(key)
    assert isinstance(app.screen, ConfirmModal)


@pytest.mark.parametrize("key", ["r", "a", "greater_than_sign"])  # reclaim, archive, move a running card
async def test_a_dialog_whose_card_changed_run_meanwhile_is_refused_and_signals_nothing(home, children, key):
    first = children([sys.executable, "-c", "import time; time.sleep(600)"])
    second = children([sys.executable, "-c", "import time; time.sleep(600)"])
    task_id = await _new_card(home)
    first_run = await _give_run(home, task_id, first.pid)
    app = make_app(home)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        await _ask(pilot, app, task_id, first.pid, key)
        assert f"run {first_run}, worker pid {first.pid}" in app.screen.body  # what it names

        second_run = await _give_run(home, task_id, second.pid)  # the card moved on meanwhile
        await pilot.press("y")
        await wait_workers(app, ["board-change"])
        await wait_for(pilot, lambda: any("the card changed: look again" in n for n in notes))
        refusal = [n for n in notes if "the card changed" in n]
        assert len(refusal) == 1 and "\n" not in refusal[0]  # one line

    assert first.poll() is None and second.poll() is None  # nobody was signalled
    board = await open_board(home)
    try:
        card = await board.get_task(task_id)
        assert (card.status, card.current_run_id, card.worker_pid) == ("running", second_run, second.pid)
    finally:
        await board.close()


@pytest.mark.parametrize(("key", "status"), [("r", "ready"), ("a", "archived"), ("greater_than_sign", "review")])
async def test_a_dialog_whose_card_did_not_change_acts_on_the_run_it_named(home, children, key, status):
    worker = children([sys.executable, "-c", "import time; time.sleep(600)"])
    task_id = await _new_card(home)
    await _give_run(home, task_id, worker.pid)
    app = make_app(home)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        await _ask(pilot, app, task_id, worker.pid, key)
        await pilot.press("y")
        # The change's own line ("... (running -> ready)"): its worker may not even have
        # started when "y" returns, so waiting for the worker group alone proved nothing.
        await wait_for(pilot, lambda: any(task_id in n and "->" in n for n in notes), timeout=60)
        await wait_workers(app, ["board-change"])
        assert not any("changed" in n for n in notes)
    board = await open_board(home)
    try:
        assert (await board.get_task(task_id)).status == status
    finally:
        await board.close()
