"""Across the parts, end to end: a card dispatched through the real CLI spawns a real
worker (a process session); the app's board opens that worker's output in the
processes pane."""

from __future__ import annotations

import json

from engine.config import load_config
from engine.processes import ProcessRegistry
from hermes_tui.app import HermesApp
from tests.conftest import run_cli
from tests.test_kanban_pane import select, wait_for
from widgets.board_pane import BoardPane
from widgets.processes_pane import ProcessesPane

CONFIG = """\
kanban:
  dispatch: false
  profiles:
    demo: "echo worker-says-hello; sleep 30"
"""


async def test_board_opens_a_real_workers_output_in_the_processes_pane(home):
    home.config_file.write_text(CONFIG)
    root = str(home.root)
    created = run_cli("--home", root, "kanban", "create", "Say hello", "--assignee", "demo", "--json")
    assert created.returncode == 0, created.stderr
    task_id = json.loads(created.stdout)["id"]
    spawned = run_cli("--home", root, "kanban", "dispatch", "--json")
    assert spawned.returncode == 0, spawned.stderr
    assert [s["task_id"] for s in json.loads(spawned.stdout)["spawned"]] == [task_id]
    settings = load_config(home.config_file)
    registry = ProcessRegistry(home, settings)
    worker = next(s for s in registry.list() if s.running)
    # A newer session sorts above the worker: opening the worker must move the selection.
    other = json.loads(run_cli("--home", root, "run", "--bg", "--json", "--", "sleep", "30").stdout)["id"]
    try:
        app = HermesApp(home, settings, home_label="~/.hermes")
        async with app.run_test(size=(160, 48)) as pilot:
            board = app.query_one(BoardPane)
            await wait_for(pilot, lambda: task_id in board.cards)
            await select(pilot, board, task_id)
            await pilot.press("o")
            processes = app.query_one(ProcessesPane)
            await wait_for(pilot, lambda: app._active_pane == "processes")
            await wait_for(pilot, lambda: processes.selected is not None and processes.selected.id == worker.id)
            await wait_for(pilot, lambda: "worker-says-hello" in processes.output.text())
            assert processes.output.session_id == worker.id
            assert processes.table.cursor_row > 0  # it moved off the newest session
    finally:
        for session_id in (worker.id, other):
            assert registry.kill(session_id, grace=0.5).ok
