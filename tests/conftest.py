"""Fixtures shared by every test module: a fresh home per test, and cleanup of the
child processes a test starts (so no test leaves a process behind)."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from engine.config import Settings
from engine.home import HomeLayout
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parent.parent
__all__ = ["REPO", "run_cli"]  # run_cli lives in tests.support; re-exported for the modules that import it here

# No test may start a real automatic scratch pass by accident: not in this process
# (the once-per-process flag is spent) and not in the CLI subprocesses tests run (they
# inherit HERMES_AUTO_PRUNE=0). Tests of the schedule itself reset both explicitly.
os.environ["HERMES_AUTO_PRUNE"] = "0"
from engine.scratch import schedule as _schedule  # noqa: E402

# The app gives the background key a second default inside tmux or screen: a suite run
# in a tmux window must see the same keys as one run anywhere else (tests set them).
os.environ.pop("TMUX", None)
os.environ.pop("STY", None)

_schedule.mark_started()

# A guest home's attention state (notice claims, dismissals, notify.log) lives outside
# it, in the user's state folder (engine.attention.state.state_dir): the suite's go to a
# folder of its own, never the real ~/.local/state. CLI children inherit it.
_STATE_HOME = tempfile.mkdtemp(prefix="hermes-tui-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE_HOME
atexit.register(shutil.rmtree, _STATE_HOME, True)


def _terminal_signals() -> None:
    """The suite's children react to INT and HUP as a terminal's do. A suite started in
    the background (``cmd &`` ignores INT, ``nohup`` ignores HUP) handed those ignores to
    every process it started, and an ignored signal stays ignored across exec: every
    test that sends a Ctrl+C or a closed terminal's HUP failed, 17 of them, in both
    copies of one paired round. The product keeps such inherited ignores, as a program
    started with nohup must; the tests start theirs as a terminal would."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


_terminal_signals()


def _patient_pilot() -> None:
    """Pilot waits after each key and click until every widget on the screen has handled
    its pending messages, and fails after a fixed 30 s. On a loaded machine (two copies
    of the suite on two cores) the app can be starved that long while it is correct:
    the wait stays a wait for that condition, bounded like every wait of the suite
    (tests/support/waiting.py: generous, costs nothing when the condition holds)."""
    from textual.pilot import Pilot

    from tests.support.waiting import DEFAULT_TIMEOUT

    wait_for_screen = Pilot._wait_for_screen

    async def patient(self, timeout: float = 2 * DEFAULT_TIMEOUT) -> bool:
        return await wait_for_screen(self, max(timeout, 2 * DEFAULT_TIMEOUT))

    Pilot._wait_for_screen = patient


_patient_pilot()


@pytest.fixture
def home(tmp_path: Path) -> HomeLayout:
    """A fresh, created home in a temp dir, with hermes-tui's own folder (where its
    board lives) so store tests may open ``home.kanban_db`` directly."""
    layout = HomeLayout(tmp_path / "home").ensure()
    layout.ensure_dir(layout.own_dir)
    return layout


@pytest.fixture(params=["sqlite", "postgres"])
def board_backend(request):
    """Which board a behaviour test runs on: None (the SQLite file of the home) or the
    URL of a fresh PostgreSQL database (dropped after the test)."""
    if request.param == "sqlite":
        yield None
        return
    from tests.support.pg import fresh_database

    with fresh_database() as url:
        yield url


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database for this test (dropped after it)."""
    from tests.support.pg import fresh_database

    with fresh_database() as url:
        yield url


@pytest.fixture
async def open_test_board(home):
    """Opens a board for the test: ``await open_test_board(clock=..., url=...)`` is the
    home's SQLite board, or the PostgreSQL board at ``url``. Every board it opened is
    closed after the test, whatever the test did (closing twice is harmless)."""
    from tests.support.kanban import open_board

    opened = []

    async def open_(clock=None, url: str | None = None):
        board = await open_board(home, clock, url)
        opened.append(board)
        return board

    yield open_
    for board in reversed(opened):
        await board.close()


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def reg(home, settings):
    """The home's process registry; every session still running at the end is killed."""
    from engine.processes import ProcessRegistry

    r = ProcessRegistry(home, settings)
    yield r
    for s in ProcessRegistry(home, settings).list(include_finished=False):
        r.kill(s.id, grace=0.2)
    r.reap()


@pytest.fixture
def children():
    """Start real child processes in their own session; every one is killed (group and
    all) and reaped at the end of the test, whatever the test did."""
    started: list[subprocess.Popen] = []

    def start(argv, **kwargs) -> subprocess.Popen:
        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
