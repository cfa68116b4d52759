"""Across the parts, end to end: a card dispatched through the real CLI spawns a real
worker (a process session); the app's board opens that worker's output in the
processes pane."""

from __future__ import annotations

import json

from engine.config import load_config
from engine.processes import ProcessRegistry
from hermes_tui.app import HermesApp
from tests.conftest import run_cli
from tests.support import wait_until_pilot as wait_for
from tests.test_kanban_pane import select
from widgets.board.board_pane import BoardPane
from widgets.common.command_bar import CommandBar
from widgets.processes.processes_pane import ProcessesPane

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
            await wait_for(pilot, lambda: app.active_pane_id == "processes")
            await wait_for(pilot, lambda: processes.selected is not None and processes.selected.id == worker.id)
            await wait_for(pilot, lambda: "worker-says-hello" in processes.output.text())
            assert processes.output.session_id == worker.id
            assert processes.table.cursor_row > 0  # it moved off the newest session
    finally:
        for session_id in (worker.id, other):
            assert registry.kill(session_id, grace=0.5).ok


# Markup-looking text as outside text carries it: a closing tag with nothing open, a
# style, a link, a lone bracket. Rich would parse each (the first one raises).
MARKUP = "[ [/] [bold]x [link=https://e.io]y"
# A file name cannot hold "/": the entry name carries the rest.
MARKUP_NAME = "[ [bold]x [link=e]y"


def screen_text(app) -> str:
    """What the terminal shows now, line by line (the composed screen, as plain text)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_outside_text_that_looks_like_markup_is_shown_literally(home):
    """A session command and output line, a card title (made by the real CLI, so the
    board's internals can change), a scratch entry name and a prune-log record, all
    holding markup: the app starts and shows every one as typed (before: MarkupError
    at every start while such a session was listed)."""
    from engine.scratch.audit import AuditLog
    from tests.support.scratch import make_entry, target_of
    from widgets.prune_log.prune_log_pane import PruneLogPane
    from widgets.scratch.scratch_pane import ScratchPane

    root = str(home.root)
    command = f"echo '{MARKUP}'; sleep 30"
    started = run_cli("--home", root, "run", "--bg", "--", command)
    assert started.returncode == 0, started.stderr
    created = run_cli("--home", root, "kanban", "create", MARKUP)
    assert created.returncode == 0, created.stderr
    make_entry(target_of(home).scratch_dir, MARKUP_NAME, {"f.txt": "x"})
    home.prune_log.parent.mkdir(parents=True, exist_ok=True)
    with AuditLog(home.prune_log) as audit:
        audit.removed(f"/s/log {MARKUP}", 10)
    settings = load_config(home.config_file)
    registry = ProcessRegistry(home, settings)
    try:
        app = HermesApp(home, settings, home_label="~/.hermes")
        async with app.run_test(size=(240, 60)) as pilot:
            processes = app.query_one(ProcessesPane)
            await wait_for(pilot, lambda: MARKUP in processes.output.text())
            await wait_for(pilot, lambda: command in screen_text(app) and f"\n│ {MARKUP} " in screen_text(app))
            scratch = app.query_one(ScratchPane)
            await wait_for(pilot, lambda: scratch.last_survey is not None)
            await pilot.press("3")
            await wait_for(pilot, lambda: MARKUP_NAME in screen_text(app))
            log = app.query_one(PruneLogPane)
            await pilot.press("4")
            await wait_for(pilot, lambda: log.records and f"/s/log {MARKUP}" in screen_text(app))
            # A foreground command names itself in the command bar's title.
            foreground = "sleep 30 # [/] [b]x ["
            await pilot.press("colon")
            app.query_one(CommandBar).value = foreground
            await pilot.press("enter")
            await wait_for(pilot, lambda: f"running: {foreground} " in screen_text(app))
            await pilot.press("1")
            # The board is another part's: its title rendering may land separately.
            await wait_for(pilot, lambda: f" {MARKUP} " in screen_text(app).split("2 Processes")[0])
    finally:
        for session in registry.list(include_finished=False):
            registry.kill(session.id, grace=0.5)
