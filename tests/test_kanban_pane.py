"""The board pane through the real app (Pilot): keys, modals, the in-app dispatcher,
and SVG snapshots of a fixed board (fixed ids, fixed times via the clock)."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from textual.app import App

from engine.config import load_config
from engine.home import HomeLayout
from engine.kanban import transitions as tr
from engine.kanban.backends.sqlite.store import Board
from engine.kanban.models import NewTask
from engine.kanban.wording import held_back_words, skip_reason
from engine.kanban.workers import NullSpawner, claim_lock_here
from hermes_tui.app import HermesApp
from tests.support import screen_shown, wait_workers
from tests.support import wait_until_pilot as wait_for
from tests.support.cli import run_cli
from tests.support.kanban import FakeClock, open_board
from tests.support.notes import capture_notes
from widgets.board.board_modals import CardDetailsScreen, NewCardScreen
from widgets.board.board_pane import BoardPane
from widgets.common.confirm import ConfirmModal

FIXED_NOW = 1_800_000_000.0
WIDE = (160, 48)
CONFIG = """\
kanban:
  dispatch: false
  profiles:
    coder: 'sleep 30'
    writer: 'sleep 30'
"""


async def seed(home: HomeLayout, url: str | None = None) -> dict[str, str]:
    """A fixed board: one card in every column, fixed ids and times (``url``: on PostgreSQL)."""
    clock = FakeClock(FIXED_NOW - 7200)
    ids = iter(["t_00000001", "t_00000002", "t_00000003", "t_00000004", "t_00000005", "t_00000006",
                "t_00000007"])
    board = await open_board(home, clock, url)
    try:
        made = {}
        for key, new in (("parent", NewTask("Design the schema", assignee="coder", priority=2)),
                         ("ready", NewTask("Write the user guide", assignee="writer",
                                           body="Cover every key.\nAdd screenshots.")),
                         ("running", NewTask("Port the importer", assignee="coder")),
                         ("review", NewTask("Review the CLI help", assignee="writer")),
                         ("blocked", NewTask("Call the billing API", assignee="coder")),
                         ("done", NewTask("Set up CI", assignee="coder"))):
            made[key] = (await tr.create_task(board, new, id_factory=lambda: next(ids))).id
            clock.advance(300)
        made["todo"] = (await tr.create_task(board, NewTask("Migrate old cards", parents=(made["parent"],)),
                                             id_factory=lambda: next(ids))).id
        await tr.review(board, made["review"], "ready for a look")
        await tr.complete(board, made["done"], "green")
        await board.conn.execute(
            "UPDATE tasks SET status = 'blocked', consecutive_failures = 2, last_failure_error = ? WHERE id = ?",
            ("pid 4711 exited with code 1 Worker's last output: 'HTTP 403 from billing'", made["blocked"]))
        async with board.transaction() as conn:
            cur = await conn.execute(
                "INSERT INTO task_runs (task_id, profile, status, claim_lock, worker_pid, worker_started_at, "
                "started_at) VALUES (?, 'coder', 'running', ?, 4242, 'unverified', ?)",
                (made["running"], claim_lock_here(), FIXED_NOW - 600))
            await conn.execute(
                "UPDATE tasks SET status = 'running', claim_lock = ?, worker_pid = 4242, "
                "worker_started_at = 'unverified', current_run_id = ?, started_at = ? WHERE id = ?",
                (claim_lock_here(), cur.lastrowid, FIXED_NOW - 600, made["running"]))
        return made
    finally:
        await board.close()


@pytest.fixture
def fixed_clock(monkeypatch):
    monkeypatch.setattr(BoardPane, "clock", staticmethod(lambda: FIXED_NOW))


def make_app(home: HomeLayout, config: str = CONFIG, url: str | None = None) -> HermesApp:
    if url:  # the same app on a PostgreSQL board
        config = config.replace("kanban:\n", f"kanban:\n  database: {url}\n", 1)
    home.config_file.write_text(config)
    return HermesApp(home, load_config(home.config_file), home_label="~/.hermes")


async def card_status(home: HomeLayout, task_id: str, url: str | None = None) -> str:
    board = await open_board(home, url=url)
    try:
        return (await board.get_task(task_id)).status
    finally:
        await board.close()


async def select(pilot, pane: BoardPane, task_id: str) -> None:
    """Focus the card's column and highlight it."""
    status = pane.cards[task_id].task.status
    cards = pane.query_one(f"#cards-{status}")
    cards.focus()
    cards.highlighted = cards.get_option_index(task_id)
    await pilot.pause()


async def test_cards_land_in_their_columns_with_their_facts(home, fixed_clock):
    made = await seed(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        for status in ("todo", "ready", "running", "review", "blocked", "done"):
            assert pane.column_ids(status) == (made[status],) or made[status] in pane.column_ids(status)
        running = pane.query_one("#cards-running").get_option(made["running"]).prompt.plain
        assert "t_00000003" in running and "4242" in running and "Port the importer" in running
        blocked = pane.query_one("#cards-blocked").get_option(made["blocked"]).prompt.plain
        assert "✗2" in blocked and "coder" in blocked and "1h 40m" in blocked
        assert "7 cards, 1 running" in pane.border_subtitle
        assert "dispatcher off" in str(pane.query_one("#board-info").render())


async def test_new_card_form_creates_a_card_and_cancel_creates_nothing(home):
    await seed(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await pilot.press("n")
        assert isinstance(app.screen, NewCardScreen)
        await pilot.press("enter")  # empty title: refused, form stays
        assert isinstance(app.screen, NewCardScreen)
        assert "needs a title" in str(app.screen.query_one("#form-error").render())
        await pilot.press(*"Add dark mode")
        app.screen.query_one("#assignee").value = "writer"
        app.screen.query_one("#priority").value = "5"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(pane.cards) == 8)
        new = [v.task for v in pane.cards.values() if v.task.title == "Add dark mode"][0]
        assert (new.status, new.assignee, new.priority) == ("ready", "writer", 5)
        await pilot.press("n")
        await pilot.press(*"never")
        await pilot.press("escape")
        await wait_workers(app, ["board-change"])  # a card the escape made by mistake is written
        await wait_workers(app, ["board-refresh"])  # and read back
        assert not isinstance(app.screen, NewCardScreen)
        assert all(v.task.title != "never" for v in pane.cards.values())


async def test_enter_opens_details_with_runs_events_failure_and_log(home, board_backend):
    made = await seed(home, board_backend)
    home.kanban_logs_dir.mkdir(parents=True)
    (home.kanban_logs_dir / f"{made['blocked']}.log").write_text("connecting\nHTTP 403 from billing\n")
    app = make_app(home, url=board_backend)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await select(pilot, pane, made["blocked"])
        await pilot.press("enter")
        assert isinstance(app.screen, CardDetailsScreen)
        body = app.screen.query_one("#details-body")
        await wait_for(pilot, lambda: "Worker log" in str(body.render()))
        text = str(body.render())
        assert "Call the billing API" in text and "HTTP 403 from billing" in text
        assert "Last failure" in text and "created" in text
        await pilot.press("escape")
        await select(pilot, pane, made["ready"])
        await pilot.press("enter")
        body = app.screen.query_one("#details-body")
        await wait_for(pilot, lambda: "Add screenshots." in str(body.render()))
    # One description (engine.kanban.describe.describe_task) behind both: the dialog shows
    # what `kanban show` prints, plus the worker log's tail (the ages differ: different clocks).
    printed = await asyncio.to_thread(run_cli, "--home", str(home.root), "kanban", "show", made["blocked"])
    assert printed.returncode == 0, printed.stderr

    def without_age(shown: str) -> str:
        return re.sub(r"\([^()]+ ago\)", "(… ago)", shown)

    dialog, log = text.split("\n\nWorker log (tail)\n")
    assert without_age(dialog) == without_age(printed.stdout.rstrip("\n"))
    assert log.splitlines() == ["  connecting", "  HTTP 403 from billing"]


async def test_move_keys_follow_the_allowed_transitions(home, board_backend):
    made = await seed(home, board_backend)
    app = make_app(home, url=board_backend)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await select(pilot, pane, made["ready"])
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: pane.cards[made["ready"]].task.status == "review")
        await wait_for(pilot, lambda: f"Moved {made['ready']}  (ready -> review)" in notes)  # the CLI's words
        assert await card_status(home, made["ready"], board_backend) == "review"
        await select(pilot, pane, made["ready"])
        await pilot.press("less_than_sign")
        await wait_for(pilot, lambda: pane.cards[made["ready"]].task.status == "ready")
        await select(pilot, pane, made["done"])
        await pilot.press("greater_than_sign")  # done cannot move: a warning, nothing changes
        await wait_workers(app, ["board-change"])
        assert await card_status(home, made["done"], board_backend) == "done"
        await select(pilot, pane, made["todo"])
        await pilot.press("greater_than_sign")  # its parent is not done: refused
        await wait_workers(app, ["board-change"])
        assert await card_status(home, made["todo"], board_backend) == "todo"


async def test_unblock_and_archive_go_through_a_confirm_whose_default_is_no(home):
    made = await seed(home)
    app = make_app(home)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await select(pilot, pane, made["blocked"])
        await pilot.press("u")
        assert isinstance(app.screen, ConfirmModal)
        assert "HTTP 403" in str(app.screen.query_one(".body").render())
        failures = pane.cards[made["blocked"]].task.consecutive_failures
        assert failures and f"its failure counter ({failures}) resets to 0" in app.screen.body
        await pilot.press("enter")  # the focused default is No
        await wait_workers(app, ["board-change"])
        assert await card_status(home, made["blocked"]) == "blocked"
        await pilot.press("u")
        await pilot.press("y")
        await wait_for(pilot, lambda: pane.cards[made["blocked"]].task.status == "ready")
        assert pane.cards[made["blocked"]].task.consecutive_failures == 0
        await wait_for(pilot, lambda: f"Unblocked {made['blocked']}  (blocked -> ready)" in notes)

        await select(pilot, pane, made["done"])
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await wait_for(pilot, lambda: made["done"] not in pane.cards)
        assert await card_status(home, made["done"]) == "archived"
        await pilot.press("A")  # show archived
        await wait_for(pilot, lambda: made["done"] in pane.column_ids("archived"))
        assert pane.query_one("#column-archived").display


async def test_reclaim_stops_a_real_worker_after_confirming(home):
    await (await Board.open(home.kanban_db)).close()  # an empty board exists
    app = make_app(home)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.service is not None)
        task = await pane.service.create(NewTask("real worker", assignee="coder"))
        result = await app.dispatch_loop.tick()
        try:
            assert [s.task_id for s in result.spawned] == [task.id]
            pid = result.spawned[0].pid
            # (a refresh may land between the claim and the pid record: wait for the pid)
            await wait_for(pilot, lambda: task.id in pane.cards and pane.cards[task.id].live is True)
            assert "●" in pane.query_one("#cards-running").get_option(task.id).prompt.plain
            assert pane.border_subtitle.startswith("1 card, 1 running")  # not "1 cards"
            await select(pilot, pane, task.id)
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmModal)
            assert "identity verified" in str(app.screen.query_one(".body").render())
            # No failures: nothing to reset, nothing said ("failure counter (0) resets to 0").
            assert "failure counter" not in app.screen.body
            await pilot.press("y")
            await wait_for(pilot, lambda: pane.cards[task.id].task.status == "ready")
            await wait_for(pilot, lambda: f"Reclaimed {task.id}  (running -> ready); worker pid {pid} stopped" in notes)
            from engine import identity

            assert identity.read_stat(pid) is None or identity.read_stat(pid).is_zombie
        finally:
            registry = app.dispatch_loop.spawner.registry
            for session in registry.list(include_finished=False):
                registry.kill(session.id, grace=0.2)


async def test_dispatch_now_and_the_held_back_line(home):
    config = CONFIG.replace("dispatch: false", "dispatch: false\n  dispatch_profiles: [writer]")
    made = await seed(home)
    app = make_app(home, config)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        app.dispatch_loop.spawner = NullSpawner()
        await select(pilot, pane, made["ready"])
        await pilot.press("D")
        await wait_for(pilot, lambda: pane.last_result is not None)
        assert [s.task_id for s in pane.last_result.spawned] == [made["ready"]]
        await pilot.press("D")
        await wait_for(pilot, lambda: pane.last_held_back != "")
        assert pane.last_held_back == "Last tick held back: skipped_nonspawnable=1"  # the code (--json)
        # People read words: the info line and the subtitle never show the code.
        words = held_back_words(pane.last_result)
        assert words.startswith("held back: 1 card assigned to '") and words.endswith(
            "', not a profile this machine can spawn")  # the profile quoted: "1 card worker is not…" misread
        info = str(pane.query_one("#board-info").render())
        assert words in info and "skipped_" not in info
        assert "1 held back" in pane.border_subtitle and "skipped_" not in pane.border_subtitle
        # The held-back card's reason in full, under the columns, once it is selected.
        held = pane.last_result.skipped[0]
        await select(pilot, pane, held.task_id)
        detail = pane.query_one("#board-detail")
        await wait_for(pilot, lambda: "held back: " + skip_reason(held) in detail.shown_text)
        assert held.task_id in detail.shown_text


async def test_a_quiet_tick_given_again_is_not_summed_up_again(home, monkeypatch):
    """The dispatcher gives an unchanged board's tick again, the same result (its
    QuietTick): the pane made its held-back words again each tick, 100,000 reasons a
    tick on a big board. It now only moves the tick's time; a new result is summed up."""
    import widgets.board.board_pane as board_pane_module

    board = await open_board(home, FakeClock())
    try:
        waiting = await tr.create_task(board, NewTask("waits for an assignee"))
    finally:
        await board.close()
    app = make_app(home, CONFIG)
    summed = []
    real = board_pane_module._tick_summary

    def counted(result):
        summed.append(result)
        return real(result)

    monkeypatch.setattr(board_pane_module, "_tick_summary", counted)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 1)
        app.dispatch_loop.spawner = NullSpawner()
        for n in range(1, 4):
            await pilot.press("D")
            await wait_for(pilot, lambda n=n: app.dispatch_loop.ticks == n)
            await wait_workers(app, ["board-tick"])
        assert [s.task_id for s in pane.last_result.skipped] == [waiting.id]
        assert len(summed) == 1, "the tick given again was summed up again"
        assert "unassigned" in str(pane.query_one("#board-info").render())
        assert time.strftime("%H:%M:%S", time.localtime(pane.last_tick_at)) in str(
            pane.query_one("#board-info").render())


async def test_in_app_dispatcher_ticks_on_its_interval_and_can_be_off(home):
    made = await seed(home)
    on = CONFIG.replace("dispatch: false", "dispatch: true\n  dispatch_interval_seconds: 0.2\n"
                        "  dispatch_profiles: []")
    app = make_app(home, on)
    ticks: list = []
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        app.dispatch_loop.spawner = NullSpawner()
        app.screen.on_board_pane_tick_done = lambda m: ticks.append(m.result)  # noqa: B023
        await wait_for(pilot, lambda: pane.last_tick_at is not None and pane.last_held_back)
        assert "skipped_nonspawnable" in pane.last_held_back  # the code; the board shows words
        assert await card_status(home, made["ready"]) == "ready"
    app = make_app(home, CONFIG.replace("dispatch: false", "dispatch: false\n  dispatch_interval_seconds: 0.2"))
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        # Two refresh timer ticks (1 s each) hold ten dispatch intervals: none ticked.
        await wait_for(pilot, lambda: pane._timer_ticks >= 2)
        assert app.dispatch_loop.ticks == 0 and not app.dispatch_loop.ticking
        assert pane.last_tick_at is None
        assert "dispatch off" in pane.border_subtitle


async def test_a_corrupt_board_is_reported_in_the_pane_not_a_crash(home):
    home.kanban_db.write_bytes(b"this is not sqlite" * 100)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane.error is not None)
        assert "not an SQLite database" in pane.error
        assert pane.has_class("-failed")
        await pilot.press("n")  # keys are harmless
        assert not isinstance(app.screen, NewCardScreen)
    assert home.kanban_db.read_bytes() == b"this is not sqlite" * 100


async def test_worker_output_key_routes_to_the_processes_pane(home):
    made = await seed(home)
    board = await Board.open(home.kanban_db)
    await board.conn.execute("UPDATE task_runs SET process_id = 'proc_0123456789ab' WHERE task_id = ?",
                             (made["running"],))
    await board.close()
    app = make_app(home)
    seen = []
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        original = pane.post_message

        def spy(message):
            if isinstance(message, BoardPane.OpenWorkerOutput):
                seen.append(message.session_id)
            return original(message)

        pane.post_message = spy
        await select(pilot, pane, made["running"])
        await pilot.press("o")
        await wait_for(pilot, lambda: seen)
        assert seen == ["proc_0123456789ab"]
        await wait_for(pilot, lambda: app.active_pane_id == "processes")


class BoardOnly(App):
    """The board pane alone, so its snapshots do not change when another pane does."""

    def __init__(self, home: HomeLayout) -> None:
        super().__init__()
        self.home = home
        self.settings = load_config(home.config_file)

    def compose(self):
        yield BoardPane(home=self.home, settings=self.settings)


def _snapshot_app(tmp_path) -> App:
    home = HomeLayout(tmp_path / "home").ensure()
    home.ensure_dir(home.own_dir)  # where seed() opens the board directly
    asyncio.run(seed(home))
    home.config_file.write_text(CONFIG)
    return BoardOnly(home)


async def _loaded(pilot) -> None:
    pane = pilot.app.query_one(BoardPane)
    await wait_for(pilot, lambda: len(pane.cards) == 7)
    cards = pane.query_one("#cards-ready")
    cards.focus()
    await wait_for(pilot, lambda: cards.has_focus)


def test_board_snapshot_wide(snap_compare, tmp_path, fixed_clock):
    assert snap_compare(_snapshot_app(tmp_path), terminal_size=WIDE, run_before=_loaded)


def test_board_snapshot_narrow(snap_compare, tmp_path, fixed_clock):
    assert snap_compare(_snapshot_app(tmp_path), terminal_size=(80, 24), run_before=_loaded)


async def test_assign_key_reassigns_and_resets_failures(home):
    made = await seed(home)
    app = make_app(home)
    notes = capture_notes(app)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 7)
        await select(pilot, pane, made["blocked"])
        await pilot.press("e")
        field = app.screen.query_one("#assignee")
        assert field.value == "coder"
        field.value = "writer"
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.cards[made["blocked"]].task.assignee == "writer")
        assert pane.cards[made["blocked"]].task.consecutive_failures == 0
        await wait_for(pilot, lambda: f"Assigned {made['blocked']} to writer" in notes)


async def test_a_home_without_a_board_gets_no_file_until_the_first_card(home):
    app = make_app(home, CONFIG.replace("dispatch: false", "dispatch: true\n  dispatch_interval_seconds: 0.2")
                   + "ui:\n  refresh_seconds: 0.2\n")
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: pane._timer_ticks >= 3)  # a few refreshes and dispatch ticks
        await wait_workers(app, ["board-refresh", "board-dispatch"])
        assert not home.kanban_db.exists()
        assert "No board yet" in str(pane.query_one("#board-info").render())
        assert pane.border_subtitle == "no board yet"
        await pilot.press("n")
        await wait_for(pilot, lambda: screen_shown(app, NewCardScreen))
        await pilot.press(*"first card")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(pane.cards) == 1)
        assert home.kanban_db.exists()
        assert "dispatcher every 0.2s" in str(pane.query_one("#board-info").render())


async def test_card_texts_that_look_like_markup_show_literally(home):
    """Titles, bodies, assignees and failure reasons are data: `[/]` must not crash the
    pane or the dialogs, and `[bold]x` must show its brackets."""
    board = await Board.open(home.kanban_db)
    try:
        closer = await tr.create_task(board, NewTask("[/]", body="[red]body[/red]", assignee="[/x]"))
        bold = await tr.create_task(board, NewTask("[bold]x", assignee="coder"))
        await board.conn.execute("UPDATE tasks SET status = 'blocked', last_failure_error = '[/] [link=x]' "
                                 "WHERE id = ?", (bold.id,))
    finally:
        await board.close()
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 2)
        assert "[/]" in pane.query_one("#cards-ready").get_option(closer.id).prompt.plain
        assert "[bold]x" in pane.query_one("#cards-blocked").get_option(bold.id).prompt.plain
        await select(pilot, pane, closer.id)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_shown(app, CardDetailsScreen))
        body = app.screen.query_one("#details-body")
        await wait_for(pilot, lambda: "[red]body[/red]" in str(body.render()))
        assert "[/x]" in str(body.render())
        await pilot.press("escape")
        await select(pilot, pane, bold.id)
        await pilot.press("u")  # the confirm shows the title and the last failure
        assert isinstance(app.screen, ConfirmModal)
        shown = str(app.screen.query_one(".body").render())
        assert "[bold]x" in shown and "[/] [link=x]" in shown
        await pilot.press("escape")
        await pilot.press("e")
        await wait_for(pilot, lambda: app.screen.query("#assignee"))
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running


async def test_the_app_judges_a_worker_s_exit_at_once_not_at_the_next_interval(home, tmp_path):
    """The interval is an hour and the crash grace 30 s: only the loop waking on the
    worker's exit can make this card done. The worker ends when the test has seen it
    running (a gate file: a slow refresh cannot miss the running card)."""
    gate = tmp_path / "gate"
    config = ("kanban:\n  dispatch: true\n  dispatch_interval_seconds: 3600\n  crash_grace_seconds: 30\n"
              f"  profiles:\n    quick:\n      command: 'while [ ! -e {gate} ]; do sleep 0.01; done'\n"
              "      complete_on_exit: true\n")
    board = await Board.open(home.kanban_db)
    try:
        task = await tr.create_task(board, NewTask("one second", assignee="quick"))
    finally:
        await board.close()
    app = make_app(home, config)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        try:
            await wait_for(pilot, lambda: task.id in pane.cards and pane.cards[task.id].task.status == "running")
            gate.touch()
            await wait_for(pilot, lambda: pane.cards[task.id].task.status == "done")
            assert app.dispatch_loop.last_result is not None
        finally:
            registry = app.dispatch_loop.spawner.registry
            for session in registry.list(include_finished=False):
                registry.kill(session.id, grace=0.2)


@pytest.mark.parametrize("corrupt", [False, True])
async def test_a_board_path_that_looks_like_markup_shows_literally(home, corrupt):
    config = CONFIG.replace("kanban:\n", "kanban:\n  db: '[/]b[bold].db'\n")
    (home.root / "[").mkdir()  # the path is the folder "[" and the file "]b[bold].db"
    if corrupt:
        (home.root / "[/]b[bold].db").write_bytes(b"not sqlite at all" * 10)
    app = make_app(home, config)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(BoardPane)
        if corrupt:
            await wait_for(pilot, lambda: pane.error is not None)
            shown = str(pane.query_one("#board-error").render())
        else:
            await wait_for(pilot, lambda: "No board yet" in str(pane.query_one("#board-info").render()))
            shown = str(pane.query_one("#board-info").render())
        assert "[/]b[bold].db" in shown
        assert app.is_running
