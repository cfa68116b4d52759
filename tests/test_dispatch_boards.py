"""Issue 36, every board every time, the dispatcher's side: the app dispatches every
hermes-tui board of the home (each with its own tick and lock, as ``kanban --board SLUG
daemon`` would), not only the default one, and the board pane shows the ticks of the
board it shows, also after the board switcher (``b``) and back. The family: a part of
the app that drives or shows one board while the home has several.

Real workers (the profile's command runs and exits), a real home with two boards, the
app in-process; no CLI daemon runs."""

from __future__ import annotations

import json

from engine.config import load_config
from hermes_tui.app import HermesApp
from tests.support import run_cli, screen_shown
from tests.support import wait_until_pilot as wait_for
from widgets.board.board_pane import BoardPane
from widgets.board.board_switcher import BoardSwitchScreen

CONFIG = """\
kanban:
  dispatch: true
  dispatch_interval_seconds: 0.2
  profiles:
    w:
      command: 'echo done here'
      complete_on_exit: true
notify:
  bell: false
  desktop: false
  terminal: 'off'
"""


def cli(home, *args) -> str:
    done = run_cli("--home", str(home.root), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def status_on(home, board: str, card: str) -> str:
    return json.loads(cli(home, "kanban", "--board", board, "show", card, "--json"))["status"]


def app_of(home) -> HermesApp:
    home.config_file.write_text(CONFIG)
    return HermesApp(home, load_config(home.config_file), home_label="~/h")


def info(pane) -> str:
    return str(pane.query_one("#board-info").render())


async def test_the_app_dispatches_a_second_own_board_without_any_daemon(home):
    cli(home, "kanban", "create", "on the default board", "--assignee", "w")
    cli(home, "kanban", "boards", "create", "side")
    card = json.loads(cli(home, "kanban", "--board", "side", "create", "Say hello", "--assignee", "w",
                          "--json"))["id"]
    app = app_of(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.service is not None)
        assert card not in pane.cards  # the pane shows the default board
        await wait_for(pilot, lambda: status_on(home, "side", card) == "done", what="the side card done by the app")
        [ticker] = app.dispatch_loop.others.values()
        assert ticker.slug == "side" and ticker.ticks > 0
    runs = json.loads(cli(home, "kanban", "--board", "side", "show", card, "--json"))["runs"]
    assert len(runs) == 1 and runs[0]["outcome"] == "completed"


async def test_the_board_line_and_held_back_reasons_stay_live_after_switching_away_and_back(home):
    cli(home, "kanban", "create", "on the default board")
    cli(home, "kanban", "boards", "create", "side")
    side = json.loads(cli(home, "kanban", "--board", "side", "create", "on the side board", "--json"))["id"]
    app = app_of(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.last_tick_at is not None, what="a first tick shown")
        await pilot.press("b")
        await wait_for(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        await pilot.press("down", "enter")  # default (shown), side
        await wait_for(pilot, lambda: side in pane.cards, what="the side board shown")
        # The side board is dispatched too: its line says its last tick, and it moves.
        await wait_for(pilot, lambda: pane.last_tick_at is not None and "last tick" in info(pane))
        first = pane.last_tick_at
        await wait_for(pilot, lambda: pane.last_tick_at > first, what="the side board's tick advancing")
        assert "board side" in info(pane)
        await pilot.press("b")
        await wait_for(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        await pilot.press("up", "enter")
        await wait_for(pilot, lambda: side not in pane.cards and len(pane.cards) == 1, what="back on default")
        await wait_for(pilot, lambda: pane.last_tick_at is not None)
        back = pane.last_tick_at
        await wait_for(pilot, lambda: pane.last_tick_at > back, what="the default board's tick advancing again")
        assert "last tick" in info(pane)
        # The card's "held back" reason (no assignee) is on its detail line again, as before the switch.
        cards = pane.query_one("#cards-ready")
        cards.focus()
        cards.highlighted = 0
        await wait_for(pilot, lambda: "held back: " in str(pane.query_one("#board-detail").render()),
                       what="the held-back reason back on the detail line")


async def test_which_board_is_shown_is_in_the_pane_title_even_when_the_info_line_is_cut(tmp_path, monkeypatch):
    """On hermes's boards the gateway sentence comes first on the info line and pushed the
    board's name off it, even at 160 columns: the title names the board, on every board."""
    import shutil

    from engine.home import HomeLayout
    from tests.test_attention_boards import HERMES_FIXTURE, NO_HERMES
    from tests.test_hermes_home import tree_state

    root = tmp_path / "hermes"
    shutil.copytree(HERMES_FIXTURE, root)
    hermes = HomeLayout(root)
    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    before = tree_state(root)
    app = HermesApp(hermes, load_config(hermes.config_file), home_label="~/.hermes")
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: "Board · research" in str(pane.border_title), what="research in the title")
        await pilot.press("b")
        await wait_for(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        await pilot.press("up", "up", "enter")  # default, ops, research (shown)
        await wait_for(pilot, lambda: "Board · default" in str(pane.border_title), what="default in the title")
    assert tree_state(root) == before


async def test_a_home_of_one_board_keeps_its_plain_title(home):
    cli(home, "kanban", "create", "the only board")
    app = app_of(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.service is not None and pane.last_tick_at is not None)
        await pilot.pause()
        assert "1 Board" in str(pane.border_title) and "·" not in str(pane.border_title)
