"""The demo board is built by real engine operations: real workers complete cards,
one crashes twice into blocked with its last words, one is held back."""

from __future__ import annotations

from engine import identity
from engine.config import load_config
from engine.kanban.backends.sqlite.store import Board
from engine.kanban.dispatcher import Dispatcher
from engine.kanban.registry_spawner import RegistrySpawner
from hermes_tui.demo import kanban as demo_kanban


async def test_demo_board_is_lived_in_and_its_cleanup_stops_workers(home):
    home.config_file.write_text("ui:\n  refresh_seconds: 1\n")
    await __import__("asyncio").to_thread(demo_kanban.build, home)
    text = home.config_file.read_text()
    assert text.startswith("ui:\n  refresh_seconds: 1\n") and "kanban:" in text  # appended, not replaced
    settings = load_config(home.config_file)
    board = await Board.open(home.kanban_db)
    try:
        tasks = {t.title: t for t in await board.list_tasks()}
        assert tasks["Write the release notes"].status == "done"
        assert tasks["Publish the release notes"].status == "done"  # promoted, then worked
        blocked = tasks["Migrate the staging database"]
        assert blocked.status == "blocked" and blocked.consecutive_failures == 2
        assert "Worker's last output: 'picked up" in blocked.last_failure_error
        assert "connection refused" in blocked.last_failure_error
        kinds = [e.kind for e in await board.events(blocked.id)]
        assert kinds[-2:] == ["crashed", "gave_up"]
        assert tasks["Triage incoming bug reports"].status == "ready"
        assert tasks["Refactor the auth module"].status == "ready"
        result = await Dispatcher(board, home=home, settings=settings, spawner=RegistrySpawner(home, settings)).tick()
        assert [s.task_id for s in result.spawned] == [tasks["Refactor the auth module"].id]
        assert result.held_back == ""
        assert [(s.task_id, s.reason) for s in result.skipped] == [
            (tasks["Triage incoming bug reports"].id, "skipped_unassigned")]
        worker = await board.get_task(tasks["Refactor the auth module"].id)
        assert identity.is_alive(worker.worker_pid, worker.worker_started_at)
    finally:
        await board.close()
    demo_kanban.cleanup(home)
    assert not identity.is_alive(worker.worker_pid, worker.worker_started_at)


async def test_the_app_s_own_dispatcher_completes_the_demo_s_slow_card(home, tmp_path, monkeypatch):
    """The demo's last card is left for the app: its worker (a real CLI `complete`, while
    the app holds the board open) must finish it. It used to be refused with "run N is
    not the current run": the app's second Board.open read the header with Python's
    open()/close(), which dropped the app's SQLite locks, so the worker's CLI process
    deleted the -wal/-shm under the app and the two saw different boards."""
    import os

    from hermes_tui.app import HermesApp
    from tests.support import wait_until_pilot
    from widgets.board.board_pane import BoardPane

    # The slow card's worker works until the test lets it finish (a gate file, not 12 s).
    gate = tmp_path / "gate"
    monkeypatch.setattr(demo_kanban, "DEMO_WORKER", demo_kanban.DEMO_WORKER.replace(
        f"sleep {demo_kanban.SLOW_WORK_SECONDS}", f"while [ ! -e {gate} ]; do sleep 0.05; done"))
    await __import__("asyncio").to_thread(demo_kanban.build, home)
    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        try:
            def slow_card():
                return next((v.task for v in pane.cards.values() if v.task.title == "Refactor the auth module"), None)

            # Its worker runs while the app holds the board open; then it completes the card.
            await wait_until_pilot(pilot, lambda: (card := slow_card()) is not None and card.status == "running",
                                   what="the slow card running")
            gate.touch()
            await wait_until_pilot(pilot, lambda: (card := slow_card()) is not None and card.current_run_id is None
                                   and card.status in ("done", "ready", "blocked"), what="the slow card's run ended")
            card = slow_card()
            assert card is not None and card.status == "done", card
            details = await pane.service.details(card.id)
            assert [e.kind for e in details.events if e.kind in ("completed", "crashed", "protocol_violation")] == [
                "completed"]
            fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}")]
            assert not [f for f in fds if "board.db" in f and f.endswith("(deleted)")]
        finally:
            demo_kanban.cleanup(home)
