"""Every board of the home, for the attention list: hermes-agent's boards, hermes-tui's
own named boards, and the board chosen by config or environment when it is none of them
(a ``--db`` file, a server).

:func:`home_boards` lists them (stats and small reads, SQLite only to tell hermes's
``kanban.db`` from ours, read-only and immutable). :class:`BoardsReader` reads each
board's facts (engine.attention.board) and keeps them: a board is read again only when
its change marker moved (the stat of its file and WAL, what every commit changes), or
after ``max_age`` seconds, so attention over twenty quiet boards costs twenty stats a
look, not twenty reads. A server board has no marker: it is read at every look.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from dataclasses import dataclass, replace
from pathlib import Path

from engine.attention.board import BoardFacts, read_board
from engine.config import Settings
from engine.home import HomeLayout


@dataclass(frozen=True)
class HomeBoard:
    """One board of the home as attention reads it."""

    slug: str | None  # what ``--board`` takes; None: a board no slug names
    selector: str  # "--board ops", "--db /path/board.db", "" (the default board, named by nothing)
    where: object  # its file (Path) or server (DatabaseUrl)
    override: Path | None  # what opens it (None: the default board, opened as every command opens it)

    @property
    def label(self) -> str:
        return self.slug or self.selector or "the board"


def file_marker(path: Path) -> tuple:
    """The change marker of a board file (engine.fsutil.sqlite_file_version)."""
    from engine.fsutil import sqlite_file_version

    return sqlite_file_version(path)


def _listing_marker(home: HomeLayout) -> tuple:
    """What changes when a board is added or removed, or hermes switches its current one."""
    from engine.kanban.boards import own_boards_root

    # Not the folders a board file lives in: opening a board there makes and removes its
    # WAL, which would list the boards again at every look.
    kanban = home.hermes_kanban_root / "kanban"
    paths = (home.kanban_db, own_boards_root(home), kanban / "boards", kanban / "current", home.hermes_kanban_db)
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            board_file = path.suffix == ".db"  # its existence counts, not its writes
            out.append((0 if board_file else st.st_mtime_ns, st.st_ino))
    return tuple(out)


def home_boards(home: HomeLayout, settings: Settings) -> list[HomeBoard]:
    """Every board of the home that has a database, hermes's first, then hermes-tui's,
    then the chosen board when it is none of them. Never creates one."""
    from engine.kanban.backends.postgres.url import DatabaseUrl
    from engine.kanban.boards import HERMES, _refs
    from engine.kanban.service import BoardService

    try:
        default = BoardService.path_for(home, settings)
    except ValueError:  # a malformed URL: the board pane says so; the home's files still count
        default = None
    refs = _refs(home, settings)
    hermes_slugs = {r.slug for r in refs if r.kind == HERMES}
    boards: list[HomeBoard] = []
    paths = set()
    for ref in refs:
        if not ref.path.is_file():
            continue
        path = Path(os.path.abspath(ref.path))
        paths.add(path)
        shadowed = ref.kind != HERMES and ref.slug in hermes_slugs  # --board names hermes's board of that slug
        is_default = isinstance(default, Path) and Path(os.path.abspath(default)) == path
        if shadowed:
            boards.append(HomeBoard(None, f"--db {shlex.quote(str(path))}", path, None if is_default else path))
        else:
            boards.append(HomeBoard(ref.slug, f"--board {ref.slug}", path, None if is_default else path))
    if isinstance(default, DatabaseUrl):
        boards.append(HomeBoard(None, "", default, None))
    elif isinstance(default, Path) and Path(os.path.abspath(default)) not in paths and default.is_file():
        boards.append(HomeBoard(None, "", Path(os.path.abspath(default)), None))
    return boards


async def read_one(home: HomeLayout, settings: Settings, board: HomeBoard, now: float) -> BoardFacts:
    from engine.kanban.service import BoardService

    async with await BoardService.open(home, settings, override=board.override, create=False) as service:
        facts = await read_board(service, now, settings.kanban.dispatch_interval_seconds)
    return replace(facts, board=board.slug, selector=board.selector)


class BoardsReader:
    """The facts of every board of the home, each read again only when it changed.

    ``markers()`` (stats, for a thread) says whether anything may have; ``read()`` reads
    the boards whose marker moved and keeps the others' facts. A board that cannot be
    read is a problem line, and its last facts stand (its items do not vanish because a
    read failed once)."""

    def __init__(self, home: HomeLayout, settings: Settings, *, max_age: float = 60.0,
                 list_every: float = 30.0) -> None:
        self.home = home
        self.settings = settings
        self.max_age = max_age
        self.list_every = list_every
        self._boards: list[HomeBoard] | None = None
        self._listed: tuple | None = None
        self._listed_at = float("-inf")
        self._facts: dict[object, tuple[tuple | None, float, BoardFacts]] = {}
        self.reads = 0  # boards read (tests and the bench count them)

    def boards(self) -> list[HomeBoard]:
        """The home's boards, listed again when a board folder or hermes's current board
        changed, or every ``list_every`` seconds."""
        listed = _listing_marker(self.home)
        at = time.monotonic()
        if self._boards is None or listed != self._listed or at - self._listed_at >= self.list_every:
            self._boards = home_boards(self.home, self.settings)
            self._listed, self._listed_at = listed, at
        return self._boards

    def markers(self) -> tuple:
        """Every board's change marker (stats only): equal markers, nothing to read."""
        return tuple((b.where, file_marker(b.where) if isinstance(b.where, Path) else None) for b in self.boards())

    async def read(self, now: float) -> tuple[tuple[BoardFacts, ...], tuple[str, ...]]:
        def listed() -> list[tuple[HomeBoard, tuple | None]]:
            return [(b, file_marker(b.where) if isinstance(b.where, Path) else None) for b in self.boards()]

        boards = await asyncio.to_thread(listed)  # the markers before the reads: a later change is seen
        named = len(boards) > 1
        out: list[BoardFacts] = []
        problems: list[str] = []
        kept = {}
        for board, marker in boards:
            cached = self._facts.get(board.where)
            at = time.monotonic()
            if cached is not None and marker is not None and cached[0] == marker and at - cached[1] < self.max_age:
                facts = cached[2]
            else:
                try:
                    facts = await read_one(self.home, self.settings, board, now)
                    self.reads += 1
                except Exception as exc:  # unreachable, damaged: said, and its last facts stand
                    problems.append(f"board {board.label}: {exc}")
                    if cached is None:
                        continue
                    facts, marker = cached[2], None
                    at = cached[1]
            kept[board.where] = (marker, at, facts)
            out.append(replace(facts, named=named))
        self._facts = kept
        return tuple(out), tuple(problems)


async def read_all(home: HomeLayout, settings: Settings, now: float) -> tuple[tuple[BoardFacts, ...], tuple[str, ...]]:
    """Every board's facts, read once (the CLI's ``attention``)."""
    return await BoardsReader(home, settings).read(now)
