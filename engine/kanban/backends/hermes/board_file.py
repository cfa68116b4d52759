"""What a board file is (hermes-tui's, hermes-agent's, or neither), and how to read one
without leaving a trace.

Only SQLite opens the file (see docs/architecture.md, the board rule), and only
read-only: this module is used to decide which board a command or the pane uses, so it
stays light (plain sqlite3, no connection thread) and never writes.
"""

from __future__ import annotations

import os
import urllib.parse
from enum import Enum
from pathlib import Path

TYPE_CHECKING = False  # not typing's: every board command reads this module, and typing is a few ms
if TYPE_CHECKING:  # sqlite3 is imported where a file is read: the CLI's parser needs only the statuses
    import sqlite3

OUR_APPLICATION_ID = 0x484B4E42  # engine.kanban.backends.sqlite.store.APPLICATION_ID ("HKNB")
# The statuses hermes-agent 0.19.0 knows (hermes_cli/kanban_db.py VALID_STATUSES), in
# board order; a status found in the data but not here gets a column after these.
HERMES_STATUSES = ("triage", "todo", "scheduled", "ready", "running", "review", "blocked", "done", "archived")
# What makes a database hermes's board: these tables with at least these columns.
REQUIRED = {
    "tasks": {"id", "title", "status", "created_at"},
    "task_events": {"id", "task_id", "kind", "created_at"},
}


class BoardKind(Enum):
    """What a board file is, as far as hermes-tui is concerned."""

    MISSING = "missing"
    OURS = "ours"      # hermes-tui's application id
    HERMES = "hermes"  # hermes-agent's tables and columns
    OTHER = "other"    # anything else (not SQLite, another program's, empty)


def _uri(path: Path, immutable: bool) -> str:
    return f"file:{urllib.parse.quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")


def _live_wal(path: Path) -> bool:
    """Whether a writer has the board open in WAL mode right now (its -wal and -shm
    exist): only then may a read-only connection use them without creating anything."""
    return all(os.path.exists(f"{path}{suffix}") for suffix in ("-wal", "-shm"))


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only SQLite connection that creates no file beside ``path``.

    ``mode=ro`` alone still creates -wal/-shm beside a WAL database when they are
    missing; they are missing only when no writer has it open, and then the main file
    holds every commit, so the connection is made ``immutable`` (no lock, no side file).
    """
    import sqlite3

    conn = sqlite3.connect(_uri(Path(path), immutable=not _live_wal(Path(path))), uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def table_columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table with its column names (the schema as it is, whatever wrote it)."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def board_kind(path: Path) -> BoardKind:
    """Classify ``path`` through SQLite (immutable, read-only: no lock, no side file).
    A file SQLite cannot read is OTHER (fail closed: it is nobody's board to use)."""
    if not os.path.isfile(path):
        return BoardKind.MISSING
    import sqlite3

    try:
        conn = sqlite3.connect(_uri(Path(path), immutable=True), uri=True)
    except sqlite3.Error:
        return BoardKind.OTHER
    try:
        if int(conn.execute("PRAGMA application_id").fetchone()[0]) == OUR_APPLICATION_ID:
            return BoardKind.OURS
        columns = table_columns(conn)
    except sqlite3.Error:
        return BoardKind.OTHER
    finally:
        conn.close()
    if all(need <= columns.get(table, set()) for table, need in REQUIRED.items()):
        return BoardKind.HERMES
    return BoardKind.OTHER
