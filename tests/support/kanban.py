"""Helpers for the kanban tests: a movable clock, settings with worker profiles, a
board + dispatcher over a real home, and waiting for real workers to end."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
from pathlib import Path
from types import MappingProxyType

from engine.config import KanbanSettings, ProfileSettings, Settings
from engine.home import HomeLayout
from engine.kanban.backends.sqlite.store import Board
from engine.kanban.dispatcher import Dispatcher

CLI = f"{shlex.quote(sys.executable)} -m hermes_tui kanban"


class FakeClock:
    """Time at the clock boundary only: the board and the dispatcher read it; the
    processes stay real.

    Two clocks, as on a machine: the wall clock (calling it: the board's time) and the
    boot clock (:meth:`boot_time`, what ``Board.boot_time`` gives: the real
    ``CLOCK_BOOTTIME`` plus the time advanced, so the real processes' start times stay
    comparable with it). :meth:`advance` lets time pass on both; :meth:`step` moves the
    wall clock only (NTP, ``date -s``, a VM restored)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start
        self._boot_ahead = 0.0

    def __call__(self) -> float:
        return self.now

    def boot_time(self) -> float:
        return time.clock_gettime(time.CLOCK_BOOTTIME) + self._boot_ahead

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._boot_ahead += seconds

    def step(self, seconds: float) -> None:
        """The wall clock jumps by ``seconds``; no time passes."""
        self.now += seconds


def kanban_settings(profiles: dict[str, str | dict] | None = None, **kanban) -> Settings:
    """Settings with the given profiles (name -> command, or a dict of profile fields)."""
    built = {}
    for name, spec in (profiles or {}).items():
        if isinstance(spec, str):
            built[name] = ProfileSettings(name=name, command=spec)
        else:
            env = MappingProxyType(dict(spec.pop("env", {})))
            built[name] = ProfileSettings(name=name, env=env, **spec)
    base = Settings()
    k = dataclasses.replace(KanbanSettings(), profiles=MappingProxyType(built), **kanban)
    return dataclasses.replace(base, kanban=k,
                               processes=dataclasses.replace(base.processes, kill_grace_seconds=1.0))


async def open_board(home: HomeLayout, clock: FakeClock | None = None, url: str | None = None) -> Board:
    """The home's SQLite board, or (``url``) a PostgreSQL board: the behaviour tests run on both."""
    if url:
        from engine.kanban.backends.postgres.board import PgBoard
        from engine.kanban.backends.postgres.url import DatabaseUrl

        return await PgBoard.open(DatabaseUrl.parse(url), clock=clock or FakeClock())
    return await Board.open(home.kanban_db, clock=clock or FakeClock())


def shared_board_location(tmp_path: Path, url: str | None) -> str:
    """Where several homes' one board is: the PostgreSQL ``url``, else an SQLite file
    outside every home (as ``--db PATH`` gives)."""
    return url or str(tmp_path / "shared" / "kanban.db")


async def open_shared_board(location: str, home: HomeLayout, clock: FakeClock) -> Board:
    """The board at :func:`shared_board_location`'s ``location`` (``home``: whose it is
    opened from, for a server board)."""
    if location.startswith("postgresql"):
        return await open_board(home, clock, location)
    Path(location).parent.mkdir(exist_ok=True)
    return await Board.open(Path(location), clock=clock)


def dispatcher(board: Board, home: HomeLayout, settings: Settings, spawner) -> Dispatcher:
    return Dispatcher(board, home=home, settings=settings, spawner=spawner)


def wait_for_exit(spawner, session_id: str, timeout: float = 30.0) -> None:
    """Wait for a registry worker to end (its exit recorded or it is gone)."""
    session = spawner.registry.wait(session_id, timeout=timeout)
    assert session.finished, f"worker {session_id} still running after {timeout}s"


def kill_all_workers(spawner) -> None:
    for session in spawner.registry.list(include_finished=False):
        spawner.registry.kill(session.id, grace=0.2)


def read_log(home: HomeLayout, task_id: str) -> str:
    path = Path(home.kanban_logs_dir) / f"{task_id}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def deleted_board_files(pid: int | str = "self") -> list[str]:
    """The board files (board.db or kanban.db, -wal, -shm) a process holds open although
    they were unlinked: the mark of a process whose SQLite locks were dropped under it."""
    import os

    found = []
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if ("kanban.db" in target or "board.db" in target) and target.endswith("(deleted)"):
            found.append(target)
    return found


def cli_argv(home: HomeLayout, *args: str) -> list[str]:
    return [sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", *args]


def integrity(db: Path) -> str:
    """``PRAGMA integrity_check`` of a board nobody has open any more."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def runs_per_card(db: Path) -> dict[str, int]:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT t.id, count(r.id) FROM tasks t LEFT JOIN task_runs r ON r.task_id = t.id "
                           "GROUP BY t.id").fetchall()
    finally:
        con.close()
    return {task_id: n for task_id, n in rows}
