"""Every board of a home: hermes-agent's named boards and hermes-tui's own.

Layout:

- hermes-agent's boards (see :mod:`engine.hermes.boards`): ``default`` at
  ``<home>/kanban.db``, the others at ``<home>/kanban/boards/<slug>/kanban.db`` with
  ``board.json``; hermes's current board is its own setting (``kanban/current``).
- hermes-tui's own boards: ``default`` at ``<home>/hermes-tui/board.db``, the others at
  ``<home>/hermes-tui/boards/<slug>/board.db`` (made by ``kanban boards create SLUG``),
  each with an optional ``board.json`` holding its display ``name``. Files hermes never
  opens.

``--board SLUG`` names hermes's board SLUG when the home has hermes's board and hermes has
one of that slug, else hermes-tui's own board SLUG (:func:`resolve_board`).
:func:`list_boards` lists them all with their counts per status: the CLI's ``kanban
boards``, the app's board switcher, and anything that must cover every board call it.
Reading a board goes through :class:`engine.kanban.service.BoardService` (one connection
per board per process; hermes's boards read-only, changing nothing).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import Settings
from engine.hermes import boards as hermes_boards_mod
from engine.hermes.boards import DEFAULT_BOARD, BadSlug, check_slug
from engine.home import HomeLayout

OURS = "hermes-tui"
HERMES = "hermes"
MAX_META_BYTES = 64 * 1024


class UnknownBoard(ValueError):
    """``--board`` named no board of this home."""


@dataclass(frozen=True)
class BoardInfo:
    """One board of a home, for listing and switching."""

    slug: str
    name: str
    kind: str  # "hermes" (hermes-agent's) or "hermes-tui" (our own)
    path: Path
    description: str = ""
    archived: bool = False
    current: bool = False        # the board hermes-tui shows when no --board is given
    hermes_current: bool = False  # hermes's own current board (``hermes kanban boards switch``)
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None      # why its counts could not be read
    usage: dict[str, Any] | None = None  # the board's tokens and cost (engine.kanban.usage.UsageTotal, no runs)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"slug": self.slug, "name": self.name, "kind": self.kind, "path": str(self.path),
                "description": self.description, "archived": self.archived, "current": self.current,
                "hermes_current": self.hermes_current, "counts": dict(self.counts), "total": self.total,
                "usage": self.usage, "error": self.error}


def own_boards_root(home: HomeLayout) -> Path:
    return home.own_dir / "boards"


def own_board_path(home: HomeLayout, slug: str) -> Path:
    return home.kanban_db if slug == DEFAULT_BOARD else own_boards_root(home) / slug / "board.db"


def _own_name(home: HomeLayout, slug: str) -> str:
    path = own_boards_root(home) / slug / "board.json"
    try:
        with open(path, "rb") as fh:
            raw = json.loads(fh.read(MAX_META_BYTES))
    except (OSError, ValueError, RecursionError):
        return slug
    name = raw.get("name") if isinstance(raw, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else slug


def own_boards(home: HomeLayout) -> list[tuple[str, str, Path]]:
    """(slug, name, path) of hermes-tui's own boards that exist in this home."""
    found = []
    if home.kanban_db.exists():
        found.append((DEFAULT_BOARD, "hermes-tui", home.kanban_db))
    try:
        entries = sorted(os.scandir(own_boards_root(home)), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.name == DEFAULT_BOARD or not hermes_boards_mod.SLUG_RE.match(entry.name):
            continue
        path = Path(entry.path) / "board.db"
        if path.exists():
            found.append((entry.name, _own_name(home, entry.name), path))
    return found


def board_slug(home: HomeLayout, path: object) -> str | None:
    """The slug of the board at ``path`` (hermes's or ours), None for a file elsewhere
    (``--db``) or a server board."""
    if not isinstance(path, Path):
        return None
    found = hermes_boards_mod.slug_of(home.hermes_kanban_root, path)
    if found is not None:
        return found
    path = Path(os.path.abspath(path))
    if path == Path(os.path.abspath(home.kanban_db)):
        return DEFAULT_BOARD
    root = Path(os.path.abspath(own_boards_root(home)))
    if path.name == "board.db" and path.parent.parent == root and hermes_boards_mod.SLUG_RE.match(path.parent.name):
        return path.parent.name
    return None


def home_has_hermes_board(home: HomeLayout) -> bool:
    """Whether hermes-agent keeps its boards here (its ``<home>/kanban.db``, asked of
    SQLite read-only and immutable: call off the UI thread)."""
    from engine.kanban.backends.hermes.board_file import BoardKind, board_kind

    return board_kind(home.hermes_kanban_db) is BoardKind.HERMES


def resolve_board(home: HomeLayout, raw_slug: str) -> Path:
    """The database file ``--board SLUG`` names. Raises BadSlug or UnknownBoard (naming
    the boards there are)."""
    slug = check_slug(raw_slug)
    if home_has_hermes_board(home) and hermes_boards_mod.board_exists(home.hermes_kanban_root, slug):
        path = hermes_boards_mod.board_db(home.hermes_kanban_root, slug)
        if not path.is_file():  # never made here: hermes's folder is hermes's
            raise UnknownBoard(f"hermes-agent's board {slug!r} has no database yet (hermes makes it: "
                               f"`hermes kanban --board {slug} init`)")
        return path
    for own_slug, _name, path in own_boards(home):
        if own_slug == slug:
            return path
    known = [b.slug for b in _refs(home, Settings())]
    raise UnknownBoard(f"no board {slug!r} in {home.root} (boards here: {', '.join(known) or 'none'}; "
                       "see `hermes-tui kanban boards`)")


def _refs(home: HomeLayout, settings: Settings) -> list[BoardInfo]:
    """Every board of the home, without counts."""
    refs: list[BoardInfo] = []
    hermes_current = None
    if home_has_hermes_board(home):
        hermes_current = hermes_boards_mod.current_board(home.hermes_kanban_root)
        for ref in hermes_boards_mod.hermes_boards(home.hermes_kanban_root):
            refs.append(BoardInfo(ref.slug, ref.name, HERMES, ref.db_path, ref.description, ref.archived,
                                  hermes_current=ref.slug == hermes_current))
    for slug, name, path in own_boards(home):
        refs.append(BoardInfo(slug, name, OURS, path))
    return refs


async def list_boards(home: HomeLayout, settings: Settings) -> list[BoardInfo]:
    """Every board of the home with its counts per status and which one hermes-tui shows
    by default. A board that cannot be read is listed with its ``error``."""
    import asyncio
    from dataclasses import replace

    from engine.kanban.backend import StoreError
    from engine.kanban.service import BoardService

    refs = await asyncio.to_thread(_refs, home, settings)
    try:
        default = await asyncio.to_thread(BoardService.path_for, home, settings)
    except ValueError:
        default = None
    default_path = Path(os.path.abspath(default)) if isinstance(default, Path) else None
    out = []
    if default is not None and not isinstance(default, Path):  # kanban.database: the server's board is `default`
        refs = [r for r in refs if not (r.kind == OURS and r.slug == DEFAULT_BOARD)]
        out.append(await _server_board(home, settings, default))
    for ref in refs:
        counts: dict[str, int] = {}
        usage = None
        error = None
        if not ref.path.exists():
            error = "no database yet"
        else:
            try:
                async with await BoardService.open(home, settings, override=ref.path, create=False) as service:
                    counts = await service.counts()
                    usage = {k: v for k, v in (await service.usage()).to_json().items() if k != "runs"}
            except (StoreError, OSError, ValueError) as exc:
                error = str(exc)
            except Exception as exc:  # a damaged file: listed, with why
                error = f"cannot be read: {exc}"
        out.append(replace(ref, counts=counts, usage=usage, error=error,
                           current=default_path is not None and Path(os.path.abspath(ref.path)) == default_path))
    return out


async def _server_board(home: HomeLayout, settings: Settings, url: Any) -> BoardInfo:
    """The PostgreSQL board of ``kanban.database`` (or its variable), listed as
    ``default``: the board hermes-tui shows and ``--board default`` names."""
    from engine.kanban.backend import StoreError
    from engine.kanban.backends.postgres.errors import NoBoardYet
    from engine.kanban.service import BoardService

    counts: dict[str, int] = {}
    error = None
    try:
        async with await BoardService.open(home, settings, create=False) as service:
            counts = await service.counts()
    except NoBoardYet:
        error = "no board yet"
    except (StoreError, OSError, ValueError) as exc:
        error = str(exc)
    return BoardInfo(DEFAULT_BOARD, "hermes-tui (server)", OURS, url, counts=counts, error=error, current=True)


def create_own_board(home: HomeLayout, raw_slug: str, name: str | None = None) -> Path:
    """Make the folder of hermes-tui's own board SLUG (its database is created by the
    board service when it is first opened) with its ``board.json``; the path of its
    database. The ``default`` board needs no creating."""
    slug = check_slug(raw_slug)
    path = own_board_path(home, slug)
    if slug == DEFAULT_BOARD:
        home.ensure_dir(home.own_dir)
        return path
    folder = path.parent
    home.ensure_dir(folder)
    meta = folder / "board.json"
    if name or not meta.exists():
        tmp = folder / ".board.json.tmp"
        tmp.write_text(json.dumps({"slug": slug, "name": name or slug}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, meta)
    return path


__all__ = ["BadSlug", "BoardInfo", "UnknownBoard", "create_own_board", "list_boards", "own_board_path",
           "own_boards", "resolve_board"]
