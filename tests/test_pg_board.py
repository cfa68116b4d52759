"""The PostgreSQL board: choosing it, never printing its password, refusing a database
that is not ours, the per-host dispatch lock, and losing the server. Against the real
server on 127.0.0.1:5432 (a fresh database per test; tests/support/pg.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from conftest import run_cli

from engine.config import ConfigError, Settings, parse_config
from engine.kanban import board_location
from engine.kanban import transitions as tr
from engine.kanban.backend import StoreError
from engine.kanban.backends.postgres import schema
from engine.kanban.backends.postgres.board import PgBoard
from engine.kanban.backends.postgres.dialect import to_postgres
from engine.kanban.backends.postgres.errors import BoardUnreachable
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.dispatcher import Dispatcher
from engine.kanban.models import NewTask
from engine.kanban.workers import NullSpawner
from tests.support import wait_until_async
from tests.support.kanban import FakeClock, kanban_settings, open_board
from tests.support.pg import ADMIN_URL

SECRET = "hunter2-not-shown"


def _with_password(url: str) -> str:
    """The same database, with a password in the URL (trust auth ignores it)."""
    scheme, rest = url.split("://", 1)
    user, at, host = rest.partition("@")
    return f"{scheme}://{user}:{SECRET}@{host}"


async def _sql(url: str, statement: str, *args):
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(statement, *args)
    finally:
        await conn.close()


# -- choosing the board ---------------------------------------------------------------------------


def test_the_url_comes_from_db_then_the_worker_variable_then_the_url_variable_then_config(home):
    settings = parse_config("kanban:\n  database: postgresql://cfg@h/cfgdb\n")
    assert str(board_location(home, settings, environ={})) == "postgresql://cfg@h/cfgdb"
    env = {"HERMES_KANBAN_DATABASE_URL": "postgresql://var@h/vardb"}
    assert str(board_location(home, settings, environ=env)) == "postgresql://var@h/vardb"
    env["HERMES_KANBAN_DB"] = "postgresql://worker@h/wdb"
    assert str(board_location(home, settings, environ=env)) == "postgresql://worker@h/wdb"
    assert str(board_location(home, settings, "postgresql://flag@h/fdb", environ=env)) == "postgresql://flag@h/fdb"
    assert board_location(home, settings, "/tmp/x.db", environ=env) == home.root.__class__("/tmp/x.db")
    # A path (or nothing) keeps the SQLite board.
    assert board_location(home, Settings(), environ={}) == home.kanban_db
    as_path = parse_config("kanban:\n  database: boards/b.db\n")
    assert board_location(home, as_path, environ={}) == home.root / "boards" / "b.db"


def test_the_password_never_appears_in_the_shown_url_or_a_config_error():
    url = DatabaseUrl.parse(f"postgresql://bob:{SECRET}@db.example:5432/board?sslmode=require")
    assert str(url) == "postgresql://bob@db.example:5432/board?sslmode=require"
    assert SECRET not in repr(url) and SECRET not in f"{url}"
    assert url.scrub(f"failed for bob:{SECRET}") == "failed for bob:***"
    query = DatabaseUrl.parse(f"postgresql://bob@db.example/board?password={SECRET}&sslmode=verify-full")
    assert SECRET not in str(query) and "sslmode=verify-full" in str(query)
    for bad in (f"postgresql://bob:{SECRET}@db.example:port/board", f"postgresql://bob:{SECRET}@db.example/",
                f"mysql://bob:{SECRET}@db.example/board"):
        with pytest.raises(ConfigError) as caught:
            parse_config(f"kanban:\n  database: {bad}\n")
        assert SECRET not in str(caught.value) and "config.yaml:2" in str(caught.value)


def test_the_dialect_maps_only_the_spellings_postgresql_writes_differently():
    assert to_postgres("UPDATE t SET a = ? WHERE b IS ? AND c = 'is ? here'") == \
        "UPDATE t SET a = $1 WHERE b IS NOT DISTINCT FROM $2 AND c = 'is ? here'"
    assert to_postgres("SELECT (SELECT group_concat(parent_id) FROM l) FROM t t WHERE 1 ORDER BY t.id") == \
        "SELECT (SELECT string_agg(parent_id, ',') FROM l) FROM t t WHERE TRUE ORDER BY t.id"
    assert to_postgres("INSERT OR IGNORE INTO l (a, b) VALUES (?, ?)") == \
        "INSERT INTO l (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    assert to_postgres("SELECT id FROM t WHERE x IS NULL") == "SELECT id FROM t WHERE x IS NULL"


# -- the CLI on a server board --------------------------------------------------------------------


def test_cli_works_a_board_named_by_db_and_by_the_variable_without_printing_the_password(home, pg_url):
    url = _with_password(pg_url)
    made = run_cli("--home", str(home.root), "kanban", "--db", url, "create", "on the server", "--json")
    assert made.returncode == 0, made.stderr
    card = json.loads(made.stdout)["id"]
    listed = run_cli("--home", str(home.root), "kanban", "list", "--json",
                     env={"HERMES_KANBAN_DATABASE_URL": url})
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["tasks"]] == [card]
    assert not home.kanban_db.exists()  # the SQLite board was never made
    for out in (made, listed):
        assert SECRET not in out.stdout + out.stderr


def test_an_unreachable_server_is_one_line_exit_1_without_the_password(home):
    out = run_cli("--home", str(home.root), "kanban", "--db",
                  f"postgresql://postgres:{SECRET}@127.0.0.1:1/nowhere", "list")
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "cannot be reached" in out.stderr and "postgresql://postgres@127.0.0.1:1/nowhere" in out.stderr
    assert SECRET not in out.stdout + out.stderr


def test_a_malformed_url_is_a_usage_error_naming_it_without_the_password(home):
    out = run_cli("--home", str(home.root), "kanban", "--db", f"postgresql://bob:{SECRET}@h:nan/board", "list")
    assert out.returncode == 2, out.stderr
    assert "port" in out.stderr and SECRET not in out.stderr and "Traceback" not in out.stderr


UNREADABLE_URL = f"postgresql://bob:{SECRET}@[::1/board"  # urllib (and asyncpg) cannot split it
DRIVER_REFUSES_URL = f"postgresql://bob:{SECRET}@127.0.0.1/board?sslmode=bogus"  # asyncpg's own check


@pytest.mark.parametrize("url", [UNREADABLE_URL, DRIVER_REFUSES_URL])
@pytest.mark.parametrize("argv", [("kanban", "list"), ("kanban", "dispatch"), ("kanban", "create", "x"),
                                  ("kanban", "show", "t_1234"), ("kanban", "daemon"), ("kanban", "reclaim", "t_1234"),
                                  ("doctor",)])
def test_a_url_the_driver_cannot_read_is_a_usage_error_in_every_command_without_the_password(home, url, argv):
    out = run_cli("--home", str(home.root), *argv, env={"HERMES_KANBAN_DATABASE_URL": url})
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert SECRET not in out.stdout + out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    if argv[0] == "doctor":
        board_line = [line for line in out.stdout.splitlines() if line.startswith("board")]
        assert len(board_line) == 1 and "ERROR the board database URL" in board_line[0]
    else:
        assert out.stderr.count("\n") == 1 and "the board database URL" in out.stderr
    if argv[0] == "kanban" and argv[1] == "list":  # --db names it as well as the variable
        flag = run_cli("--home", str(home.root), "kanban", "--db", url, "list")
        assert flag.returncode == 2 and SECRET not in flag.stderr and flag.stderr.count("\n") == 1


# -- whose database -----------------------------------------------------------------------------


async def test_a_database_with_another_program_s_tables_is_refused_and_left_alone(pg_url):
    await _sql(pg_url, "CREATE TABLE tasks (id integer primary key, what text)")
    await _sql(pg_url, "INSERT INTO tasks VALUES (1, 'theirs')")
    with pytest.raises(StoreError, match="holds tables of another program \\(tasks\\)"):
        await PgBoard.open(DatabaseUrl.parse(pg_url))
    tables = await _sql(pg_url, "SELECT table_name FROM information_schema.tables "
                                "WHERE table_schema = current_schema()")
    assert [r[0] for r in tables] == ["tasks"]
    assert [tuple(r) for r in await _sql(pg_url, "SELECT * FROM tasks")] == [(1, "theirs")]


async def test_a_board_of_a_newer_schema_is_refused_and_left_alone(pg_url):
    board = await PgBoard.open(DatabaseUrl.parse(pg_url))
    await tr.create_task(board, NewTask("kept"))
    await board.close()
    await _sql(pg_url, f"UPDATE {schema.META_TABLE} SET value = $1 WHERE key = 'schema_version'",
               str(schema.SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match="newer than this hermes-tui knows"):
        await PgBoard.open(DatabaseUrl.parse(pg_url))
    version = await _sql(pg_url, f"SELECT value FROM {schema.META_TABLE} WHERE key = 'schema_version'")
    assert version[0][0] == str(schema.SCHEMA_VERSION + 1)
    assert (await _sql(pg_url, "SELECT count(*) FROM tasks"))[0][0] == 1


async def test_many_hosts_opening_a_new_database_at_once_set_it_up_once(pg_url):
    boards = await asyncio.gather(*(PgBoard.open(DatabaseUrl.parse(pg_url)) for _ in range(4)))
    try:
        rows = await _sql(pg_url, f"SELECT key, value FROM {schema.META_TABLE} ORDER BY key")
        assert [tuple(r) for r in rows] == [("application", schema.APPLICATION),
                                            ("schema_version", str(schema.SCHEMA_VERSION))]
    finally:
        for board in boards:
            await board.close()


async def test_opening_without_create_does_not_set_up_an_empty_database(pg_url):
    with pytest.raises(StoreError, match="no board in .* yet"):
        await PgBoard.open(DatabaseUrl.parse(pg_url), create=False)
    assert not await _sql(pg_url, "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()")


# -- the dispatch lock is per host ---------------------------------------------------------------


async def test_a_second_dispatcher_of_the_same_host_is_skipped_another_host_is_not(home, pg_url):
    settings = kanban_settings({"a": "true"})
    board = await open_board(home, FakeClock(), pg_url)
    try:
        await tr.create_task(board, NewTask("waiting", assignee="a"))
        holder = subprocess.Popen([sys.executable, "-c", (
            "import asyncio, sys\n"
            "from engine.kanban.backends.postgres.board import PgBoard\nfrom engine.kanban.backends.postgres.url import DatabaseUrl\n"
            "async def main():\n"
            f"    board = await PgBoard.open(DatabaseUrl.parse({pg_url!r}), host_key={board.host_key!r})\n"
            "    async with board.dispatch_guard() as held:\n"
            "        print(held, flush=True)\n"
            "        await asyncio.to_thread(sys.stdin.read)\n"
            "    await board.close()\n"
            "asyncio.run(main())\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "True"
            events_before = len(await board.events())
            result = await Dispatcher(board, home=home, settings=settings, spawner=NullSpawner()).tick()
            assert result.skipped_locked and not result.spawned
            assert len(await board.events()) == events_before
            other = await PgBoard.open(DatabaseUrl.parse(pg_url), clock=board.clock, host_key="another-host")
            try:
                async with other.dispatch_guard() as held:
                    assert held
            finally:
                await other.close()
        finally:
            holder.communicate("", timeout=30)
        assert (await Dispatcher(board, home=home, settings=settings, spawner=NullSpawner()).tick()).spawned
    finally:
        await board.close()


# -- losing the server ---------------------------------------------------------------------------


async def _terminate_our_connections(url: str) -> int:
    """What a restarted server does to its clients, limited to this test's database."""
    dbname = url.rsplit("/", 1)[1]
    rows = await _sql(ADMIN_URL, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = $1 AND pid <> pg_backend_pid()", dbname)
    return len(rows)


async def test_a_lost_connection_is_one_clear_error_then_the_board_reconnects(home, pg_url):
    board = await open_board(home, FakeClock(), pg_url)
    try:
        card = await tr.create_task(board, NewTask("before"))
        assert await _terminate_our_connections(pg_url) >= 1
        # Either the driver already saw the connection go (then this call connects anew
        # before sending anything) or the call fails with one clear line and the next
        # one connects anew: both are fine, a traceback or a stuck board is not.
        try:
            again = await board.get_task(card.id)
        except BoardUnreachable as exc:
            assert "cannot be reached" in str(exc)
            again = await board.get_task(card.id)
        assert again.title == "before"
        await tr.complete(board, card.id, "after")
        assert (await board.get_task(card.id)).status == "done"
    finally:
        await board.close()


async def test_a_transition_cut_by_a_lost_server_is_not_half_applied(home, pg_url):
    board = await open_board(home, FakeClock(), pg_url)
    try:
        card = await tr.create_task(board, NewTask("whole or nothing"))
        with pytest.raises(BoardUnreachable):
            async with board.transaction() as conn:
                await conn.execute("UPDATE tasks SET status = 'done' WHERE id = ?", (card.id,))
                await _terminate_our_connections(pg_url)
                await conn.execute("INSERT INTO task_events (task_id, kind, payload, created_at) "
                                   "VALUES (?, 'completed', '{}', 0)", (card.id,))
        assert (await board.get_task(card.id)).status == "ready"
        assert [e.kind for e in await board.events(card.id)] == ["created"]
    finally:
        await board.close()


# -- CI never skips them -----------------------------------------------------------------------


def test_without_a_server_the_postgresql_tests_fail_under_ci_and_skip_elsewhere(monkeypatch):
    from tests.support.pg import require_server

    nowhere = "postgresql://postgres@127.0.0.1:1/postgres"
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_server(nowhere)
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="cannot be reached"):
        require_server(nowhere)
    require_server()  # the real one is there


# -- doctor ----------------------------------------------------------------------------------------


def test_doctor_checks_the_connection_the_schema_and_this_host_s_lease_without_the_password(home, pg_url):
    url = _with_password(pg_url)
    home.config_file.write_text(f"kanban:\n  database: {url}\n")
    shown = pg_url
    empty = run_cli("--home", str(home.root), "doctor")
    assert empty.returncode == 0, empty.stderr
    assert f"board       {shown}: empty: the first use sets the board up" in empty.stdout
    assert not asyncio.run(_sql(pg_url, "SELECT 1 FROM information_schema.tables "
                                        "WHERE table_schema = current_schema()"))  # doctor wrote nothing
    ticked = run_cli("--home", str(home.root), "kanban", "dispatch", env={"HERMES_KANBAN_HOST_ID": "doc-host"})
    assert ticked.returncode == 0, ticked.stderr
    report = run_cli("--home", str(home.root), "doctor", env={"HERMES_KANBAN_HOST_ID": "doc-host"})
    assert f"hermes-tui board, schema version {schema.SCHEMA_VERSION}" in report.stdout
    assert "host doc-host: lease held" in report.stdout
    as_json = run_cli("--home", str(home.root), "doctor", "--json")
    board = json.loads(as_json.stdout)["shared_board"]
    assert board["url"] == shown and board["usable"] and board["lease_expires_in"] is None  # another host id
    home.config_file.write_text(f"kanban:\n  database: postgresql://postgres:{SECRET}@127.0.0.1:1/nowhere\n")
    away = run_cli("--home", str(home.root), "doctor")
    assert "board       postgresql://postgres@127.0.0.1:1/nowhere: ERROR cannot be reached" in away.stdout
    for out in (empty, report, as_json, away):
        assert SECRET not in out.stdout + out.stderr


async def test_a_board_of_an_older_schema_is_migrated_once_and_keeps_its_cards(pg_url):
    import asyncpg

    conn = await asyncpg.connect(pg_url)
    try:  # what the first release of the PostgreSQL board left behind: schema version 1
        async with conn.transaction():
            for statement in schema.MIGRATIONS[0]:
                await conn.execute(statement)
            await conn.execute(f"INSERT INTO {schema.META_TABLE} VALUES ('application', $1), "
                               "('schema_version', '1')", schema.APPLICATION)
            await conn.execute("INSERT INTO tasks (id, title, status, created_at) VALUES ('t_0ld0ca4d', 'old', "
                               "'ready', 1)")
    finally:
        await conn.close()
    boards = await asyncio.gather(*(PgBoard.open(DatabaseUrl.parse(pg_url)) for _ in range(3)))
    try:
        assert (await boards[0].get_task("t_0ld0ca4d")).title == "old"
        assert await boards[1].renew_lease("h", "boot", 10.0, 5.0) == []  # the v2 hosts table is there
    finally:
        for board in boards:
            await board.close()
    version = await _sql(pg_url, f"SELECT value FROM {schema.META_TABLE} WHERE key = 'schema_version'")
    assert version[0][0] == str(schema.SCHEMA_VERSION) == "3"


async def test_many_rows_at_once_go_in_chunks_below_the_parameter_limit_and_keep_or_ignore(home, pg_url):
    from engine.kanban.backends.postgres.board import MAX_PARAMETERS

    board = await open_board(home, url=pg_url)
    try:
        rows = 2 * (MAX_PARAMETERS // 5) + 7  # three statements of 5 parameters a row
        async with board.transaction() as conn:
            await conn.executemany("INSERT INTO task_events (task_id, run_id, kind, payload, created_at) "
                                   "VALUES (?, ?, 'bulk', ?, ?)", [(f"t_{i:08x}", i, "{}", 1.0) for i in range(rows)])
            await conn.executemany("INSERT OR IGNORE INTO task_links (parent_id, child_id) VALUES (?, ?)",
                                   [("t_a", "t_b"), ("t_a", "t_b"), ("t_a", "t_c")])
        assert (await board.fetch("SELECT count(*), count(DISTINCT run_id) FROM task_events"))[0] == (rows, rows)
        assert await board.fetch("SELECT parent_id, child_id FROM task_links ORDER BY child_id") == \
            [("t_a", "t_b"), ("t_a", "t_c")]
    finally:
        await board.close()


async def test_a_tick_whose_lock_holding_connection_dropped_ends_instead_of_going_on_unlocked(home, pg_url):
    board = await open_board(home, FakeClock(), pg_url)
    try:
        card = await tr.create_task(board, NewTask("kept"))
        async with board.dispatch_guard() as held:
            assert held
            await _terminate_our_connections(pg_url)
            # the driver sees the server close the session
            await wait_until_async(lambda: board._raw is None or board._raw.is_closed(), what="the session closed")
            with pytest.raises(BoardUnreachable, match="held this host's dispatch lock"):
                await board.get_task(card.id)
        assert (await board.get_task(card.id)).title == "kept"  # outside a tick it connects again
    finally:
        await board.close()
