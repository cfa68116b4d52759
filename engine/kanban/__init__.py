"""The kanban board: cards worked by spawned worker processes.

- :mod:`engine.kanban.service`     the one way in (CLI, app, demo): one shared connection per process
- :mod:`engine.kanban.store`       the SQLite board (schema, migrations, reads)
- :mod:`engine.kanban.transitions` every change a person or a worker makes
- :mod:`engine.kanban.dispatcher`  the dispatch tick
- :mod:`engine.kanban.workers`     spawning, stopping and judging workers
- :mod:`engine.kanban.breaker`     the failure breaker
- :mod:`engine.kanban.pg`          the PostgreSQL board (several machines, one board)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.pg.url import DatabaseUrl, looks_like_url

DATABASE_URL_VARIABLE = "HERMES_KANBAN_DATABASE_URL"


def board_path(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
               environ: Mapping[str, str] | None = None) -> Path:
    """Which board: ``--db`` > ``$HERMES_KANBAN_DB`` (a worker's own board) > config
    ``kanban.db`` (relative to the home) > ``<home>/kanban.db``. A flag or variable that is
    relative is taken from the current directory, as any path typed in a shell."""
    env = os.environ if environ is None else environ
    given = override or env.get("HERMES_KANBAN_DB")
    if given:  # typed by a person or set by a dispatcher: relative to the current directory
        return Path(os.path.abspath(Path(given).expanduser()))
    if settings.kanban.db:
        path = Path(settings.kanban.db).expanduser()
        return path if path.is_absolute() else home.root / path
    return home.kanban_db


def board_location(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
                   environ: Mapping[str, str] | None = None) -> Path | DatabaseUrl:
    """Which board, file or server: ``--db`` (a path or a ``postgresql://`` URL) >
    ``$HERMES_KANBAN_DB`` (a worker's own board, either kind) > ``$HERMES_KANBAN_DATABASE_URL``
    > config ``kanban.database`` > the SQLite file of :func:`board_path`.
    A malformed URL raises :class:`engine.kanban.pg.url.BadDatabaseUrl` (no password in it)."""
    env = os.environ if environ is None else environ
    for given in (override, env.get("HERMES_KANBAN_DB")):
        if given:
            return DatabaseUrl.parse(str(given)) if looks_like_url(str(given)) else \
                board_path(home, settings, given, env)
    if env.get(DATABASE_URL_VARIABLE):
        return DatabaseUrl.parse(env[DATABASE_URL_VARIABLE])
    configured = settings.kanban.database
    if isinstance(configured, DatabaseUrl):
        return configured
    if configured is not None:
        return configured if configured.is_absolute() else home.root / configured
    return board_path(home, settings, None, env)
