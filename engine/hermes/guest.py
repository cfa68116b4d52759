"""Is this home a guest home: one that hermes-tui did not create?

hermes-tui's default home is hermes-agent's own ``~/.hermes``. A home that holds files
hermes-tui never writes (hermes's ``processes.json``, ``state.db``, ``SOUL.md``, ``.env``,
its logs, hermes config sections, a ``kanban.db`` of another program) belongs to
someone else, and hermes-tui is a guest in it: no automatic prune pass unless
``scratch.auto_prune: true`` is set explicitly, no mode changes, and read-only commands
create and change nothing. Detection only looks (stat calls, and SQLite opening
``kanban.db`` immutable and read-only to read its application id).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.config import Settings
from engine.hermes.config_keys import HERMES_SECTIONS
from engine.kanban.backends.hermes.board_file import OUR_APPLICATION_ID as OUR_BOARD_APPLICATION_ID

# Files and folders hermes-agent writes in its home and hermes-tui never does.
HERMES_FILES = (
    "processes.json", "state.db", "SOUL.md", ".env", "auth.json", "gateway.pid",
    "gateway_state.json", "logs/agent.log", "logs/errors.log",
)
HERMES_DIRS = ("sessions", "memories", "skills", "pairing")



@dataclass(frozen=True)
class HomeOwner:
    """Why a home is (or is not) a guest home: the signs of another owner found."""

    signs: tuple[str, ...]

    @property
    def is_guest(self) -> bool:
        return bool(self.signs)


def _exists(root: Path, rel: str, want_dir: bool) -> bool:
    try:
        st = os.lstat(root / rel)
    except OSError:
        return False
    import stat

    return stat.S_ISDIR(st.st_mode) if want_dir else not stat.S_ISDIR(st.st_mode)


def foreign_board(path: Path) -> bool:
    """True when ``path`` is an SQLite file with tables that is not a hermes-tui board.

    Opened by SQLite itself, immutable and read-only: no lock, no -wal/-shm file, no
    write. A file SQLite cannot read at all counts as foreign (fail closed)."""
    if not path.is_file():
        return False
    import sqlite3  # here: only a home without other signs pays for it

    uri = f"file:{path.as_posix()}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return True
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.Error:
        return True
    finally:
        conn.close()
    return app_id != OUR_BOARD_APPLICATION_ID and tables > 0


def home_owner(root: Path, settings: Settings | None, kanban_db: Path | None = None) -> HomeOwner:
    """The signs that ``root`` belongs to someone else (none: it is hermes-tui's own)."""
    root = Path(root)
    signs = [rel for rel in HERMES_FILES if _exists(root, rel, want_dir=False)]
    signs += [f"{rel}/" for rel in HERMES_DIRS if _exists(root, rel, want_dir=True)]
    if settings is not None:
        hermes_sections = [name for name, _line in settings.foreign_sections if name in HERMES_SECTIONS]
        if hermes_sections:
            signs.append(f"hermes-agent config sections ({', '.join(hermes_sections[:3])}"
                         f"{', ...' if len(hermes_sections) > 3 else ''})")
        if settings.hermes_keys:
            signs.append("hermes-agent kanban keys in config.yaml")
    board = kanban_db if kanban_db is not None else root / "kanban.db"
    if not signs and foreign_board(board):
        signs.append(f"{board.name} of another program")
    return HomeOwner(tuple(signs))
