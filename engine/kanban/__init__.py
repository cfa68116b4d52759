"""The kanban board: cards worked by spawned worker processes.

- :mod:`engine.kanban.store`       the SQLite board (schema, migrations, reads)
- :mod:`engine.kanban.transitions` every change a person or a worker makes
- :mod:`engine.kanban.dispatcher`  the dispatch tick
- :mod:`engine.kanban.workers`     spawning, stopping and judging workers
- :mod:`engine.kanban.breaker`     the failure breaker
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout


def board_path(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
               environ: Mapping[str, str] | None = None) -> Path:
    """Which board: ``--db`` > ``$HERMES_KANBAN_DB`` (a worker's own board) > config
    ``kanban.db`` (relative to the home) > ``<home>/kanban.db``."""
    env = os.environ if environ is None else environ
    raw: str | os.PathLike[str] | None = override or env.get("HERMES_KANBAN_DB") or settings.kanban.db
    if not raw:
        return home.kanban_db
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = home.root / path
    return path
