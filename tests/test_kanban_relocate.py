"""hermes-tui's own board moves out of ``<home>/kanban.db`` (hermes-agent's name) to
``<home>/hermes-tui/board.db`` on first use: by rename, byte-identical with its
-wal/-shm, never while a process has it open, once even when two processes race."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.home import HomeLayout
from engine.kanban.relocate import relocate_board
from tests.conftest import REPO, run_cli
from tests.test_hermes_home import FIXTURE

# An older hermes-tui's board at <home>/kanban.db, left by a process that died with its
# last commits in the WAL (os._exit: no checkpoint, -wal and -shm stay).
MAKE_OLD_BOARD = """
import asyncio, os, sys
from engine.kanban.models import NewTask
from engine.kanban.backends.sqlite.store import Board
from engine.kanban import transitions as tr

async def main():
    board = await Board.open(sys.argv[1])
    await board.conn.execute("PRAGMA wal_autocheckpoint = 0")
    await tr.create_tasks(board, [NewTask("old card one"), NewTask("old card two")], actor="test")
    os._exit(0)

asyncio.run(main())
"""

# Holds a connection to the board until the gate file appears.
HOLD_BOARD = """
import os, sqlite3, sys, time
con = sqlite3.connect(sys.argv[1])
con.execute("SELECT count(*) FROM tasks").fetchone()
print("holding", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
"""

# Waits for the gate, then moves (the race of two starting processes).
RACE = """
import json, os, sys, time
from engine.home import HomeLayout
from engine.kanban.relocate import relocate_board
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
r = relocate_board(HomeLayout(__import__("pathlib").Path(sys.argv[1])))
print(json.dumps({"path": str(r.path), "moved": r.moved, "deferred": r.deferred}))
"""


def board_files(path: Path) -> dict[str, bytes]:
    return {suffix: Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal", "-shm")
            if Path(f"{path}{suffix}").exists()}


@pytest.fixture
def old_home(tmp_path) -> HomeLayout:
    home = HomeLayout(tmp_path / "home").ensure()
    subprocess.run([sys.executable, "-c", MAKE_OLD_BOARD, str(home.shared_kanban_db)], check=True, cwd=REPO,
                   timeout=60)
    assert set(board_files(home.shared_kanban_db)) == {"", "-wal", "-shm"}
    return home


def test_an_old_board_moves_byte_identical_with_its_wal_and_shm(old_home):
    before = board_files(old_home.shared_kanban_db)
    result = relocate_board(old_home)
    assert result.moved and result.path == old_home.kanban_db
    assert board_files(old_home.kanban_db) == before
    assert board_files(old_home.shared_kanban_db) == {}


def test_moving_again_changes_nothing(old_home):
    relocate_board(old_home)
    after_first = board_files(old_home.kanban_db)
    again = relocate_board(old_home)
    assert not again.moved and again.path == old_home.kanban_db
    assert board_files(old_home.kanban_db) == after_first and not old_home.shared_kanban_db.exists()


def test_the_cli_moves_it_on_first_use_and_keeps_every_card(old_home):
    r = run_cli("--home", str(old_home.root), "kanban", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert sorted(t["title"] for t in json.loads(r.stdout)["tasks"]) == ["old card one", "old card two"]
    assert old_home.kanban_db.exists() and not old_home.shared_kanban_db.exists()
    assert board_files(old_home.shared_kanban_db) == {}


def test_a_board_open_in_another_process_is_not_moved_until_it_is_closed(old_home, tmp_path):
    gate = tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_BOARD, str(old_home.shared_kanban_db), str(gate)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        before = board_files(old_home.shared_kanban_db)
        result = relocate_board(old_home)
        assert not result.moved and result.path == old_home.shared_kanban_db
        assert str(holder.pid) in result.deferred
        assert board_files(old_home.shared_kanban_db) == before and not old_home.kanban_db.exists()
        r = run_cli("--home", str(old_home.root), "kanban", "list")  # used where it is meanwhile
        assert r.returncode == 0 and "old card one" in r.stdout, r.stderr
        assert not old_home.kanban_db.exists()
    finally:
        gate.touch()
        holder.wait(timeout=30)
    assert relocate_board(old_home).moved
    assert not old_home.shared_kanban_db.exists()


def test_two_processes_racing_move_it_once(old_home, tmp_path):
    before = board_files(old_home.shared_kanban_db)
    gate = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACE, str(old_home.root), str(gate)], stdout=subprocess.PIPE,
                               text=True, cwd=REPO) for _ in range(2)]
    gate.touch()
    results = [json.loads(p.communicate(timeout=60)[0]) for p in racers]
    assert [r["path"] for r in results] == [str(old_home.kanban_db)] * 2
    assert sorted(r["moved"] for r in results) == [False, True]
    assert board_files(old_home.kanban_db) == before and not old_home.shared_kanban_db.exists()


def test_a_chosen_kanban_db_is_used_where_it_is(old_home):
    """``kanban.db`` named in config (or --db) keeps working: it is the person's choice."""
    old_home.config_file.write_text("kanban:\n  db: kanban.db\n")
    r = run_cli("--home", str(old_home.root), "kanban", "list")
    assert r.returncode == 0 and "old card two" in r.stdout, r.stderr
    assert old_home.shared_kanban_db.exists() and not old_home.kanban_db.exists()
    r = run_cli("--home", str(old_home.root), "kanban", "list", "--db", str(old_home.shared_kanban_db))
    assert r.returncode == 0 and "old card two" in r.stdout, r.stderr
    assert not old_home.kanban_db.exists()


def test_a_new_board_is_born_in_hermes_tui_folder(tmp_path):
    home = HomeLayout(tmp_path / "fresh")
    r = run_cli("--home", str(home.root), "kanban", "create", "first card")
    assert r.returncode == 0, r.stderr
    assert home.kanban_db.exists() and not home.shared_kanban_db.exists()


def test_hermes_board_is_never_moved(tmp_path):
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    home = HomeLayout(root)
    before = home.shared_kanban_db.read_bytes()
    result = relocate_board(home)
    assert not result.moved and home.shared_kanban_db.read_bytes() == before
    assert not home.own_dir.exists()  # nothing to move: nothing made


def test_a_half_done_move_is_finished(old_home):
    """A crash after the side files moved and before the main file did: the next use
    finishes the move instead of starting a fresh board."""
    before = board_files(old_home.shared_kanban_db)
    old_home.ensure_dir(old_home.own_dir)
    for suffix in ("-wal", "-shm"):
        os.rename(f"{old_home.shared_kanban_db}{suffix}", f"{old_home.kanban_db}{suffix}")
    assert relocate_board(old_home).moved
    assert board_files(old_home.kanban_db) == before
