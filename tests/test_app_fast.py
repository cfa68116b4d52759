"""Issue 12, fast: the demo is on screen before its home is built, with a visible
"starting…", and its panes fill in as the builders (in a thread) write the home."""

from __future__ import annotations

import threading
import time

from engine.config import load_config
from hermes_tui.app import HermesApp
from hermes_tui.demo import cleanup_demo_home, fill_demo_home, prepare_demo_home
from widgets.board_pane import BoardPane
from widgets.processes_pane import ProcessesPane

GENEROUS = 120.0  # seconds: the builders start real workers on a loaded machine


async def _until(pilot, condition, what: str, timeout: float = GENEROUS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await pilot.pause(0.05)


def _header(app) -> str:
    return str(app.query_one("#header").render())


async def test_the_demo_draws_before_its_home_is_built_and_fills_in(tmp_path):
    gate = threading.Event()  # the builders wait behind it: the test decides when they run

    def fill(home) -> None:
        if not gate.wait(GENEROUS):
            raise AssertionError("the test never opened the gate")
        fill_demo_home(home)

    home = prepare_demo_home(tmp_path / "hermes-demo-test")
    app = HermesApp(home, load_config(home.config_file), demo=True, fill_home=fill)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            # Drawn, with nothing built yet: the header says the demo is starting.
            assert "starting…" in _header(app)
            assert not app.home_filled.is_set()
            board, processes = app.query_one(BoardPane), app.query_one(ProcessesPane)
            assert not board.cards and not processes.sessions
            gate.set()
            await _until(pilot, app.home_filled.is_set, "the home filled")
            await _until(pilot, lambda: "starting…" not in _header(app), "the header lost its 'starting…'")
            await _until(pilot, lambda: len(board.cards) >= 6, "the board's cards shown")
            await _until(pilot, lambda: any(s.running for s in processes.sessions.values()),
                         "the demo's running processes shown")
            await _until(pilot, lambda: app.dispatch_loop.ticks > 0, "the app's own dispatcher ticking")
    finally:
        gate.set()
        app.home_filled.wait(GENEROUS)
        cleanup_demo_home(home)
