"""Issue 24: every board of a home and what hermes knows, against a home the real
hermes-agent 0.19.0 wrote (tests/fixtures/hermes_boards_0_19_0, made by
tests/fixtures/make_hermes_boards_home.sh; copied per test): two boards (``default`` and
``research``, hermes's current one), a card the breaker gave up on, a card the respawn
guard holds back, a card in triage, a card done by a worker whose session has usage
rows, and two registered processes. Every read leaves every file of the home as it was
(hashed)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from engine.home import HomeLayout
from tests.conftest import run_cli
from tests.support import screen_shown
from tests.test_hermes_board import install_fake_hermes
from tests.test_hermes_home import tree_state

FIXTURE = Path(__file__).parent / "fixtures" / "hermes_boards_0_19_0"
NO_HERMES = {"PATH": os.path.dirname(sys.executable) + os.pathsep + "/nonexistent-bin", "HERMES_AUTO_PRUNE": ""}
WORKED = "t_5ff40224"    # "Write the release notes": done by a worker, its session has usage
BY_HAND = "t_7b645408"   # "Tag the release": done by hand, no worker session
GAVE_UP = "t_0a0a580f"   # "Deploy the site": the breaker gave up (max_retries 1)
GUARDED = "t_d2b843e6"   # "Publish the package": ready, held back by the respawn guard (blocker_auth)
TRIAGE = "t_2b2e3d90"    # "Plan the next release": triage, no main model (triage_aux_unavailable)
RESEARCH = {"t_d110b468": "Read the survey paper", "t_041fcace": "Summarise the benchmarks"}


@pytest.fixture
def home(tmp_path) -> HomeLayout:
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    return HomeLayout(root)


def kanban(home: HomeLayout, *args: str, env: dict | None = None):
    return run_cli("--home", str(home.root), "kanban", *args, env={**NO_HERMES, **(env or {})}, timeout=60)


def ok_json(home: HomeLayout, *args: str, env: dict | None = None) -> dict:
    r = kanban(home, *args, "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_fixture_was_written_by_hermes_agent_0_19_0():
    assert (FIXTURE / ".hermes-agent-version").read_text().strip() == "0.19.0"
    assert (FIXTURE / "kanban" / "current").read_text().strip() == "research"


# --------------------------------------------------------------------------------------
# Boards
# --------------------------------------------------------------------------------------


def test_boards_lists_every_hermes_board_with_counts_and_the_current_one(home):
    before = tree_state(home.root)
    data = ok_json(home, "boards")
    boards = {b["slug"]: b for b in data["boards"]}
    assert list(boards) == ["default", "research"]
    assert boards["default"]["counts"] == {"blocked": 1, "done": 2, "ready": 1, "triage": 1}
    assert boards["research"]["counts"] == {"ready": 2} and boards["research"]["name"] == "Research"
    assert boards["research"]["description"] == "Reading for the next release"
    assert {b["kind"] for b in boards.values()} == {"hermes"}
    # hermes's own setting (kanban/current, `hermes kanban boards switch`) is followed.
    assert data["current"] == "research" and boards["research"]["hermes_current"]
    text = kanban(home, "boards")
    assert text.returncode == 0, text.stderr
    assert "* research" in text.stdout and "blocked=1, done=2, ready=1, triage=1" in text.stdout
    assert tree_state(home.root) == before


def test_every_verb_reads_the_board_board_names_and_changes_nothing(home):
    before = tree_state(home.root)
    research = ok_json(home, "--board", "research", "list")["tasks"]
    assert {t["id"]: t["title"] for t in research} == RESEARCH
    assert {t["id"] for t in ok_json(home, "list")["tasks"]} == set(RESEARCH)  # the current board
    default = {t["id"]: t["status"] for t in ok_json(home, "list", "--board", "default", "--all")["tasks"]}
    assert default == {WORKED: "done", BY_HAND: "done", GAVE_UP: "blocked", GUARDED: "ready", TRIAGE: "triage"}
    shown = ok_json(home, "show", "--board", "default", GAVE_UP)
    assert shown["status"] == "blocked" and "gave_up" in [e["kind"] for e in shown["events"]]
    r = kanban(home, "--board", "research", "show", "t_d110")
    assert r.returncode == 0 and "Read the survey paper" in r.stdout, r.stderr
    assert tree_state(home.root) == before


@pytest.mark.parametrize(("args", "words"), [
    (["--board", "nope", "list"], "no board 'nope'"),
    (["list", "--board", "../default"], "is not a board slug"),
    (["--board", "research", "--db", "x.db", "list"], "give --db or --board, not both"),
])
def test_a_board_that_is_not_there_is_one_usage_line(home, args, words):
    before = tree_state(home.root)
    r = kanban(home, *args)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and tree_state(home.root) == before


def test_a_hermes_board_without_its_database_is_never_created_here(home):
    """board.json alone makes a board for hermes; its kanban.db is hermes's to make."""
    folder = home.root / "kanban" / "boards" / "ideas"
    folder.mkdir()
    (folder / "board.json").write_text('{"slug": "ideas", "name": "Ideas"}\n')
    before = tree_state(home.root)
    r = kanban(home, "--board", "ideas", "create", "a card")
    assert r.returncode == 2 and "has no database yet" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    ideas = {b["slug"]: b for b in ok_json(home, "boards")["boards"]}["ideas"]
    assert ideas["name"] == "Ideas" and ideas["error"] == "no database yet"
    assert tree_state(home.root) == before and not (folder / "kanban.db").exists()


async def test_the_switcher_will_not_show_a_board_without_its_database(home, monkeypatch):
    from tests.support import wait_until_pilot as wait_until
    from tests.test_hermes_board import _app
    from widgets.board.board_pane import BoardPane
    from widgets.board.board_switcher import BoardSwitchScreen

    folder = home.root / "kanban" / "boards" / "ideas"
    folder.mkdir()
    (folder / "board.json").write_text('{"slug": "ideas"}\n')
    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    before = tree_state(home.root)
    app, notes = _app(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_until(pilot, lambda: set(pane.cards) == set(RESEARCH))
        await pilot.press("b")
        await wait_until(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        await pilot.press("up", "enter")  # default, ideas, research (shown, highlighted): the one above
        await wait_until(pilot, lambda: any("board ideas cannot be shown: no database yet" in n for n in notes))
        assert isinstance(app.screen, BoardSwitchScreen)
        await pilot.press("escape", "n")  # the research board is still the one shown
        await pilot.press("q")
    assert tree_state(home.root) == before


@pytest.fixture
def fake_hermes(tmp_path):
    return install_fake_hermes(tmp_path, "t_d110b468")


def test_a_change_on_a_named_board_goes_through_hermes_kanban_board(home, fake_hermes):
    env, record = fake_hermes
    before = tree_state(home.root)
    r = kanban(home, "--board", "research", "complete", "t_d110", "--summary", "read it", env=env)
    assert r.returncode == 0, r.stderr
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [c["argv"] for c in calls] == [["kanban", "--board", "research", "complete", "--summary", "read it",
                                           "--", "t_d110b468"]]
    assert calls[0]["db"] == str(home.root / "kanban" / "boards" / "research" / "kanban.db")
    assert tree_state(home.root) == before  # the fake wrote nothing; hermes-tui neither


def test_hermes_tui_own_boards_live_in_its_own_folder(tmp_path):
    own = HomeLayout(tmp_path / "own")
    own.root.mkdir()
    r = run_cli("--home", str(own.root), "kanban", "boards", "create", "work", "--name", "Work things",
                env=NO_HERMES)
    assert r.returncode == 0, r.stderr
    assert (own.root / "hermes-tui" / "boards" / "work" / "board.db").is_file()
    r = run_cli("--home", str(own.root), "kanban", "--board", "work", "create", "On the work board", env=NO_HERMES)
    assert r.returncode == 0, r.stderr
    r = run_cli("--home", str(own.root), "kanban", "create", "On the default board", env=NO_HERMES)
    assert r.returncode == 0, r.stderr
    r = run_cli("--home", str(own.root), "kanban", "boards", "--json", env=NO_HERMES)
    boards = {b["slug"]: b for b in json.loads(r.stdout)["boards"]}
    assert {s: (b["kind"], b["name"], b["total"], b["current"]) for s, b in boards.items()} == {
        "default": ("hermes-tui", "hermes-tui", 1, True), "work": ("hermes-tui", "Work things", 1, False)}
    r = run_cli("--home", str(own.root), "kanban", "list", "--board", "work", "--json", env=NO_HERMES)
    assert [t["title"] for t in json.loads(r.stdout)["tasks"]] == ["On the work board"]


# --------------------------------------------------------------------------------------
# Why hermes did not spawn a card; its gateway
# --------------------------------------------------------------------------------------


def test_hermes_reasons_are_listed_per_card_in_words_and_codes(home):
    before = tree_state(home.root)
    data = ok_json(home, "--board", "default", "list")
    codes = {t["id"]: [r["code"] for r in t["hermes_reasons"]] for t in data["tasks"]}
    assert codes == {GUARDED: ["respawn_guarded:blocker_auth"], GAVE_UP: ["gave_up"],
                     TRIAGE: ["triage_aux_unavailable"], WORKED: [], BY_HAND: []}
    assert data["gateway"]["running"] is False and "no gateway.pid" in data["gateway"]["words"]
    research = ok_json(home, "--board", "research", "list")["tasks"]
    assert {t["id"]: [r["code"] for r in t["hermes_reasons"]] for t in research} == {
        "t_d110b468": [], "t_041fcace": ["unassigned"]}
    text = kanban(home, "--board", "default", "list").stdout
    assert text.splitlines()[0].startswith("hermes's gateway is not running (no gateway.pid)")
    assert "hermes: hermes gave up after 1 failure(s) (limit 1, from the card's max_retries): 401 Unauthorized" in text
    assert "hermes: held back by hermes's respawn guard: its last failure reads like a quota" in text
    shown = ok_json(home, "--board", "default", "show", TRIAGE)
    assert "no model can triage it: auxiliary.kanban_decomposer is not set" in shown["hermes_reasons"][0]["words"]
    assert tree_state(home.root) == before


def _gateway_pid_file(root: Path, pid: int, start_time) -> None:
    """gateway.pid as hermes 0.19.0 writes it (gateway/status.py: pid, kind, argv, start_time)."""
    (root / "gateway.pid").write_text(json.dumps({"pid": pid, "kind": "hermes-gateway",
                                                  "argv": ["hermes", "gateway", "run"], "start_time": start_time}))


def test_the_gateway_runs_only_when_its_pid_file_names_a_verified_live_gateway(home, children):
    from engine import identity
    from engine.hermes.reasons import gateway_state

    gateway = children([sys.executable, "-c", "import time; time.sleep(600)", "hermes", "gateway", "run"])
    stranger = children(["sleep", "600"])
    for proc in (gateway, stranger):
        assert identity.read_stat(proc.pid) is not None
    ticks = identity.read_stat(gateway.pid).start_ticks
    _gateway_pid_file(home.root, gateway.pid, ticks)
    assert gateway_state(home.root).running
    _gateway_pid_file(home.root, gateway.pid, ticks + 1)  # the pid was reused: not the gateway hermes wrote
    state = gateway_state(home.root)
    assert not state.running and "been reused" in state.words
    _gateway_pid_file(home.root, stranger.pid, identity.read_stat(stranger.pid).start_ticks)
    assert not gateway_state(home.root).running and "is not hermes's gateway" in gateway_state(home.root).words
    (home.root / "gateway.pid").write_text(str(gateway.pid))  # a bare pid: never trusted
    assert not gateway_state(home.root).running and "no pid with a start time" in gateway_state(home.root).words
    _gateway_pid_file(home.root, gateway.pid, ticks)
    data = ok_json(home, "--board", "default", "list")
    assert data["gateway"] == {"running": True, "pid": gateway.pid,
                               "words": f"hermes's gateway runs (pid {gateway.pid}) and dispatches"}
    assert os.kill(gateway.pid, 0) is None and os.kill(stranger.pid, 0) is None  # nobody was signalled


# --------------------------------------------------------------------------------------
# Who owns a process
# --------------------------------------------------------------------------------------

CARD_PROC, WATCH_PROC = "proc_ff6b59270d01", "proc_b678b0e74c93"


def ps(home: HomeLayout, *args: str):
    return run_cli("--home", str(home.root), "ps", *args, env=NO_HERMES, timeout=60)


def test_ps_shows_who_each_hermes_process_is_for(home):
    before = tree_state(home.root)
    r = ps(home, "--all", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert rows[CARD_PROC]["hermes_owner"] == {
        "task_id": WORKED, "session_key": "agent:main:telegram:dm:4242", "platform": "telegram", "chat_id": "4242",
        "thread_id": None, "user_name": "ada", "notify_on_complete": True, "watch_patterns": []}
    assert rows[CARD_PROC]["notify"] is True and rows[CARD_PROC]["alive"] is False  # stopped when written
    assert rows[WATCH_PROC]["watch"] == ["ERROR", "Traceback"]
    assert rows[WATCH_PROC]["hermes_owner"]["session_key"] == "agent:main:cli"
    text = ps(home, "--all").stdout
    assert (f"for card {WORKED}, telegram chat 4242 (ada), session agent:main:telegram:dm:4242, "
            "notifies on completion") in text
    assert "for session agent:main:cli, watches ERROR | Traceback" in text
    assert tree_state(home.root) == before


def test_a_profiles_own_processes_are_listed_and_spared(home, children):
    """A hermes profile is a home of its own (profiles/<name>/) with its own processes.json:
    its live process is listed (owner hermes-agent (writer)) and the pruner spares it."""
    from engine import identity
    from engine.hermes.processes import live_hermes_processes

    live = children(["sleep", "600"])
    entry = dict(json.loads((FIXTURE / "processes.json").read_text())[0])  # hermes's own entry, this pid
    entry.update(session_id="proc_0123456789ab", pid=live.pid,
                 host_start_time=identity.read_stat(live.pid).start_ticks)
    # A newer hermes writes every live process of its registry into each profile's file too.
    root_entries = json.loads((home.root / "processes.json").read_text())
    (home.root / "profiles" / "writer" / "processes.json").write_text(json.dumps([entry, *root_entries]))
    before = tree_state(home.root)
    listed = [row["id"] for row in json.loads(ps(home, "--all", "--json").stdout)]
    assert sorted(listed) == sorted(["proc_0123456789ab", CARD_PROC, WATCH_PROC])  # each once
    rows = {row["id"]: row for row in json.loads(ps(home, "--json").stdout)}
    assert rows["proc_0123456789ab"]["owner"] == "hermes-agent (writer)" and rows["proc_0123456789ab"]["alive"]
    assert [pid for pid, _fp, _label in live_hermes_processes(home.root)] == [live.pid]
    assert tree_state(home.root) == before and os.kill(live.pid, 0) is None


async def test_the_processes_pane_says_who_a_hermes_process_is_for(home, monkeypatch):
    from tests.support import wait_until_pilot as wait_until
    from tests.test_hermes_board import _app

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    app, _notes = _app(home)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: bool(app.query("#pane-tabs")))
        await pilot.press("2")
        pane = app.pane("processes")
        await wait_until(pilot, lambda: CARD_PROC in pane.row_ids)
        pane.table.focus()
        pane.show_session(CARD_PROC)
        await wait_until(pilot, lambda: f"for card {WORKED}, telegram chat 4242 (ada)"
                         in str(pane.query_one("#proc-detail").render()))
        await pilot.press("q")


# --------------------------------------------------------------------------------------
# Tokens and cost
# --------------------------------------------------------------------------------------


def test_usage_per_run_card_and_board_through_the_worker_session(home):
    before = tree_state(home.root)
    worked = ok_json(home, "--board", "default", "show", WORKED)["usage"]
    assert (worked["input_tokens"], worked["output_tokens"], worked["cost_usd"]) == (12000, 3400, 0.087)
    assert worked["runs"][0]["session_id"] == "20260601_101500_a1b2c3"
    assert worked["runs"][0]["model"] == "anthropic/claude-sonnet-4"
    by_hand = ok_json(home, "--board", "default", "show", BY_HAND)["usage"]
    assert by_hand["input_tokens"] is None and by_hand["unlinked_runs"] == 1  # not linked, never zero
    assert by_hand["runs"][0]["why"] == "the run records no worker session"
    board = ok_json(home, "--board", "default", "list")["usage"]
    assert (board["input_tokens"], board["linked_runs"], board["unlinked_runs"]) == (12000, 1, 3)
    text = kanban(home, "--board", "default", "show", BY_HAND).stdout
    assert "Usage\n  usage not linked (1 run(s): the run records no worker session)" in text
    boards = {b["slug"]: b["usage"] for b in ok_json(home, "boards")["boards"]}
    assert boards["default"]["cost_usd"] == 0.087 and boards["research"]["input_tokens"] is None
    assert tree_state(home.root) == before


def test_a_session_no_state_db_holds_is_not_linked(home):
    (home.root / "profiles" / "writer" / "state.db").unlink()
    run = ok_json(home, "--board", "default", "show", WORKED)["usage"]["runs"][0]
    assert not run["linked"] and run["input_tokens"] is None
    assert run["why"] == "its worker session 20260601_101500_a1b2c3 is in no state.db of this home"


# --------------------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------------------


async def test_the_pane_shows_the_current_board_and_switches_to_another(home, monkeypatch):
    """The pane opens hermes's current board (research), says which board it shows, and
    `b` (board.switch, also in the palette) lists both boards with their counts; Enter
    on `default` shows it. Nothing in the home changes."""
    from tests.test_hermes_board import _app
    from tests.test_kanban_pane import wait_for
    from widgets.board.board_modals import CardDetailsScreen
    from widgets.board.board_pane import BoardPane
    from widgets.board.board_switcher import BoardSwitchScreen

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    before = tree_state(home.root)
    app, _notes = _app(home)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: set(pane.cards) == set(RESEARCH))
        info = str(pane.query_one("#board-info").render())
        assert "hermes-agent's board research (kanban/boards/research/kanban.db)" in info
        await pilot.press("b")
        await wait_for(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        listed = [str(app.screen.query_one("#boards").get_option_at_index(i).prompt) for i in range(2)]
        assert listed[0].startswith("  default  Default") and "blocked 1, done 2, ready 1, triage 1" in listed[0]
        assert listed[1].startswith("● research  Research") and "hermes's current board" in listed[1]
        await pilot.press("up", "enter")
        await wait_for(pilot, lambda: GUARDED in pane.cards and not set(RESEARCH) & set(pane.cards))
        assert pane.column_ids("triage") == (TRIAGE,) and pane.column_ids("blocked") == (GAVE_UP,)
        await wait_for(pilot, lambda: "hermes-agent's board default (kanban.db)"
                       in str(pane.query_one("#board-info").render()))
        info = str(pane.query_one("#board-info").render())
        assert info.startswith("hermes's gateway is not running (no gateway.pid)")
        assert "guarded: auth/quota error" in str(pane.cards[GUARDED].prompt(0))
        assert "gave up after 1" in str(pane.cards[GAVE_UP].prompt(0))
        assert "triage: no model" in str(pane.cards[TRIAGE].prompt(0))
        cards = pane.query_one("#cards-blocked")
        cards.focus()
        cards.highlighted = 0
        await wait_for(pilot, lambda: "hermes: hermes gave up after 1 failure(s)"
                       in str(pane.query_one("#board-detail").render()))
        cards = pane.query_one("#cards-done")
        cards.focus()
        cards.highlighted = cards.get_option_index(WORKED)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_shown(app, CardDetailsScreen)
                       and "run 1: 12,000 in / 3,400 out tokens, $0.087" in app.screen._shown)
        await pilot.press("escape")
        await pilot.press("q")
    assert tree_state(home.root) == before


def test_the_switcher_is_a_binding_with_an_id():
    from hermes_tui.keymap import known_binding_ids

    assert {"board.switch", "board.switcher.cancel"} <= set(known_binding_ids())


async def test_o_on_a_hermes_card_follows_its_worker_log_live(home, monkeypatch):
    """`o` on a card of hermes's board follows hermes's own kanban/logs/<id>.log in the
    output view: lines hermes appends later appear too. The file is only read."""
    from tests.support import wait_until_pilot as wait_until
    from tests.test_hermes_board import _app
    from widgets.board.board_pane import BoardPane

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    (home.root / "kanban" / "current").unlink()  # the default board (hermes writes the file; a test setup step)
    logs = home.root / "kanban" / "logs"
    logs.mkdir(parents=True)
    log = logs / f"{GUARDED}.log"
    log.write_text("spawning worker\n")
    app, notes = _app(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_until(pilot, lambda: GUARDED in pane.cards)
        cards = pane.query_one("#cards-ready")
        cards.focus()
        cards.highlighted = cards.get_option_index(GUARDED)
        await pilot.press("o")
        output = app.pane("processes").output
        await wait_until(pilot, lambda: "spawning worker" in output.text())
        assert "hermes worker log" in str(output.title_text()) and "read-only" in output.state
        with log.open("a") as fh:  # hermes's worker writes on
            fh.write("401 Unauthorized\n")
        await wait_until(pilot, lambda: "401 Unauthorized" in output.text())
        await pilot.press("1")
        cards = pane.query_one("#cards-triage")
        cards.focus()
        cards.highlighted = 0
        await pilot.press("o")
        await wait_until(pilot, lambda: any(f"{TRIAGE} has no worker log yet (kanban/logs/{TRIAGE}.log)" in n
                                            for n in notes))
        await pilot.press("q")


@pytest.mark.parametrize("args", [["reassign", "t_abcd", "w"], ["schedule", "t_abcd"], ["promote", "t_abcd"],
                                  ["link", "t_abcd", "t_efgh"], ["edit", "t_abcd", "--result", "r"]],
                         ids=lambda a: a[0])
def test_hermes_verbs_are_refused_in_one_line_on_our_own_board(tmp_path, args):
    own = tmp_path / "own"
    own.mkdir()
    assert run_cli("--home", str(own), "kanban", "create", "x", env=NO_HERMES).returncode == 0
    r = run_cli("--home", str(own), "kanban", *args, env=NO_HERMES)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "is a verb of hermes-agent's board" in r.stderr


REAL = os.environ.get("HERMES_AGENT_BIN", "")


@pytest.mark.skipif(not (REAL and os.access(REAL, os.X_OK)),
                    reason="set HERMES_AGENT_BIN to a real hermes-agent 0.19.0 `hermes` to run")
def test_real_hermes_carries_out_the_verbs_on_a_named_board(home, tmp_path):
    """Opt-in (like tests/test_hermes_board_real.py): the real hermes CLI does each change
    on the research board, and hermes itself reads the result back."""
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hermes").symlink_to(REAL)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"}
    read, summarise = "t_d110b468", "t_041fcace"

    def ok(*args):
        r = kanban(home, "--board", "research", *args, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    ok("link", read, summarise)
    ok("schedule", read, "after the survey is out")
    refused = kanban(home, "--board", "research", "promote", read, env=env)  # hermes: only todo or blocked
    assert refused.returncode == 1 and "promote only applies to 'todo' or 'blocked'" in refused.stderr
    ok("unblock", read)
    ok("block", read, "--reason", "waiting")
    ok("promote", read, "--force")
    ok("reassign", summarise, "writer")
    ok("unlink", read, summarise)
    ok("complete", read, "--summary", "read")
    ok("edit", read, "--result", "notes in the wiki")
    shown = ok_json(home, "--board", "research", "show", read)
    assert shown["status"] == "done" and shown["result"] == "notes in the wiki"
    kinds = [e["kind"] for e in shown["events"]]
    assert kinds[2:] == ["scheduled", "unblocked", "commented", "blocked", "promoted_manual", "completed", "edited"], \
        kinds
    assert ok_json(home, "--board", "research", "show", summarise)["assignee"] == "writer"
    theirs = subprocess.run([REAL, "kanban", "--board", "research", "list", "--json"], capture_output=True, text=True,
                            env={**os.environ, "HERMES_HOME": str(home.root)}, timeout=120)
    assert theirs.returncode == 0 and read in theirs.stdout, theirs.stderr
    assert not (home.root / "kanban.db-wal").exists()  # the default board was not touched


# --------------------------------------------------------------------------------------
# Acceptance: everything above, then every file of the home is as hermes wrote it
# --------------------------------------------------------------------------------------


def file_hashes(root: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def test_acceptance_every_read_shows_what_hermes_knows_and_every_file_stays_identical(home, monkeypatch):
    from tests.support import wait_until_pilot as wait_until
    from tests.test_hermes_board import _app
    from widgets.board.board_modals import CardDetailsScreen
    from widgets.board.board_pane import BoardPane
    from widgets.board.board_switcher import BoardSwitchScreen

    assert file_hashes(home.root) == file_hashes(FIXTURE)  # the copy is hermes's home
    before = tree_state(home.root)
    boards = ok_json(home, "boards")["boards"]
    assert [(b["slug"], b["total"], b["current"]) for b in boards] == [("default", 5, False), ("research", 2, True)]
    for board, cards in (("default", [WORKED, BY_HAND, GAVE_UP, GUARDED, TRIAGE]), ("research", list(RESEARCH))):
        listed = ok_json(home, "--board", board, "list", "--all")
        assert sorted(t["id"] for t in listed["tasks"]) == sorted(cards)
        for card in cards:
            assert ok_json(home, "--board", board, "show", card)["id"] == card
    default = {t["id"]: t for t in ok_json(home, "--board", "default", "list")["tasks"]}
    assert default[GAVE_UP]["hermes_reasons"][0]["code"] == "gave_up"
    assert default[GUARDED]["hermes_reasons"][0]["code"] == "respawn_guarded:blocker_auth"
    assert ok_json(home, "--board", "default", "show", WORKED)["usage"]["input_tokens"] == 12000
    rows = {row["id"]: row for row in json.loads(ps(home, "--all", "--json").stdout)}
    assert rows[CARD_PROC]["hermes_owner"]["task_id"] == WORKED and rows[WATCH_PROC]["watch"] == ["ERROR", "Traceback"]

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    app, _notes = _app(home)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_until(pilot, lambda: set(pane.cards) == set(RESEARCH))
        await pilot.press("b")
        await wait_until(pilot, lambda: screen_shown(app, BoardSwitchScreen))
        await pilot.press("up", "enter")
        await wait_until(pilot, lambda: GAVE_UP in pane.cards)
        await wait_until(pilot, lambda: "gave up after 1" in str(pane.cards[GAVE_UP].prompt(0)))
        cards = pane.query_one("#cards-done")
        cards.focus()
        cards.highlighted = cards.get_option_index(WORKED)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_shown(app, CardDetailsScreen) and "12,000 in" in app.screen._shown)
        await pilot.press("escape")
        await pilot.press("2")
        await wait_until(pilot, lambda: CARD_PROC in app.pane("processes").row_ids)
        await pilot.press("q")
    assert tree_state(home.root) == before
    assert file_hashes(home.root) == file_hashes(FIXTURE)
