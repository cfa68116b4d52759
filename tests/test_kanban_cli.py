"""The ``hermes-tui kanban`` commands through the real CLI (subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli
from tests.support import wait_until


@pytest.fixture
def board_env(board_backend, monkeypatch):
    """Run the CLI against the home's SQLite board, or (postgres) a fresh PostgreSQL board
    named by $HERMES_KANBAN_DATABASE_URL: the same commands, the same answers."""
    if board_backend:
        monkeypatch.setenv("HERMES_KANBAN_DATABASE_URL", board_backend)
    return board_backend


def kanban(home, *args, env=None):
    return run_cli("--home", str(home.root), "kanban", *args, env=env)


def create(home, *args) -> str:
    r = kanban(home, "create", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["id"]


def test_create_list_show_json(home, board_env):
    parent = create(home, "parent card", "--assignee", "w", "--priority", "3", "--body", "line one\nline two")
    r = kanban(home, "create", "child card", "--parent", parent, "--max-retries", "4", "--max-runtime", "60",
               "--json")
    assert r.returncode == 0
    child = json.loads(r.stdout)
    assert child["status"] == "todo" and child["id"].startswith("t_") and len(child["id"]) == 10

    listing = json.loads(kanban(home, "list", "--json").stdout)["tasks"]
    assert {t["id"]: t["status"] for t in listing} == {parent: "ready", child["id"]: "todo"}
    only_todo = json.loads(kanban(home, "list", "--status", "todo", "--json").stdout)["tasks"]
    assert [t["id"] for t in only_todo] == [child["id"]]

    shown = json.loads(kanban(home, "show", child["id"][:6], "--json").stdout)
    assert shown["parent_ids"] == [parent]
    assert (shown["max_retries"], shown["max_runtime_seconds"]) == (4, 60)
    assert shown["runs"] == [] and shown["events"][0]["kind"] == "created"

    text = kanban(home, "show", parent).stdout
    assert "parent card" in text and "line two" in text and child["id"] in text
    assert "child card" in kanban(home, "list").stdout


def test_operator_moves_and_their_refusals(home, board_env):
    card = create(home, "card")
    r = kanban(home, "unblock", card)
    assert r.returncode == 1 and r.stderr.strip() == f"hermes-tui: cannot unblock {card}: it is ready, not blocked"
    assert kanban(home, "block", card, "--reason", "needs a password").returncode == 0
    out = kanban(home, "unblock", card).stdout
    assert out.strip() == f"Unblocked {card}  (blocked -> ready)"
    r = kanban(home, "complete", card, "--summary", "by hand", "--json")
    assert json.loads(r.stdout) == {"id": card, "from_status": "ready", "status": "done", "worker": None}
    r = kanban(home, "reclaim", card)
    assert r.returncode == 1 and "not running" in r.stderr
    assert kanban(home, "archive", card).stdout.startswith(f"Archived {card}")
    assert kanban(home, "list", "--json").stdout.count(card) == 0
    assert kanban(home, "list", "--all", "--json").stdout.count(card) == 1


def test_worker_calls_for_another_card_or_run_are_refused(home, board_env):
    mine = create(home, "mine")
    other = create(home, "other")
    env = {"HERMES_KANBAN_TASK": mine, "HERMES_KANBAN_RUN_ID": "7"}
    r = kanban(home, "complete", other, env=env)
    assert r.returncode == 1
    assert r.stderr.strip() == f"hermes-tui: refused: this worker works card {mine}, not {other}"
    r = kanban(home, "complete", mine, env=env)
    assert r.returncode == 1 and "run 7 is not the current run" in r.stderr
    r = kanban(home, "heartbeat", mine)
    assert r.returncode == 1 and "heartbeat is a worker call" in r.stderr
    r = kanban(home, "complete", mine, env={"HERMES_KANBAN_TASK": mine, "HERMES_KANBAN_RUN_ID": "x"})
    assert r.returncode == 2
    shown = json.loads(kanban(home, "show", mine, "--json").stdout)
    assert shown["status"] == "ready"


def test_bad_input_is_one_line_with_the_right_exit_code(home, tmp_path):
    r = kanban(home, "show", "t_nothere")
    assert r.returncode == 1 and r.stderr == "hermes-tui: no card 't_nothere' on this board\n"
    r = kanban(home)
    assert r.returncode == 2 and "needs a verb" in r.stderr
    r = kanban(home, "create", "x", "--priority", "high")
    assert r.returncode == 2
    r = kanban(home, "create", "x", "--parent", "t_nothere")
    assert r.returncode == 1 and "no card" in r.stderr
    bogus = tmp_path / "notes.db"
    bogus.write_text("my notes, not a board\n")
    r = kanban(home, "--db", str(bogus), "list")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert "not an SQLite database" in r.stderr
    assert bogus.read_text() == "my notes, not a board\n"


def test_db_flag_and_env_select_a_shared_board(home, tmp_path):
    shared = tmp_path / "shared.db"
    card = json.loads(kanban(home, "create", "shared card", "--db", str(shared), "--json").stdout)["id"]
    assert shared.exists() and not home.kanban_db.exists()
    r = run_cli("--home", str(home.root), "kanban", "show", card, "--json",
                env={"HERMES_KANBAN_DB": str(shared)})
    assert json.loads(r.stdout)["title"] == "shared card"


def test_dispatch_json_spawns_a_real_worker_and_reports_reasons(home, board_env):
    home.config_file.write_text(
        "kanban:\n"
        "  max_in_progress: 1\n"
        "  profiles:\n"
        f"    w: '{sys.executable} -m hermes_tui kanban complete \"$HERMES_KANBAN_TASK\" --summary fine'\n")
    first = create(home, "first", "--assignee", "w", "--priority", "9")
    second = create(home, "second", "--assignee", "w")
    nobody = create(home, "nobody")
    r = kanban(home, "dispatch", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert [s["task_id"] for s in result["spawned"]] == [first] and result["spawned"][0]["pid"] > 0
    assert {s["task_id"]: s["reason"] for s in result["skipped"]} == {second: "at_capacity",
                                                                      nobody: "skipped_unassigned"}
    held = {s["task_id"]: s for s in result["skipped"]}[second]
    assert (held["running"], held["limit"]) == (1, 1)  # the code and its numbers stay in --json
    for key in ("reclaimed", "crashed", "timed_out", "reaped_terminal_workers", "promoted", "skipped_locked",
                "held_back"):
        assert key in result
    wait_until(lambda: json.loads(kanban(home, "show", first, "--json").stdout)["status"] == "done",
               what="the worker completing its card")
    text = kanban(home, "dispatch").stdout
    assert f"- {second}  ->  w" in text
    assert "Held back (unassigned, and no default assignee is set): " + nobody in text
    assert "skipped_unassigned" not in text  # words for people, codes for --json


def test_dispatch_text_says_why_nothing_spawned(home, board_env):
    home.config_file.write_text("kanban:\n  dispatch_profiles: []\n  profiles:\n    w: 'true'\n")
    create(home, "held", "--assignee", "w")
    out = kanban(home, "dispatch").stdout
    assert "Spawned:                0" in out
    assert out.strip().endswith("Last tick held back: 1 card assigned to 'w', not a profile this machine can spawn")
    assert "skipped_nonspawnable" not in out


def _start(home, *args) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("HERMES_HOME", None)
    return subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def _read_until(proc: subprocess.Popen, needle: str, timeout: float = 30) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline, f"never saw {needle!r}; got {seen!r}"
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen += line
    return seen


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_daemon_ticks_and_stops_cleanly(home, sig, board_env):
    home.config_file.write_text("kanban:\n  profiles:\n    w: 'true'\n  dispatch_profiles: []\n")
    create(home, "held back", "--assignee", "w")
    proc = _start(home, "daemon", "--interval", "0.2")
    try:
        seen = _read_until(proc, "Last tick held back: 1 card assigned to 'w', not a profile this machine can spawn")
        assert seen.startswith("Dispatching every 0.2s")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert "Stopped after" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tail_prints_new_events_until_ctrl_c(home, board_env):
    card = create(home, "watched")
    proc = _start(home, "tail", card)
    try:
        _read_until(proc, f"{card} created")
        assert kanban(home, "block", card, "--reason", "waiting for access").returncode == 0
        seen = _read_until(proc, "blocked")
        assert "reason=waiting for access" in seen
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_assign_and_relative_db_paths(home, tmp_path):
    card = create(home, "card", "--assignee", "a")
    r = kanban(home, "assign", card[:6], "b")
    assert r.returncode == 0 and r.stdout.strip() == f"Assigned {card} to b"
    assert json.loads(kanban(home, "show", card, "--json").stdout)["assignee"] == "b"
    assert kanban(home, "assign", card, "-").stdout.strip() == f"Assigned {card} to nobody"
    r = run_cli("--home", str(home.root), "kanban", "--db", "rel.db", "create", "here", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "rel.db").exists()


def test_a_short_id_prefix_archives_nothing_and_is_a_usage_error(home, board_env):
    card = create(home, "keep me")
    for short in ("t_", "t_" + card[2:4]):
        r = kanban(home, "archive", short)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "at least 4" in r.stderr, r.stderr
    r = kanban(home, "show", card, "--json")
    assert json.loads(r.stdout)["status"] == "ready"


@pytest.mark.parametrize("args", [
    ("create", "x", "--priority", "99999999999999999999999"),
    ("create", "x", "--priority", "-99999999999999999999999"),
    ("create", "x", "--max-retries", "99999999999999999999999"),
    ("tail", "--lines", "-1"),
])
def test_numbers_out_of_range_are_usage_errors_not_internal_errors(home, args):
    r = kanban(home, *args)
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert "must be" in r.stderr
    assert not home.kanban_db.exists()  # nothing was created


def test_an_assignee_that_is_no_profile_here_creates_the_card_and_warns(home, board_env):
    home.config_file.write_text("kanban:\n  profiles:\n    coder:\n      command: 'true'\n    writer:\n"
                                "      command: 'true'\n")
    r = kanban(home, "create", "for elsewhere", "--assignee", "reviewer", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["status"] == "ready"
    assert "no profile here is called 'reviewer'" in r.stderr and "coder, writer" in r.stderr
    r = kanban(home, "create", "for here", "--assignee", "coder")
    assert r.returncode == 0 and r.stderr == ""


# --------------------------------------------------------------------------------------
# create --stdin: many cards, one transaction
# --------------------------------------------------------------------------------------


def listed(home) -> list[dict]:
    r = kanban(home, "list", "--all", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tasks"]


def test_create_from_stdin_makes_one_card_per_non_empty_line(home, board_env):
    parent = create(home, "parent")
    r = run_cli("--home", str(home.root), "kanban", "create", "--stdin", "--assignee", "w", "--priority", "2",
                "--parent", parent[:6], "--json", input="first\n\n  second  \n \t\nthird")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)["tasks"]
    assert len(made) == 3 and {c["status"] for c in made} == {"todo"}  # waiting on the open parent
    cards = {t["id"]: t for t in listed(home)}
    assert sorted(cards[c["id"]]["title"] for c in made) == ["first", "second", "third"]
    assert {(cards[c["id"]]["assignee"], cards[c["id"]]["priority"]) for c in made} == {("w", 2)}
    shown = json.loads(kanban(home, "show", made[0]["id"], "--json").stdout)
    assert shown["parent_ids"] == [parent]

    r = run_cli("--home", str(home.root), "kanban", "create", "--stdin", input="alpha\nbeta\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("Created t_") and "(ready, assignee=-)" in line
                                   for line in lines)
    assert len(listed(home)) == 6


def test_create_from_stdin_is_all_or_nothing(home, board_env):
    create(home, "already here")
    r = run_cli("--home", str(home.root), "kanban", "create", "--stdin", "--parent", "t_0000beef",
                input="one\ntwo\n")
    assert r.returncode == 1 and r.stderr == "hermes-tui: no card 't_0000beef' on this board\n"
    assert [t["title"] for t in listed(home)] == ["already here"]


@pytest.mark.parametrize(("args", "stdin", "words"), [
    ((), b"", "create needs a TITLE, or --stdin"),
    (("title", "--stdin"), b"one\n", "create needs a TITLE, or --stdin"),
    (("--stdin",), b"\n  \n\t\n", "no titles on stdin"),
    (("--stdin",), b"fine\n\xff\xfe\n", "stdin is not UTF-8 text"),
], ids=["no title", "title and --stdin", "blank lines only", "not utf-8"])
def test_create_from_stdin_usage_errors_create_nothing(home, args, stdin, words):
    r = subprocess.run([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "create", *args],
                       input=stdin, capture_output=True,
                       env={k: v for k, v in os.environ.items() if k != "HERMES_HOME"})
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err
    assert not home.kanban_db.exists()


# What `kanban create` must not load: shutil came with argparse's own formatter (and bz2
# and lzma with it) through the verbs' shared parent parser; the describing and wording
# modules print other verbs' output; secrets (with hashlib and random) made a card's id
# and a temporary file's name, which os.urandom makes as well; the workers' module (and
# engine.identity with it, 10 dataclasses and 3 enums between them) came with this
# host's id check and the transitions, and only a change that may signal a worker needs
# it; the records of a dispatch tick (DispatchResult with its 21 fields, Skip, SpawnedCard,
# HoldReason) were made by engine.kanban.models. Each was start-up time of every card created.
NOT_FOR_A_CREATE = ("shutil", "bz2", "lzma", "engine.kanban.describe", "engine.kanban.wording",
                    "engine.processes.redact", "textual", "secrets", "random", "engine.kanban.workers",
                    "engine.identity", "engine.kanban.tick_result")


def test_kanban_create_loads_only_what_a_create_needs(home):
    code = (
        "import sys\n"
        "from hermes_tui.cli import main\n"
        f"code = main(['--home', {str(home.root)!r}, 'kanban', 'create', 'a card', '--json'])\n"
        "made = [n for n in ('DispatchResult', 'Skip') if n in vars(sys.modules['engine.kanban.models'])]\n"
        "print(repr((code, sorted(sys.modules), made)), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HERMES_AUTO_PRUNE": "0", "HERMES_HOME": str(home.root)})
    code, modules, made = eval(out.stderr.strip().splitlines()[-1])
    assert code == 0 and json.loads(out.stdout)["status"] == "ready"
    assert [m for m in NOT_FOR_A_CREATE if m in modules] == []
    assert made == []  # a tick's records: not made by a command that dispatches nothing


def _verb_parsers(argv: list[str] | None = None) -> dict:
    """The verb parsers ``hermes-tui ARGV`` builds (every one without ARGV)."""
    import argparse

    from hermes_tui.cli import build_parser

    def choices(parser: argparse.ArgumentParser) -> dict:
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    return choices(choices(build_parser("kanban", argv))["kanban"])


def test_a_board_command_builds_only_its_verbs_parser():
    """`kanban VERB` builds VERB's parser alone (all 23 were a few ms of every board
    command), and it is the one the full build makes, help and all."""
    from hermes_tui.cli.kanban import VERBS

    full = _verb_parsers()
    assert set(full) == set(VERBS)
    for verb in VERBS:
        built = _verb_parsers(["--home", "h", "kanban", verb, "x"])
        assert list(built) == [verb]
        assert built[verb].format_help() == full[verb].format_help()
        assert built[verb].format_usage() == full[verb].format_usage()
    # The kanban parser's own options before the verb, as argparse reads them.
    for words in (["--db", "x"], ["--db=x"], ["--d", "x"], ["--board", "s"], ["--bo", "s"], ["--board=s"],
                  ["--db", "create", "--board", "list"]):
        assert list(_verb_parsers(["kanban", *words, "create"])) == ["create"], words


@pytest.mark.parametrize("words", [
    [], ["--help"], ["-h", "create"], ["--he", "create"], ["--db", "x", "--help", "create"], ["--", "create"],
    ["--frob", "create"], ["nope"], ["crea"], ["--db"], ["--board"],
])
def test_a_board_command_without_a_sure_verb_builds_every_verb(words):
    """Help before the verb lists every verb, an unknown one's error names them all, and
    anything argparse may read otherwise than as the verb: each verb is built, as before."""
    assert list(_verb_parsers(["kanban", *words])) == list(_verb_parsers())


def test_help_before_the_verb_lists_every_verb(home):
    r = kanban(home, "--help", "create")
    assert r.returncode == 0 and "create a card" in r.stdout and "every board of the home" in r.stdout
    r = kanban(home, "--he", "list")
    assert r.returncode == 0 and "backfill a done card's result" in r.stdout
    r = kanban(home, "--bo", "default", "crate", "x")
    assert r.returncode == 2 and "invalid choice: 'crate' (choose from 'create', 'list'," in r.stderr
