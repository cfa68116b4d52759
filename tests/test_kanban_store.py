"""The board file and the transitions: a real SQLite file, real concurrent writers. The
transition tests (``board_backend``) also run on a fresh PostgreSQL database."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from engine.kanban import transitions as tr
from engine.kanban.backend import StoreError, UnknownTask
from engine.kanban.backends.sqlite.store import APPLICATION_ID, SCHEMA_VERSION, Board
from engine.kanban.models import NewTask
from tests.support.kanban import FakeClock, open_board


async def test_new_board_is_wal_full_sync_versioned_and_private(home, open_test_board):
    board = await open_test_board()
    assert (await board.fetch("PRAGMA journal_mode"))[0][0] == "wal"
    assert (await board.fetch("PRAGMA synchronous"))[0][0] == 2  # FULL
    assert (await board.fetch("PRAGMA busy_timeout"))[0][0] > 0
    assert (await board.fetch("PRAGMA user_version"))[0][0] == SCHEMA_VERSION
    assert (await board.fetch("PRAGMA application_id"))[0][0] == APPLICATION_ID
    assert home.kanban_db.stat().st_mode & 0o777 == 0o600


async def test_reopening_keeps_cards(home, open_test_board):
    board = await open_board(home)
    task = await tr.create_task(board, NewTask("keep me"))
    await board.close()
    board = await open_test_board()
    assert (await board.get_task(task.id)).title == "keep me"


@pytest.mark.parametrize("content", [b"not a database at all\n" * 10, b"SQLite format 3\x00" + b"\xff" * 4000])
async def test_corrupt_or_non_sqlite_file_is_refused_and_left_untouched(home, content):
    home.kanban_db.write_bytes(content)
    with pytest.raises(StoreError) as err:
        await open_board(home)
    assert "refusing" in str(err.value)
    assert home.kanban_db.read_bytes() == content


async def test_foreign_sqlite_database_is_refused_and_left_untouched(home):
    con = sqlite3.connect(home.kanban_db)
    con.execute("CREATE TABLE tasks (x)")
    con.execute("INSERT INTO tasks VALUES (42)")
    con.commit()
    con.close()
    before = home.kanban_db.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        await open_board(home)
    assert home.kanban_db.read_bytes() == before


async def test_board_from_a_newer_version_is_refused(home):
    board = await open_board(home)
    await board.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    await board.close()
    with pytest.raises(StoreError, match="newer"):
        await open_board(home)


async def test_two_openers_initialise_the_schema_once(home):
    boards = await asyncio.gather(*(Board.open(home.kanban_db) for _ in range(4)))
    try:
        assert {(await b.fetch("PRAGMA user_version"))[0][0] for b in boards} == {SCHEMA_VERSION}
    finally:
        for b in boards:
            await b.close()


async def test_card_with_open_parent_is_todo_then_promoted_status_on_create(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    parent = await tr.create_task(board, NewTask("parent"))
    child = await tr.create_task(board, NewTask("child", parents=(parent.id,)))
    assert (parent.status, child.status) == ("ready", "todo")
    await tr.complete(board, parent.id, "done")
    late = await tr.create_task(board, NewTask("late child", parents=(parent.id,)))
    assert late.status == "ready"
    with pytest.raises(StoreError, match="no parent"):
        await tr.create_task(board, NewTask("orphan", parents=("t_00000000",)))


async def test_ids_resolve_by_unique_prefix(home, board_backend, open_test_board):
    ids = iter(["t_aaaa0001", "t_aaaa0002", "t_bbbb0001"])
    board = await open_test_board(url=board_backend)
    await tr.create_tasks(board, [NewTask("a"), NewTask("b"), NewTask("c")], id_factory=lambda: next(ids))
    assert await board.resolve_id("bbbb") == "t_bbbb0001"
    assert await board.resolve_id("t_aaaa0002") == "t_aaaa0002"
    with pytest.raises(UnknownTask, match="several"):
        await board.resolve_id("aaaa")
    with pytest.raises(UnknownTask, match="no card"):
        await board.resolve_id("cccc")
    # LIKE wildcards in the input are literal characters, not patterns.
    with pytest.raises(UnknownTask):
        await board.resolve_id("%")


async def test_bulk_create_is_one_transaction(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    tasks = await tr.create_tasks(board, [NewTask(f"card {i}") for i in range(500)])
    assert len({t.id for t in tasks}) == 500
    assert (await board.counts())["ready"] == 500
    assert len(await board.events()) == 500
    with pytest.raises(StoreError):
        await tr.create_tasks(board, [NewTask("fine"), NewTask("   ")])
    assert (await board.counts())["ready"] == 500


async def test_transitions_follow_the_allowed_moves(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    t = await tr.create_task(board, NewTask("card"))
    with pytest.raises(tr.TransitionRefused, match="not blocked"):
        await tr.unblock(board, t.id)
    with pytest.raises(tr.TransitionRefused, match="not running"):
        await tr.reclaim(board, t.id)
    await tr.move(board, t.id, "review")
    await tr.move(board, t.id, "ready")
    await tr.move(board, t.id, "blocked", reason="needs a key")
    assert (await board.get_task(t.id)).status == "blocked"
    await tr.move(board, t.id, "ready")
    await tr.move(board, t.id, "done")
    with pytest.raises(tr.TransitionRefused, match="allowed: none"):
        await tr.move(board, t.id, "ready")
    result = await tr.archive(board, t.id)
    assert (result.from_status, result.to_status, result.stop) == ("done", "archived", None)
    with pytest.raises(tr.TransitionRefused, match="already archived"):
        await tr.archive(board, t.id)
    kinds = [e.kind for e in await board.events(t.id)]
    assert kinds == ["created", "review_requested", "reopened", "blocked", "unblocked", "completed", "archived"]


async def test_complete_and_unblock_reset_the_failure_counter(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    t = await tr.create_task(board, NewTask("card"))
    await board.conn.execute("UPDATE tasks SET consecutive_failures = 2, status = 'blocked', "
                             "last_failure_error = 'boom' WHERE id = ?", (t.id,))
    await tr.unblock(board, t.id)
    assert (await board.get_task(t.id)).consecutive_failures == 0
    await board.conn.execute("UPDATE tasks SET consecutive_failures = 1 WHERE id = ?", (t.id,))
    await tr.complete(board, t.id, "ok")
    done = await board.get_task(t.id)
    assert (done.consecutive_failures, done.last_failure_error, done.result) == (0, None, "ok")


async def _running_card(board: Board) -> tuple[str, int]:
    """A card claimed the way the dispatcher claims: status running with an open run."""
    t = await tr.create_task(board, NewTask("worked", assignee="w"))
    now = board.now()
    async with board.transaction() as conn:
        cur = await conn.execute("INSERT INTO task_runs (task_id, profile, status, claim_lock, started_at) "
                                 "VALUES (?, 'w', 'running', 'elsewhere:1', ?)", (t.id, now))
        run_id = cur.lastrowid
        await conn.execute("UPDATE tasks SET status = 'running', claim_lock = 'elsewhere:1', current_run_id = ? "
                           "WHERE id = ?", (run_id, t.id))
    return t.id, run_id


async def test_worker_calls_only_act_on_their_own_current_run(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    task_id, run_id = await _running_card(board)
    other, _ = await _running_card(board)
    with pytest.raises(tr.TransitionRefused, match="works card"):
        await tr.complete(board, other, "stolen", call=tr.WorkerCall(task_id, run_id))
    with pytest.raises(tr.TransitionRefused, match="not the current run"):
        await tr.complete(board, task_id, "old run", call=tr.WorkerCall(task_id, run_id + 100))
    with pytest.raises(tr.TransitionRefused, match="heartbeat is a worker call"):
        await tr.heartbeat(board, task_id, tr.WorkerCall(), 900)
    await tr.heartbeat(board, task_id, tr.WorkerCall(task_id, run_id), 900)
    assert (await board.get_task(task_id)).last_heartbeat_at is not None
    await tr.review(board, task_id, "please look", call=tr.WorkerCall(task_id, run_id))
    assert (await board.get_task(task_id)).status == "review"
    # The run is closed now: the same worker cannot act again.
    with pytest.raises(tr.TransitionRefused, match="not the current run"):
        await tr.complete(board, task_id, "again", call=tr.WorkerCall(task_id, run_id))
    [run] = [r for r in await board.runs_of(task_id) if r.id == run_id]
    assert (run.outcome, run.summary, run.claim_lock) == ("review", "please look", "elsewhere:1")


async def test_concurrent_changes_from_two_connections_never_both_win(home, board_backend):
    clock = FakeClock()
    a = await open_board(home, clock, board_backend)
    b = await open_board(home, clock, board_backend)
    try:
        task_id, run_id = await _running_card(a)
        results = await asyncio.gather(
            tr.complete(a, task_id, "from a", call=tr.WorkerCall(task_id, run_id)),
            tr.block(b, task_id, "from b", call=tr.WorkerCall(task_id, run_id)),
            return_exceptions=True,
        )
        wins = [r for r in results if not isinstance(r, Exception)]
        losses = [r for r in results if isinstance(r, tr.TransitionRefused)]
        assert len(wins) == 1 and len(losses) == 1
        final = await a.get_task(task_id)
        assert final.status == wins[0].to_status
        assert len([e for e in await a.events(task_id) if e.kind in ("completed", "blocked")]) == 1
    finally:
        await a.close()
        await b.close()


async def test_board_view_keeps_finished_columns_short_but_counts_everything(home, board_backend, open_test_board):
    clock = FakeClock(1_000_000.0)
    board = await open_test_board(clock=clock, url=board_backend)
    cards = await tr.create_tasks(board, [NewTask(f"c{i}") for i in range(130)])
    for i, card in enumerate(cards[:120]):
        clock.now = 1_000_000.0 + i
        await tr.complete(board, card.id)
    tasks, counts = await board.board_view(["ready", "done"], recent_limit=100)
    done = [t for t in tasks if t.status == "done"]
    assert counts == {"done": 120, "ready": 10}
    assert len(done) == 100 and done[0].id == cards[119].id  # newest first
    assert cards[0].id not in {t.id for t in done}
    assert len([t for t in tasks if t.status == "ready"]) == 10


async def test_reassigning_to_another_profile_resets_the_failures(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    t = await tr.create_task(board, NewTask("card", assignee="a"))
    await board.conn.execute("UPDATE tasks SET consecutive_failures = 1 WHERE id = ?", (t.id,))
    await tr.assign(board, t.id, "a")  # same profile: nothing changes
    assert (await board.get_task(t.id)).consecutive_failures == 1
    await tr.assign(board, t.id, "b")
    card = await board.get_task(t.id)
    assert (card.assignee, card.consecutive_failures) == ("b", 0)
    assert (await board.events(t.id))[-1].payload["previous"] == "a"
    running, _run = await _running_card(board)
    with pytest.raises(tr.TransitionRefused, match="reclaim it first"):
        await tr.assign(board, running, "b")


async def test_an_empty_file_from_a_newer_program_is_refused_and_left_byte_identical(home):
    con = sqlite3.connect(home.kanban_db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    con.close()
    before = home.kanban_db.read_bytes()
    with pytest.raises(StoreError, match="newer"):
        await open_board(home)
    assert home.kanban_db.read_bytes() == before


async def test_a_zero_byte_board_we_did_not_create_is_refused_with_how_to_start_anew(home):
    home.kanban_db.write_bytes(b"")
    with pytest.raises(StoreError) as err:
        await open_board(home)
    assert "did not create" in str(err.value) and "rm " in str(err.value)
    assert home.kanban_db.read_bytes() == b""


async def test_a_new_board_appears_whole_and_leaves_no_temporary_file(home):
    boards = await asyncio.gather(*(Board.open(home.kanban_db) for _ in range(3)))
    for b in boards:
        await b.close()
    assert sorted(p.name for p in home.kanban_db.parent.iterdir() if p.name.startswith(".board")) == []
    assert home.kanban_db.stat().st_size > 0


async def test_an_id_prefix_needs_four_characters_after_t_(home, board_backend, open_test_board):
    board = await open_test_board(url=board_backend)
    await tr.create_tasks(board, [NewTask("a")], id_factory=lambda: "t_abcd1234")
    for short in ("t_", "t_a", "abc", ""):
        with pytest.raises(UnknownTask):
            await board.resolve_id(short)
    assert await board.resolve_id("t_abcd") == "t_abcd1234"


async def test_opening_the_board_again_keeps_this_process_s_locks(home):
    """A second open in a process that holds a connection must not drop its POSIX locks
    (it used to read the header with Python's open()/close()). Without the locks,
    another process closing its connection thinks it is the last one and unlinks the
    -wal and -shm under us: our descriptors then point at "(deleted)" files."""
    import os
    import subprocess
    import sys

    first = await open_board(home)
    await tr.create_task(first, NewTask("before"))
    second = await open_board(home)
    try:
        code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                "c.execute('INSERT INTO task_events (task_id, kind, created_at) VALUES (1, 2, 3)'); "
                "c.commit(); c.close()")
        subprocess.run([sys.executable, "-c", code, str(home.kanban_db)], check=True, timeout=60)
        await tr.create_task(second, NewTask("x"))
        fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}")]
        assert not [f for f in fds if f.endswith("(deleted)") and "board.db" in f]
    finally:
        await second.close()
        await first.close()


async def test_a_foreign_wal_database_is_refused_without_a_trace_in_its_folder(home):
    """Like hermes-agent's own kanban.db: a WAL-mode database of another program. The
    refusal reads it through SQLite without creating a -wal/-shm beside it, so not even
    the folder's modification time changes."""
    import os

    con = sqlite3.connect(home.kanban_db)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("CREATE TABLE tasks (id TEXT)")
    con.execute("INSERT INTO tasks VALUES ('t_1')")
    con.commit()
    con.close()
    folder = home.kanban_db.parent
    before = (sorted(os.listdir(folder)), folder.stat().st_mtime_ns, home.kanban_db.read_bytes())
    with pytest.raises(StoreError, match="another program"):
        await open_board(home)
    assert (sorted(os.listdir(folder)), folder.stat().st_mtime_ns, home.kanban_db.read_bytes()) == before
