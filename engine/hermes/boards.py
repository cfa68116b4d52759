"""hermes-agent's named boards, found the way hermes finds them (read-only).

Facts from hermes-agent 0.19.0 (``hermes_cli/kanban_db.py``):

- The ``default`` board's database is ``<home>/kanban.db`` (from before boards
  existed); its metadata, when there is any, is ``<home>/kanban/boards/default/board.json``
  and its worker logs are ``<home>/kanban/logs/``.
- Every other board is a folder ``<home>/kanban/boards/<slug>/`` holding ``kanban.db``
  and/or ``board.json`` (``name``, ``description``, ``archived``, ...), with its worker
  logs in ``logs/`` beside them. A folder whose name is not a valid slug (``_archived/``,
  where hermes moves removed boards) is not a board.
- The current board: ``$HERMES_KANBAN_BOARD`` when it names a board that exists, else
  the slug in ``<home>/kanban/current`` (written by ``hermes kanban boards switch``)
  when that board exists, else ``default``.

Everything here is a stat or a bounded read of a small text file: nothing is created,
opened for writing, or locked.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BOARD = "default"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9\-_]{0,63}$")  # hermes's own slug rule
CURRENT_VARIABLE = "HERMES_KANBAN_BOARD"
MAX_META_BYTES = 64 * 1024  # a board.json larger than this is not hermes's metadata


class BadSlug(ValueError):
    """A board name that is not a slug (hermes's rule: lowercase, 1-64 characters)."""


def check_slug(raw: str) -> str:
    slug = (raw or "").strip().lower()
    if not SLUG_RE.match(slug):
        raise BadSlug(f"{raw!r} is not a board slug: 1-64 lowercase letters, digits, '-' or '_', "
                      "not starting with '-' or '_'")
    return slug


@dataclass(frozen=True)
class HermesBoardRef:
    """One of hermes's boards, as its files say."""

    slug: str
    name: str
    description: str
    db_path: Path
    logs_dir: Path
    archived: bool = False


def boards_root(root: Path) -> Path:
    return Path(root) / "kanban" / "boards"


def board_db(root: Path, slug: str) -> Path:
    return Path(root) / "kanban.db" if slug == DEFAULT_BOARD else boards_root(root) / slug / "kanban.db"


def logs_dir(root: Path, slug: str) -> Path:
    return Path(root) / "kanban" / "logs" if slug == DEFAULT_BOARD else boards_root(root) / slug / "logs"


def _title(slug: str) -> str:
    """hermes's display name for a board without one (``atm10-server`` -> ``Atm10 Server``)."""
    return " ".join(part.capitalize() for part in slug.replace("_", "-").split("-") if part) or slug


def _metadata(root: Path, slug: str) -> dict:
    path = boards_root(root) / slug / "board.json"
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_META_BYTES + 1)
    except OSError:
        return {}
    if len(data) > MAX_META_BYTES:
        return {}
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def board_ref(root: Path, slug: str) -> HermesBoardRef:
    meta = _metadata(root, slug)
    name = meta.get("name")
    description = meta.get("description")
    return HermesBoardRef(
        slug=slug, name=str(name).strip() if isinstance(name, str) and name.strip() else _title(slug),
        description=description if isinstance(description, str) else "",
        db_path=board_db(root, slug), logs_dir=logs_dir(root, slug), archived=meta.get("archived") is True,
    )


def board_exists(root: Path, slug: str) -> bool:
    """hermes's rule: ``default`` always exists; another board when its folder holds
    ``board.json`` or ``kanban.db``."""
    if slug == DEFAULT_BOARD:
        return True
    folder = boards_root(root) / slug
    return (folder / "board.json").exists() or (folder / "kanban.db").exists()


def hermes_boards(root: Path) -> list[HermesBoardRef]:
    """Every board hermes has in this home: ``default`` first, the rest by name."""
    refs = [board_ref(root, DEFAULT_BOARD)]
    try:
        entries = sorted(os.scandir(boards_root(root)), key=lambda e: e.name.lower())
    except OSError:
        return refs
    for entry in entries:
        if entry.name == DEFAULT_BOARD or not SLUG_RE.match(entry.name):
            continue
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        if board_exists(root, entry.name):
            refs.append(board_ref(root, entry.name))
    return refs


def current_board(root: Path, environ: Mapping[str, str] | None = None) -> str:
    """The board hermes itself uses now (``$HERMES_KANBAN_BOARD``, else ``kanban/current``,
    else ``default``); a slug naming no board falls through, as in hermes."""
    env = os.environ if environ is None else environ
    candidates = [env.get(CURRENT_VARIABLE, "")]
    try:
        with open(Path(root) / "kanban" / "current", "rb") as fh:
            candidates.append(fh.read(256).decode("utf-8", "replace"))
    except OSError:
        pass
    for raw in candidates:
        slug = (raw or "").strip().lower()
        if slug and SLUG_RE.match(slug) and board_exists(root, slug):
            return slug
    return DEFAULT_BOARD


def slug_of(root: Path, db_path: Path) -> str | None:
    """Which of hermes's boards a database file is (None: none of them)."""
    path = Path(os.path.abspath(db_path))
    root = Path(os.path.abspath(root))
    if path == root / "kanban.db":
        return DEFAULT_BOARD
    if path.name == "kanban.db" and path.parent.parent == boards_root(root) and SLUG_RE.match(path.parent.name):
        return path.parent.name
    return None
