"""The kanban board: cards worked by spawned worker processes.

- :mod:`engine.kanban.backend`     the seam: what a board backend must do, its capabilities
- :mod:`engine.kanban.service`     the one way in (CLI, app, demo): one shared connection per process
- :mod:`engine.kanban.backends`    the stores, one folder each: sqlite, postgres, hermes
- :mod:`engine.kanban.transitions` every change a person or a worker makes
- :mod:`engine.kanban.dispatcher`  the dispatch tick
- :mod:`engine.kanban.workers`     spawning, stopping and judging workers
- :mod:`engine.kanban.breaker`     the failure breaker
- :mod:`engine.kanban.describe`    a card's details in words (``kanban show``, the details dialog)
- :mod:`engine.kanban.wording`     why a tick held cards back, and what a change did, in words
- :mod:`engine.kanban.relocate`    moving an older hermes-tui board out of hermes's ``kanban.db`` name
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.backends.postgres.url import DatabaseUrl, looks_like_url

DATABASE_URL_VARIABLE = "HERMES_KANBAN_DATABASE_URL"


def board_path(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
               environ: Mapping[str, str] | None = None) -> Path:
    """Which board: ``--db`` > ``$HERMES_KANBAN_DB`` (a worker's own board) > config
    ``kanban.db`` (relative to the home) > hermes-agent's current board when its
    ``<home>/kanban.db`` is there (``kanban/boards/<slug>/kanban.db`` after
    ``hermes kanban boards switch SLUG``) > an older hermes-tui's ``<home>/kanban.db`` not moved yet (see
    :mod:`engine.kanban.relocate`) > ``<home>/hermes-tui/board.db``. A flag or variable
    that is relative is taken from the current directory, as any path typed in a shell.

    Telling hermes's board from ours asks SQLite (read-only, immutable): call this off
    the UI thread."""
    chosen = chosen_board_path(home, settings, override, environ)
    if chosen is not None:
        return chosen
    from engine.kanban.backends.hermes.board_file import BoardKind, board_kind

    shared = board_kind(home.shared_kanban_db)
    hermes = shared if home.hermes_kanban_db == home.shared_kanban_db else board_kind(home.hermes_kanban_db)
    if hermes is BoardKind.HERMES:
        return _hermes_current_db(home)
    if shared is BoardKind.OURS and not home.kanban_db.exists():
        return home.shared_kanban_db
    return home.kanban_db


def _hermes_current_db(home: HomeLayout) -> Path:
    """hermes-agent's current board (its own setting, ``kanban/current``), when its
    database is hermes's; else its ``default`` board at ``kanban.db`` (both under
    :attr:`engine.home.HomeLayout.hermes_kanban_root`: ``$HERMES_KANBAN_HOME`` when set)."""
    from engine.hermes.boards import DEFAULT_BOARD, board_db, current_board
    from engine.kanban.backends.hermes.board_file import BoardKind, board_kind

    root = home.hermes_kanban_root
    slug = current_board(root)
    if slug != DEFAULT_BOARD and board_kind(board_db(root, slug)) is BoardKind.HERMES:
        return board_db(root, slug)
    return home.hermes_kanban_db


def chosen_board_path(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
                      environ: Mapping[str, str] | None = None) -> Path | None:
    """The board a person or a dispatcher chose (``--db``, ``$HERMES_KANBAN_DB``, config
    ``kanban.db``), or None for the default. Reads nothing."""
    env = os.environ if environ is None else environ
    given = override or env.get("HERMES_KANBAN_DB")
    if given:  # typed by a person or set by a dispatcher: relative to the current directory
        return Path(os.path.abspath(Path(given).expanduser()))
    if settings.kanban.db:
        path = Path(settings.kanban.db).expanduser()
        return path if path.is_absolute() else home.root / path
    return None


def board_path_at_a_glance(home: HomeLayout, settings: Settings) -> Path | None:
    """:func:`board_path` when telling it needs no read of a file (a stat at most: there
    is no ``<home>/kanban.db``), else None. For a first frame that must not wait."""
    chosen = chosen_board_path(home, settings)
    if chosen is not None:
        return chosen
    return None if home.shared_kanban_db.exists() or home.hermes_kanban_db.exists() else home.kanban_db


def board_location(home: HomeLayout, settings: Settings, override: str | os.PathLike[str] | None = None,
                   environ: Mapping[str, str] | None = None) -> Path | DatabaseUrl:
    """Which board, file or server: ``--db`` (a path or a ``postgresql://`` URL) >
    ``$HERMES_KANBAN_DB`` (a worker's own board, either kind) > ``$HERMES_KANBAN_DATABASE_URL``
    > config ``kanban.database`` > the SQLite file of :func:`board_path`.
    A malformed URL raises :class:`engine.kanban.backends.postgres.url.BadDatabaseUrl` (no password in it)."""
    env = os.environ if environ is None else environ
    for given in (override, env.get("HERMES_KANBAN_DB")):
        if given:
            return DatabaseUrl.parse(str(given)) if looks_like_url(str(given)) else \
                board_path(home, settings, given, env)
    named = _named_server_or_database(home, settings, env)
    return named if named is not None else board_path(home, settings, None, env)


def board_location_at_a_glance(home: HomeLayout, settings: Settings,
                               environ: Mapping[str, str] | None = None) -> Path | DatabaseUrl | None:
    """:func:`board_location` when telling it needs no read of a file, else None (for a
    first frame that must not wait). A malformed URL raises like :func:`board_location`."""
    env = os.environ if environ is None else environ
    given = env.get("HERMES_KANBAN_DB")
    if given:
        return DatabaseUrl.parse(given) if looks_like_url(given) else chosen_board_path(home, settings, None, env)
    named = _named_server_or_database(home, settings, env)
    return named if named is not None else board_path_at_a_glance(home, settings)


def _named_server_or_database(home: HomeLayout, settings: Settings, env: Mapping[str, str]) -> Path | DatabaseUrl | None:
    """``$HERMES_KANBAN_DATABASE_URL``, else config ``kanban.database`` (a URL, or a file
    relative to the home), else None."""
    if env.get(DATABASE_URL_VARIABLE):
        return DatabaseUrl.parse(env[DATABASE_URL_VARIABLE])
    configured = settings.kanban.database
    if configured is None or isinstance(configured, DatabaseUrl):
        return configured
    return configured if configured.is_absolute() else home.root / configured
