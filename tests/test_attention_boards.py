"""Issue 36, every board every time: the attention list, ``watch`` and the notices cover
every board of the home, not only the one shown (the family: a reader of attention that
reads one board). A hermes-tui home with two boards (``default`` and ``side``): a card
blocked or given up on ``side`` is an item in ``attention``, ``watch``, the app's ``!``
and ``notify.command``, each with its board (in the words, ``board`` in JSON,
``HERMES_ATTENTION_BOARD``), an answer naming the board that works when run, and a key
unique per board. Everything is real: the CLI in subprocesses, the app in-process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from engine.attention import state
from engine.attention.board import BoardFacts, board_items
from engine.attention.boards import BoardsReader
from engine.attention.model import Kind
from engine.config import load_config
from engine.home import HomeLayout
from engine.kanban.models import Task
from hermes_tui.app import HermesApp
from tests.support import run_cli, wait_until, wait_until_pilot
from tests.test_attention_notify import Lines, start_watch, write_config
from tests.test_hermes_home import tree_state
from widgets.board.board_pane import BoardPane


def cli(home, *args, ok=True):
    done = run_cli("--home", str(home.root), *args)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def card_on(home, board: str | None, title: str) -> str:
    where = ["--board", board] if board else []
    return json.loads(cli(home, "kanban", *where, "create", title, "--json").stdout)["id"]


def blocked_on(home, board: str | None, title: str, reason: str) -> str:
    card = card_on(home, board, title)
    where = ["--board", board] if board else []
    cli(home, "kanban", *where, "block", card, "--reason", reason)
    return card


def two_boards(home) -> None:
    cli(home, "kanban", "boards", "create", "side", "--name", "Side things")
    card_on(home, None, "on the default board")  # makes the default board


def items(home, *args) -> list[dict]:
    return json.loads(cli(home, "attention", "--json", *args).stdout)["items"]


def test_a_card_blocked_on_a_board_not_shown_is_an_item_with_its_board_and_an_answer_that_works(home):
    two_boards(home)
    here = blocked_on(home, None, "Fix login", "needs the design")
    there = blocked_on(home, "side", "Renew the certificate", "which domain?")
    listed = {i["subject"]: i for i in items(home)}
    assert set(listed) == {here, there}
    side = listed[there]
    assert side["board"] == "side" and listed[here]["board"] == "default"
    assert side["key"].endswith("@side") and listed[here]["key"].endswith("@default")
    assert side["why"].startswith("board side: Renew the certificate: blocked by a person: which domain?")
    assert f"(hermes-tui kanban --board side unblock {there})" in side["action"]
    text = cli(home, "attention").stdout
    assert "board side: Renew the certificate" in text and f"kanban --board side unblock {there}" in text
    assert [i["subject"] for i in items(home, "--board", "side")] == [there]
    bad = cli(home, "attention", "--board", "nope", ok=False)
    assert bad.returncode == 2 and "no board 'nope'" in bad.stderr and len(bad.stderr.splitlines()) == 1
    # The answer, run as written, answers it: the item ends, the other board's stays.
    answer = side["action"].split("(", 1)[1].rstrip(")").split()
    assert answer[:2] == ["hermes-tui", "kanban"]
    cli(home, *answer[1:])
    assert [i["subject"] for i in items(home)] == [here]


def test_a_dismissal_is_per_board_item_and_the_same_card_id_on_two_boards_is_two_items():
    task = Task(id="t_same", title="same id", body="", assignee=None, status="blocked", priority=0, created_at=1.0)
    one = board_items(BoardFacts((task,), {}, (), board="default", selector="--board default", named=True), 10.0)
    two = board_items(BoardFacts((task,), {}, (), board="ops", selector="--board ops", named=True), 10.0)
    assert one[0].key != two[0].key and {one[0].board, two[0].board} == {"default", "ops"}
    assert one[0].key.split("@")[0] == two[0].key.split("@")[0]  # the same occurrence, on two boards


def test_a_key_does_not_change_when_the_home_gets_a_second_board(home):
    """A key names its board always, so adding a board re-notifies nothing."""
    card = blocked_on(home, None, "Fix login", "why")
    [before] = items(home)
    assert before["key"].endswith("@default") and "--board" not in before["action"]
    cli(home, "kanban", "boards", "create", "side")
    blocked_on(home, "side", "other", "why")
    after = {i["subject"]: i for i in items(home)}[card]
    assert after["key"] == before["key"] and "--board default" in after["action"]


def test_a_board_is_read_again_only_when_its_files_changed(home):
    """Cost: attention over many boards is a few stats a look; a board is read when its
    change marker (its file and WAL) moved, not every look."""
    import asyncio

    two_boards(home)
    blocked_on(home, "side", "one", "why")
    reader = BoardsReader(home, load_config(home.config_file), max_age=3600)
    boards, problems = asyncio.run(reader.read(100.0))
    assert problems == () and reader.reads == 2
    markers = reader.markers()
    asyncio.run(reader.read(101.0))
    assert reader.reads == 2 and reader.markers() == markers  # nothing changed: nothing read
    blocked_on(home, "side", "two", "why")
    assert reader.markers() != markers
    boards, _ = asyncio.run(reader.read(102.0))
    assert reader.reads == 3  # the side board only
    assert sum(len(b.tasks) for b in boards) == 2


def test_watch_and_notify_command_cover_every_board_once_each(home, children, tmp_path):
    notices = tmp_path / "notices.jsonl"
    two_boards(home)
    write_config(home, command=f"cat >> {notices}; echo \"$HERMES_ATTENTION_BOARD\" >> {notices}.boards",
                 poll_seconds=0.2, bell=False, desktop=False, terminal="off")
    watch = start_watch(home, children, "--json")
    out = Lines(watch)
    there = blocked_on(home, "side", "Renew the certificate", "which domain?")
    here = blocked_on(home, None, "Fix login", "needs the design")
    wait_until(lambda: out.having(there) and out.having(here), what="watch printing both boards' items")
    wait_until(lambda: notices.exists() and len(notices.read_text().splitlines()) == 2, what="two notices")
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=60) == 0
    sent = [json.loads(line) for line in notices.read_text().splitlines()]
    assert sorted((n["subject"], n["board"]) for n in sent) == sorted([(there, "side"), (here, "default")])
    assert sorted(notices.with_name(notices.name + ".boards").read_text().split()) == ["default", "side"]


def app_of(home) -> HermesApp:
    return HermesApp(home, load_config(home.config_file), home_label="~/h")


def header(app) -> str:
    return str(app.query_one("#header").render())


async def test_the_app_counts_another_boards_items_and_enter_switches_to_that_board(home):
    two_boards(home)
    write_config(home, bell=False, desktop=False, terminal="off")
    there = blocked_on(home, "side", "Renew the certificate", "which domain?")
    app = app_of(home)
    async with app.run_test(size=(120, 32)) as pilot:
        board = app.query_one(BoardPane)
        await wait_until_pilot(pilot, lambda: "! 1" in header(app), what="the side board's item counted")
        assert there not in board.cards  # the pane shows the default board
        [item] = app.attention.attention.items
        assert (item.kind, item.board) == (Kind.BLOCKED, "side") and item.why.startswith("board side: ")
        # Blocked on the side board while the app is open: seen without the pane showing it.
        later = blocked_on(home, "side", "Rotate the keys", "which ones?")
        await wait_until_pilot(pilot, lambda: "! 2" in header(app), what="a new item on the side board")
        await pilot.press("exclamation_mark")
        screen = app.screen
        await wait_until_pilot(pilot, lambda: screen.highlighted is not None)
        while screen.highlighted.subject != later:
            await pilot.press("down")
        await pilot.press("enter")
        await wait_until_pilot(pilot, lambda: board.selected is not None and board.selected.id == later,
                               what="the side board shown and the card selected")
        assert os.path.basename(os.path.dirname(board.db_path)) == "side"


# --------------------------------------------------------------------------------------
# A home made by the real hermes-agent 0.19.0: three boards, the current one `research`
# (nothing blocked there), blocked cards on `default` and `ops`
# (tests/fixtures/make_hermes_attention_home.sh). Everything stays byte-identical: the
# notice claims live in the user's state folder, not in hermes's home.
# --------------------------------------------------------------------------------------

HERMES_FIXTURE = Path(__file__).parent / "fixtures" / "hermes_attention_0_19_0"
NO_HERMES = {"PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin" + os.pathsep + "/bin"}
RENEW = "t_96dbd704"  # default: blocked by a person ("which domain")
DEPLOY = "t_c0f09b8d"  # default: the breaker gave up (max_retries 1)
RELAY = "t_c3866bb0"  # ops: blocked by a person ("needs the root password")
EXPECTED = {("default", "blocked", RENEW), ("default", "gave_up", DEPLOY), ("ops", "blocked", RELAY)}


@pytest.fixture
def hermes_home(tmp_path) -> HomeLayout:
    root = tmp_path / "hermes"
    shutil.copytree(HERMES_FIXTURE, root)
    root.chmod(0o700)  # as hermes-agent makes its home (a clone of the repo checks the fixture out 0755)
    return HomeLayout(root)


def hermes_items(home, *args, env=None) -> list[dict]:
    done = run_cli("--home", str(home.root), "attention", "--json", *args, env={**NO_HERMES, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["items"]


def test_the_fixture_was_written_by_hermes_agent_0_19_0_with_research_current():
    assert (HERMES_FIXTURE / ".hermes-agent-version").read_text().strip() == "0.19.0"
    assert (HERMES_FIXTURE / "kanban" / "current").read_text().strip() == "research"


def test_attention_covers_every_hermes_board_not_only_the_current_one(hermes_home):
    before = tree_state(hermes_home.root)
    listed = hermes_items(hermes_home)
    assert {(i["board"], i["kind"], i["subject"]) for i in listed} == EXPECTED
    for item in listed:
        assert f"(hermes-tui kanban --board {item['board']} unblock {item['subject']})" in item["action"]
        assert item["why"].startswith(f"board {item['board']}: ") and item["key"].endswith(f"@{item['board']}")
    assert {i["subject"] for i in hermes_items(hermes_home, "--board", "ops")} == {RELAY}
    # hermes's own way to pick a board changes which one is shown, not what attention covers.
    assert {(i["board"], i["kind"], i["subject"]) for i in
            hermes_items(hermes_home, env={"HERMES_KANBAN_BOARD": "default"})} == EXPECTED
    assert tree_state(hermes_home.root) == before


async def test_the_app_and_watch_on_a_hermes_home_notify_each_boards_item_once_and_write_nothing_there(
        hermes_home, children, tmp_path, monkeypatch):
    notices = tmp_path / "notices.jsonl"
    with open(hermes_home.config_file, "a") as fh:  # a person configuring hermes-tui in hermes's config
        fh.write(f"notify:\n  command: 'cat >> {notices}'\n  poll_seconds: 0.2\n  bell: false\n"
                 "  desktop: false\n  terminal: 'off'\n")
    before = tree_state(hermes_home.root)
    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    watch = start_watch(hermes_home, children, "--json")
    out = Lines(watch)
    app = HermesApp(hermes_home, load_config(hermes_home.config_file), home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until_pilot(pilot, lambda: "! 3" in header(app), what="the app counting every board's items")
        await wait_until_pilot(pilot, lambda: all(out.having(card) for _b, _k, card in EXPECTED),
                               what="watch printing every board's items")
        await wait_until_pilot(pilot, lambda: notices.exists() and len(notices.read_text().splitlines()) >= 3,
                               what="three notices")
        assert app.attention.notifier.wait_idle(timeout=60)
        assert {(i.board, i.kind.value, i.subject) for i in app.attention.attention.items} == EXPECTED
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=60) == 0
    sent = [json.loads(line) for line in notices.read_text().splitlines()]
    assert sorted((n["board"], n["kind"], n["subject"]) for n in sent) == sorted(EXPECTED)  # once each
    assert tree_state(hermes_home.root) == before
    assert (state.state_dir(hermes_home) / state.NOTIFIED_FILE).is_file()
    assert not str(state.state_dir(hermes_home)).startswith(str(hermes_home.root))


REAL = os.environ.get("HERMES_AGENT_BIN", "")


@pytest.mark.skipif(not (REAL and os.access(REAL, os.X_OK)),
                    reason="set HERMES_AGENT_BIN to a real hermes-agent 0.19.0 `hermes` to run")
def test_the_answer_of_an_item_on_another_hermes_board_works_when_run(hermes_home, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hermes").symlink_to(REAL)
    env = {"PATH": f"{bin_dir}{os.pathsep}{NO_HERMES['PATH']}"}
    [relay] = [i for i in hermes_items(hermes_home) if i["board"] == "ops"]
    answer = relay["action"].split("(", 1)[1].rstrip(")").split()
    done = run_cli("--home", str(hermes_home.root), *answer[1:], env=env)
    assert done.returncode == 0, done.stderr
    left = {(i["board"], i["kind"], i["subject"]) for i in hermes_items(hermes_home)}
    assert left == EXPECTED - {("ops", "blocked", RELAY)}  # the current board (research) was not touched


# --------------------------------------------------------------------------------------
# hermes's own ways to find its boards (hermes_cli/kanban_db.py kanban_home()):
# $HERMES_KANBAN_HOME, and a profile's home sharing its root's boards
# --------------------------------------------------------------------------------------


def test_hermes_kanban_home_names_where_hermes_boards_are(hermes_home, tmp_path):
    own = tmp_path / "elsewhere"
    own.mkdir()
    before = tree_state(hermes_home.root)
    env = {**NO_HERMES, "HERMES_KANBAN_HOME": str(hermes_home.root)}
    done = run_cli("--home", str(own), "attention", "--json", env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["items"]
    assert {(i["board"], i["kind"], i["subject"]) for i in listed if i["pane"] == "board"} == EXPECTED
    boards = run_cli("--home", str(own), "kanban", "boards", "--json", env=env)
    data = json.loads(boards.stdout)
    assert data["current"] == "research" and [b["slug"] for b in data["boards"]] == ["default", "ops", "research"]
    shown = run_cli("--home", str(own), "kanban", "--board", "ops", "show", RELAY, "--json", env=env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "blocked", shown.stderr
    assert tree_state(hermes_home.root) == before
    # Without it, the other home has no board of hermes's.
    alone = run_cli("--home", str(own), "attention", "--json", env=NO_HERMES)
    assert [i for i in json.loads(alone.stdout)["items"] if i["pane"] == "board"] == []


def test_a_profiles_home_shares_its_roots_boards_as_in_hermes(hermes_home):
    profile = hermes_home.root / "profiles" / "writer"
    before = tree_state(hermes_home.root)
    done = run_cli("--home", str(profile), "attention", "--json", env=NO_HERMES)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["items"]
    assert {(i["board"], i["kind"], i["subject"]) for i in listed if i["pane"] == "board"} == EXPECTED
    assert tree_state(hermes_home.root) == before
