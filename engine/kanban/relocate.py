"""Move an older hermes-tui board out of ``<home>/kanban.db``, the name hermes-agent uses.

hermes-tui once kept its board at ``<home>/kanban.db``; hermes-agent opening that file
migrates it and then crashes, so hermes-tui's board now lives at
``<home>/hermes-tui/board.db``. An existing board of ours (its SQLite application id
says so, read through SQLite immutable and read-only) is moved there on first use, by
rename: the same bytes, with its ``-wal`` and ``-shm`` when they exist.

Why it is safe:

- **Never while a connection is open.** A process holding the file (or its -wal/-shm)
  open would keep writing to the moved inode while a newer opener of the old name
  created a new empty board. Every process's open descriptors are looked up in
  ``/proc/*/fd`` (a stat of each link, never an open); while any process holds one, the
  board is used where it is and the move waits for a later start.
- **One mover at a time.** Two hermes-tui processes starting at once serialise on an
  ``flock`` of ``<home>/hermes-tui/.board-move.lock`` and each re-checks under it: the
  second finds the board moved and uses it.
- **A crash half-way is finished next time.** The side files move first and the main
  file last, so "the main file is still at the old name" means "not moved yet", and the
  next move carries on from there (a side file already moved is not moved again).
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from engine.home import HomeLayout
from engine.kanban.backends.hermes.board_file import BoardKind, board_kind

SIDE_FILES = ("-wal", "-shm")
LOCK_NAME = ".board-move.lock"


@dataclass(frozen=True)
class Relocation:
    """Which file to open, and whether this call moved it there (or why not)."""

    path: Path
    moved: bool = False
    deferred: str = ""  # why the board stays at the old name for now


def _identities(paths: list[Path]) -> set[tuple[int, int]]:
    found = set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def holders(paths: list[Path], proc: Path = Path("/proc")) -> list[int]:
    """Pids with one of ``paths`` open (by device and inode, seen in /proc/*/fd)."""
    wanted = _identities(paths)
    if not wanted:
        return []
    pids = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.scandir(f"{entry.path}/fd")
        except OSError:  # gone, or another user's (a 0700 home is not theirs to open)
            continue
        with fds:
            for fd in fds:
                try:
                    st = os.stat(fd.path)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in wanted:
                    pids.append(int(entry.name))
                    break
    return pids


def relocate_board(home: HomeLayout) -> Relocation:
    """Move our board from ``<home>/kanban.db`` to ``<home>/hermes-tui/board.db`` when it
    is ours and nobody has it open; the file to use either way."""
    source, target = home.shared_kanban_db, home.kanban_db
    if target.exists() or board_kind(source) is not BoardKind.OURS:
        return Relocation(target)  # nothing to move: nothing is created (not even the folder)
    home.ensure_dir(home.own_dir)
    fd = os.open(home.own_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _relocate_locked(source, target)
    finally:
        os.close(fd)  # closing drops the flock


def _relocate_locked(source: Path, target: Path) -> Relocation:
    if target.exists() or board_kind(source) is not BoardKind.OURS:
        return Relocation(target)
    files = [source, *(Path(f"{source}{s}") for s in SIDE_FILES)]
    busy = holders(files)
    if busy:
        return Relocation(source, deferred=f"{source} is open in process {', '.join(map(str, busy))}: "
                                            "it moves to hermes-tui/board.db once nobody has it open")
    try:
        for suffix in SIDE_FILES:
            side = Path(f"{source}{suffix}")
            if side.exists():
                os.rename(side, f"{target}{suffix}")
        os.rename(source, target)
    except OSError as exc:
        return Relocation(source, deferred=f"cannot move {source} to {target}: {exc.strerror or exc}")
    return Relocation(target, moved=True)


def route_board(home: HomeLayout, path: Path, create: bool, chosen: bool) -> tuple[Path, bool] | None:
    """None for hermes-agent's board; else the file to open and whether it may be
    created. An older board of ours found at ``<home>/kanban.db`` by default (not
    ``chosen`` by --db, $HERMES_KANBAN_DB or config) is moved to
    ``<home>/hermes-tui/board.db`` first (:func:`relocate_board`)."""
    kind = board_kind(path)
    if kind is BoardKind.HERMES:
        return None
    if kind is BoardKind.OURS and path == home.shared_kanban_db and not chosen:
        moved = relocate_board(home)
        return moved.path, create and moved.path == home.kanban_db
    if path == home.kanban_db and create:
        home.ensure_dir(home.own_dir)
    return path, create
