"""The PostgreSQL board's tables, versioned, and the rule that a database we did not
set up is never altered.

Ownership and version live in one row of ``hermes_kanban_meta``. Opening:

- the meta row says ours at our version: use it;
- ours at an older version: migrate, in one transaction under an advisory lock (several
  hosts starting at once migrate once);
- ours at a newer version: refuse (a newer hermes-tui wrote it);
- no meta table and no other table in the schema: set it up (same lock);
- anything else (another program's tables, a meta table that is not ours): refuse,
  naming what was found, and change nothing.

Every table lives in the connection's current schema (``search_path``), so one
database can hold one board per schema.
"""

from __future__ import annotations

import re

from engine.kanban.backends.sqlite import store as sqlite_store

APPLICATION = "hermes-tui kanban board"
META_TABLE = "hermes_kanban_meta"
# An advisory-lock key only this program uses ("HKNB" as in the SQLite application_id).
SETUP_LOCK_KEY = 0x484B4E42
# Advisory-lock keys (first half) of a capped profile's claims ("HKNP").
PROFILE_LOCK_KEY = 0x484B4E50
NOTIFY_CHANNEL = "hermes_kanban"

_SQLITE_TYPES = (
    # A run's and an event's id: a sequence. The run id is the claim's fencing token, and
    # a sequence never hands out a number twice, so a worker holding an old run id can
    # never match the card's current run again.
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"), "BIGSERIAL PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
)


def from_sqlite(statement: str) -> str:
    """One of the SQLite board's CREATE statements with PostgreSQL's types: the two boards
    have the same tables and columns, in the same order (the store's reads depend on it)."""
    for pattern, replacement in _SQLITE_TYPES:
        statement = pattern.sub(replacement, statement)
    return statement


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        # The SQLite board's first schema (tasks, task_runs, task_events, task_links and
        # their indexes). A later SQLite step needs its own step here too.
        *(from_sqlite(statement) for statement in sqlite_store.MIGRATIONS[0]),
        # Live updates: every committed event is announced (its id) to LISTENers.
        f"""CREATE FUNCTION hermes_kanban_announce() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('{NOTIFY_CHANNEL}', NEW.id::text); RETURN NULL; END $$""",
        "CREATE TRIGGER task_events_announce AFTER INSERT ON task_events "
        "FOR EACH ROW EXECUTE FUNCTION hermes_kanban_announce()",
    ),
    (
        # Host leases: each host's dispatcher renews its row every tick; a host whose
        # lease ran out has its running cards reclaimed by any other host.
        """CREATE TABLE hosts (
            host_id TEXT PRIMARY KEY,
            boot_id TEXT NOT NULL,
            lease_expires DOUBLE PRECISION NOT NULL,
            renewed_at DOUBLE PRECISION NOT NULL
        )""",
    ),
    # The SQLite board's run_usage step (a worker's reported tokens and cost per run).
    tuple(from_sqlite(statement) for statement in sqlite_store.MIGRATIONS[sqlite_store.USAGE_STEP]),
)
SCHEMA_VERSION = len(MIGRATIONS)

# Objects of ours in a schema (tables, and the sequences/indexes PostgreSQL makes for them).
OUR_TABLES = frozenset({META_TABLE, "tasks", "task_runs", "task_events", "task_links", "hosts", "run_usage"})


def refusal(shown: str, *, meta: dict[str, str] | None, other_tables: list[str]) -> str:
    """Why this database cannot be our board, or "" when it can (empty, or ours at a
    version this program knows)."""
    if meta is None:
        if other_tables:
            listed = ", ".join(sorted(other_tables)[:5]) + (" ..." if len(other_tables) > 5 else "")
            return (f"{shown} holds tables of another program ({listed}); it is left alone: "
                    "give the board an empty database or schema of its own")
        return ""
    if meta.get("application") != APPLICATION:
        return f"{shown} has a {META_TABLE} table that is not a hermes-tui board's; it is left alone"
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        return f"{shown} has an unreadable board schema version {meta.get('schema_version')!r}; it is left alone"
    if version > SCHEMA_VERSION:
        return (f"{shown} holds a board of schema version {version}, newer than this hermes-tui knows "
                f"({SCHEMA_VERSION}); upgrade hermes-tui; the board is left alone")
    return ""
