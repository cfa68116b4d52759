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

APPLICATION = "hermes-tui kanban board"
META_TABLE = "hermes_kanban_meta"
# An advisory-lock key only this program uses ("HKNB" as in the SQLite application_id).
SETUP_LOCK_KEY = 0x484B4E42
NOTIFY_CHANNEL = "hermes_kanban"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            assignee TEXT,
            status TEXT NOT NULL,
            priority BIGINT NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION,
            completed_at DOUBLE PRECISION,
            claim_lock TEXT,
            claim_expires DOUBLE PRECISION,
            worker_pid BIGINT,
            worker_started_at TEXT,
            consecutive_failures BIGINT NOT NULL DEFAULT 0,
            max_retries BIGINT,
            max_runtime_seconds DOUBLE PRECISION,
            last_failure_error TEXT,
            last_heartbeat_at DOUBLE PRECISION,
            current_run_id BIGINT,
            result TEXT
        )""",
        "CREATE INDEX tasks_by_status ON tasks(status, priority DESC, created_at, id)",
        # The run id is the claim's fencing token: a sequence never hands out a number twice,
        # so a worker holding an old run id can never match the card's current run again.
        """CREATE TABLE task_runs (
            id BIGSERIAL PRIMARY KEY,
            task_id TEXT NOT NULL,
            profile TEXT,
            status TEXT NOT NULL,
            claim_lock TEXT,
            claim_expires DOUBLE PRECISION,
            worker_pid BIGINT,
            worker_started_at TEXT,
            process_id TEXT,
            output_path TEXT,
            log_offset BIGINT NOT NULL DEFAULT 0,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            outcome TEXT,
            error TEXT,
            summary TEXT
        )""",
        "CREATE INDEX runs_by_task ON task_runs(task_id, id)",
        "CREATE INDEX runs_with_evidence ON task_runs(ended_at) "
        "WHERE ended_at IS NOT NULL AND worker_pid IS NOT NULL",
        """CREATE TABLE task_events (
            id BIGSERIAL PRIMARY KEY,
            task_id TEXT NOT NULL,
            run_id BIGINT,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            created_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX events_by_task ON task_events(task_id, id)",
        """CREATE TABLE task_links (
            parent_id TEXT NOT NULL,
            child_id TEXT NOT NULL,
            PRIMARY KEY (parent_id, child_id)
        )""",
        "CREATE INDEX links_by_child ON task_links(child_id, parent_id)",
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
)
SCHEMA_VERSION = len(MIGRATIONS)

# Objects of ours in a schema (tables, and the sequences/indexes PostgreSQL makes for them).
OUR_TABLES = frozenset({META_TABLE, "tasks", "task_runs", "task_events", "task_links", "hosts"})


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
