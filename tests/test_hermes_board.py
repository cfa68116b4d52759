"""Issue 11, "Read its board": hermes-agent's own kanban.db (the fixture home the real
hermes-agent 0.19.0 wrote, copied per test) is shown by ``kanban list/show/tail`` and the
board pane through a read-only adapter, stays byte-identical with no -wal/-shm beside
it, takes changes only through hermes's own CLI (a fake ``hermes`` on PATH stands in
for it here: a boundary, recording its argv), and is never dispatched by hermes-tui."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from engine.config import load_config
from engine.home import HomeLayout
from tests.conftest import REPO, run_cli
from tests.support import screen_shown
from tests.support.notes import capture_notes
from tests.test_hermes_home import FIXTURE, tree_state
from tests.test_kanban_pane import wait_for

DONE_CARD = "t_20f93ac7"     # "Fix the flaky test": commented, then completed
WRITER_CARD = "t_1c459297"   # "Write the release notes", assigned to writer
NO_HERMES = {"PATH": os.path.dirname(sys.executable) + os.pathsep + "/nonexistent-bin", "HERMES_AUTO_PRUNE": ""}


@pytest.fixture
def hermes(tmp_path) -> HomeLayout:
    """A copy of the home hermes-agent 0.19.0 wrote (its kanban.db, config, ...), with a
    worker log where hermes keeps them (kanban/logs/<id>.log)."""
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    logs = root / "kanban" / "logs"
    logs.mkdir(parents=True)
    (logs / f"{DONE_CARD}.log").write_text("looking at the test\nfixed: a race on the gate file\n")
    return HomeLayout(root)


def cli(home: HomeLayout, *args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_cli("--home", str(home.root), "kanban", *args, env={**NO_HERMES, **(env or {})}, timeout=timeout)


def side_files(home: HomeLayout) -> list[str]:
    return sorted(p.name for p in home.root.iterdir() if p.name.startswith("kanban.db-"))


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def test_list_shows_hermes_cards_and_leaves_the_home_as_it_was(hermes):
    before = tree_state(hermes.root)
    r = cli(hermes, "list")
    assert r.returncode == 0, r.stderr
    assert "Write the release notes" in r.stdout and "Review the plan" in r.stdout
    assert "Fix the flaky test" in r.stdout and "writer" in r.stdout
    tasks = json.loads(cli(hermes, "list", "--all", "--json").stdout)["tasks"]
    assert {t["id"]: t["status"] for t in tasks} == {WRITER_CARD: "ready", "t_594173db": "ready", DONE_CARD: "done"}
    assert tree_state(hermes.root) == before and side_files(hermes) == []


def test_show_has_hermes_events_and_comments(hermes):
    before = tree_state(hermes.root)
    r = cli(hermes, "show", "20f9")
    assert r.returncode == 0, r.stderr
    assert "Comments (1)" in r.stdout and "default: started on it" in r.stdout
    assert "completed" in r.stdout and "status      done" in r.stdout
    data = json.loads(cli(hermes, "show", DONE_CARD, "--json").stdout)
    assert [c["body"] for c in data["comments"]] == ["started on it"]
    assert [e["kind"] for e in data["events"]] == ["created", "commented", "completed"]
    assert tree_state(hermes.root) == before and side_files(hermes) == []


def test_tail_prints_hermes_events(hermes):
    before = tree_state(hermes.root)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(hermes.root), "kanban", "tail"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **NO_HERMES}, cwd=REPO)
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if f"{DONE_CARD} completed" in line:
                break
        assert any(f"{DONE_CARD} commented" in line for line in seen), seen
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert tree_state(hermes.root) == before and side_files(hermes) == []


def test_newer_columns_tables_and_statuses_are_tolerated(hermes):
    """A newer hermes adds columns (worker_started_at), tables and statuses: the reader
    takes what it knows and shows every status the cards hold."""
    con = sqlite3.connect(hermes.shared_kanban_db)
    con.execute("ALTER TABLE tasks ADD COLUMN worker_started_at TEXT")
    con.execute("ALTER TABLE tasks ADD COLUMN future_thing TEXT")
    con.execute("CREATE TABLE task_future (id INTEGER)")
    con.execute("UPDATE tasks SET status = 'triage', worker_started_at = 'x' WHERE id = ?", (WRITER_CARD,))
    con.execute("UPDATE tasks SET status = 'parked' WHERE id = 't_594173db'")
    con.commit()
    con.close()
    tasks = json.loads(cli(hermes, "list", "--json").stdout)["tasks"]
    assert {t["id"]: t["status"] for t in tasks} == {WRITER_CARD: "triage", "t_594173db": "parked", DONE_CARD: "done"}
    assert [t["worker_started_at"] for t in tasks if t["id"] == WRITER_CARD] == ["x"]
    assert "triage" in cli(hermes, "list", "--status", "triage").stdout


async def test_the_board_view_keeps_only_the_newest_finished_cards(hermes):
    from engine.kanban.backends.hermes.board import HermesBoardService

    con = sqlite3.connect(hermes.shared_kanban_db)
    con.executemany("INSERT INTO tasks (id, title, status, created_at, completed_at) VALUES (?, ?, 'done', 1, ?)",
                    [(f"t_done{n:04d}", f"old {n}", 100 + n) for n in range(30)])
    con.commit()
    con.close()
    service = await HermesBoardService.open(hermes.shared_kanban_db, home=hermes, settings=load_config(
        hermes.config_file))
    view = await service.view(("ready", "done"), recent_limit=5)
    done = [t.id for t in view.tasks if t.status == "done"]
    assert done == [DONE_CARD, "t_done0029", "t_done0028", "t_done0027", "t_done0026"]
    assert view.counts["done"] == 31 and sum(t.status == "ready" for t in view.tasks) == 2


def test_a_board_hermes_holds_open_is_read_through_its_wal(hermes):
    """While hermes has its board open in WAL mode (its -wal/-shm exist), a read sees
    its newest commit and leaves exactly the files hermes has."""
    con = sqlite3.connect(hermes.shared_kanban_db)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_feed0001', 'Only in the WAL', "
                "'ready', 1796038800)")
    con.commit()
    try:
        assert side_files(hermes) == ["kanban.db-shm", "kanban.db-wal"]
        r = cli(hermes, "list")
        assert r.returncode == 0 and "Only in the WAL" in r.stdout, r.stderr
        assert side_files(hermes) == ["kanban.db-shm", "kanban.db-wal"]
    finally:
        con.close()
    assert side_files(hermes) == []


def test_the_light_board_check_knows_our_application_id():
    from engine.kanban.backends.hermes import board_file
    from engine.kanban.backends.sqlite import store

    assert board_file.OUR_APPLICATION_ID == store.APPLICATION_ID


# --------------------------------------------------------------------------------------
# Changes: through hermes's CLI only
# --------------------------------------------------------------------------------------

ACTIONS = [
    (["create", "New card", "--assignee", "writer"], ["create", "--json", "--assignee", "writer", "--", "New card"]),
    (["complete", "20f9", "--summary", "all green"], ["complete", "--summary", "all green", "--", DONE_CARD]),
    (["block", "1c45", "--reason", "needs a key"], ["block", "--", WRITER_CARD, "needs a key"]),
    (["unblock", "1c45"], ["unblock", "--", WRITER_CARD]),
    (["assign", "1c45", "editor"], ["assign", "--", WRITER_CARD, "editor"]),
    (["assign", "1c45", "-"], ["assign", "--", WRITER_CARD, "none"]),
    (["archive", "20f9"], ["archive", "--", DONE_CARD]),
    (["comment", "20f9", "--", "-looks good"], ["comment", "--", DONE_CARD, "-looks good"]),
    (["reclaim", "1c45", "--reason", "stuck"], ["reclaim", "--reason", "stuck", "--", WRITER_CARD]),
    (["reassign", "1c45", "editor", "--reclaim"], ["reassign", "--reclaim", "--", WRITER_CARD, "editor"]),
    (["schedule", "1c45", "after the release"], ["schedule", "--", WRITER_CARD, "after the release"]),
    (["promote", "1c45", "--force"], ["promote", "--force", "--", WRITER_CARD]),
    (["link", "1c45", "5941"], ["link", "--", WRITER_CARD, "t_594173db"]),
    (["unlink", "1c45", "5941"], ["unlink", "--", WRITER_CARD, "t_594173db"]),
    (["edit", "20f9", "--result", "fixed"], ["edit", "--result", "fixed", "--", DONE_CARD]),
]


@pytest.mark.parametrize(("args", "_hermes_argv"), ACTIONS, ids=lambda v: " ".join(v))
def test_without_hermes_on_path_every_action_is_refused_in_one_line(hermes, args, _hermes_argv):
    before = tree_state(hermes.root)
    r = cli(hermes, *args)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "`hermes` is not on PATH" in r.stderr and "Traceback" not in r.stderr
    assert tree_state(hermes.root) == before


FAKE_HERMES = """#!{python}
# Stands in for hermes-agent's CLI (a boundary): records its argv and environment, and
# answers like hermes 0.19.0 does (create --json prints the card; the others a line).
import json, os, sys
with open({record!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "home": os.environ.get("HERMES_HOME"),
                        "db": os.environ.get("HERMES_KANBAN_DB")}}) + "\\n")
if os.environ.get("FAKE_HERMES_SAYS_NO"):  # hermes 0.19.0 refuses many changes with exit 0
    print("cannot complete t_x (unknown id or terminal state)", file=sys.stderr)
    sys.exit(0)
if os.environ.get("FAKE_HERMES_FAIL"):
    print("kanban: cannot complete t_x (unknown id or terminal state)", file=sys.stderr)
    sys.exit(1)
argv = sys.argv[1:]
if argv[1:2] == ["--board"]:
    argv = argv[:1] + argv[3:]
if os.environ.get("FAKE_HERMES_APPLIES") and argv[:2] == ["kanban", "assign"]:  # as hermes does
    import sqlite3
    task, who = argv[-2], argv[-1]
    db = os.environ.get("HERMES_KANBAN_DB") or os.path.join(os.environ["HERMES_HOME"], "kanban.db")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tasks SET assignee = ? WHERE id = ?", (None if who == "none" else who, task))
if argv[:2] == ["kanban", "create"]:
    print(json.dumps({{"id": "{card}", "title": "New card", "status": "ready"}}, indent=2))
else:
    print("Done")
"""


def install_fake_hermes(tmp_path, card: str):
    """A stand-in ``hermes`` on a PATH of its own: (env with that PATH, its record file)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "hermes-calls.jsonl"
    script = bin_dir / "hermes"
    script.write_text(FAKE_HERMES.format(python=sys.executable, record=str(record), card=card))
    script.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}"}
    return env, record


@pytest.fixture
def fake_hermes(tmp_path):
    return install_fake_hermes(tmp_path, WRITER_CARD)


@pytest.mark.parametrize(("args", "hermes_argv"), ACTIONS, ids=lambda v: " ".join(v))
def test_with_hermes_on_path_the_action_calls_hermes_kanban(hermes, fake_hermes, args, hermes_argv):
    env, record = fake_hermes
    before = hermes.shared_kanban_db.read_bytes()
    r = cli(hermes, *args, env=env)
    assert r.returncode == 0, r.stderr
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [c["argv"] for c in calls] == [["kanban", "--board", "default", *hermes_argv]]
    assert calls[0]["home"] == str(hermes.root) and calls[0]["db"] == str(hermes.shared_kanban_db)
    assert hermes.shared_kanban_db.read_bytes() == before  # hermes-tui itself wrote nothing


def test_a_failing_hermes_is_one_line_with_its_reason(hermes, fake_hermes):
    env, _record = fake_hermes
    r = cli(hermes, "complete", "20f9", env={**env, "FAKE_HERMES_FAIL": "1"})
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "hermes kanban complete failed: kanban: cannot complete" in r.stderr


def test_a_refusal_hermes_prints_with_exit_0_is_a_failure_too(hermes, fake_hermes):
    """hermes 0.19.0 answers e.g. `complete` of a card it cannot complete with exit 0,
    nothing on stdout and its reason on stderr: that is a failure, not "Completed"."""
    env, _record = fake_hermes
    r = cli(hermes, "complete", "20f9", env={**env, "FAKE_HERMES_SAYS_NO": "1"})
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and r.stdout == "", (r.stdout, r.stderr)
    assert "hermes kanban complete failed: cannot complete t_x" in r.stderr


@pytest.mark.parametrize("verb", ["dispatch", "daemon"])
def test_dispatch_and_daemon_refuse_hermes_board(hermes, fake_hermes, verb):
    env, record = fake_hermes
    before = tree_state(hermes.root)
    r = cli(hermes, verb, env=env)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "hermes's gateway dispatches it" in r.stderr and r.stdout == ""
    assert tree_state(hermes.root) == before and not record.exists()


def test_create_from_stdin_is_refused_on_hermes_board(hermes, fake_hermes):
    env, record = fake_hermes
    before = hermes.shared_kanban_db.read_bytes()
    r = run_cli("--home", str(hermes.root), "kanban", "create", "--stdin", input="one\ntwo\n",
                env={**NO_HERMES, **env})
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "create --stdin needs hermes-tui's own board" in r.stderr and r.stdout == ""
    assert not record.exists() and hermes.shared_kanban_db.read_bytes() == before


@pytest.mark.parametrize("verb", ["review", "heartbeat"])
def test_verbs_hermes_tui_cannot_route_are_refused(hermes, fake_hermes, verb):
    env, record = fake_hermes
    r = cli(hermes, verb, "20f9", env=env)
    assert r.returncode == 1 and "not available on hermes-agent's board" in r.stderr, r.stderr
    assert not record.exists()


# --------------------------------------------------------------------------------------
# The board pane
# --------------------------------------------------------------------------------------


def _app(home: HomeLayout):
    """The app on ``home`` and the text of every notification it shows."""
    from hermes_tui.app import HermesApp

    app = HermesApp(home, load_config(home.config_file))
    return app, capture_notes(app)


async def test_the_pane_shows_hermes_cards_read_only_and_changes_nothing(hermes, monkeypatch):
    from widgets.board.board_modals import CardDetailsScreen
    from widgets.board.board_pane import BoardPane

    monkeypatch.setenv("PATH", NO_HERMES["PATH"])
    hermes.config_file.write_text(hermes.config_file.read_text())  # same bytes: the config is hermes's
    before = tree_state(hermes.root)
    app, notes = _app(hermes)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        assert pane.column_ids("ready") == (WRITER_CARD, "t_594173db") and pane.column_ids("done") == (DONE_CARD,)
        assert pane.query("#column-triage") and pane.query("#column-scheduled")
        info = str(pane.query_one("#board-info").render())
        assert "hermes-agent's board default (kanban.db)" in info and "read-only" in info
        assert sum("not on PATH" in n for n in notes) == 1  # said once
        cards = pane.query_one("#cards-done")
        cards.focus()
        cards.highlighted = 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_shown(app, CardDetailsScreen)
                        and "started on it" in app.screen._shown and "race on the gate" in app.screen._shown)
        await pilot.press("escape")
        for key in ("n", "a", "e", "u", "D"):  # dimmed in the Footer: each does nothing and says why
            await pilot.press(key)
            await pilot.pause()
        assert not isinstance(app.screen, CardDetailsScreen)
        await wait_for(pilot, lambda: sum("not on PATH" in n for n in notes) == 1 + 4)
        await wait_for(pilot, lambda: any("gateway dispatches this board" in n for n in notes))
        app.dispatch_loop.request()
        await wait_for(pilot, lambda: app.dispatch_loop.refused)
        await pilot.press("q")
    assert tree_state(hermes.root) == before and side_files(hermes) == []


async def test_pane_actions_go_through_hermes_kanban(hermes, fake_hermes, monkeypatch):
    """With hermes on PATH the pane's archive (after its confirmation) and new-card form
    run ``hermes kanban``; hermes-tui writes nothing into hermes's board itself."""
    from widgets.board.board_modals import NewCardScreen
    from widgets.board.board_pane import BoardPane
    from widgets.common.confirm import ConfirmModal

    env, record = fake_hermes
    monkeypatch.setenv("PATH", env["PATH"])
    before = hermes.shared_kanban_db.read_bytes()
    app, notes = _app(hermes)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        assert "changes go through" in str(pane.query_one("#board-info").render())
        assert not any("not on PATH" in n for n in notes)
        cards = pane.query_one("#cards-done")
        cards.focus()
        cards.highlighted = 0
        await pilot.press("a")
        await wait_for(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: record.exists() and len(record.read_text().splitlines()) == 1)
        cards = pane.query_one("#cards-ready")
        cards.focus()
        cards.highlighted = cards.get_option_index(WRITER_CARD)
        await pilot.press("greater_than_sign")  # ready -> review: no hermes verb for it
        await wait_for(pilot, lambda: any("not available on hermes-agent's board" in n for n in notes))
        assert len(record.read_text().splitlines()) == 1
        await pilot.press("n")
        await wait_for(pilot, lambda: screen_shown(app, NewCardScreen))
        await pilot.press(*"From the pane")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(record.read_text().splitlines()) == 2)
        await pilot.press("q")
    calls = [json.loads(line)["argv"] for line in record.read_text().splitlines()]
    assert calls[0] == ["kanban", "--board", "default", "archive", "--", DONE_CARD]
    assert calls[1][:5] == ["kanban", "--board", "default", "create", "--json"] and calls[1][-2:] == ["--", "From the pane"]
    assert hermes.shared_kanban_db.read_bytes() == before


async def test_the_detail_line_shows_a_change_made_here_at_once(hermes, fake_hermes, monkeypatch):
    """Issue 37.4: after `e` -> coder on hermes's board the line under the columns says
    coder as soon as the board shows the change, not when the cursor next moves."""
    from widgets.board.board_pane import BoardPane

    env, record = fake_hermes
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FAKE_HERMES_APPLIES", "1")
    app, notes = _app(hermes)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_for(pilot, lambda: len(pane.cards) == 3)
        cards = pane.query_one("#cards-ready")
        cards.focus()
        cards.highlighted = cards.get_option_index(WRITER_CARD)
        await pilot.pause()
        detail = pane.query_one("#board-detail")
        assert f"{WRITER_CARD} · ready · writer" in detail._shown_text
        await pilot.press("e")
        field = app.screen.query_one("#assignee")
        field.value = "coder"
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.cards[WRITER_CARD].task.assignee == "coder")
        await pilot.pause()
        assert f"{WRITER_CARD} · ready · coder" in detail._shown_text  # no cursor move in between
        await pilot.press("q")
