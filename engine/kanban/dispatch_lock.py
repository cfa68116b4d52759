"""A file board's dispatch lock: a non-blocking ``flock`` on ``<db>.dispatch.lock``.

It lives beside the store because the store takes it (:meth:`engine.kanban.backends.sqlite.store.Board.dispatch_guard`);
the dispatcher only asks the store for it. A second dispatcher of the board (another app,
the CLI, a daemon) finds it held and reports ``skipped_locked`` instead of waiting.
The lock file is not the board file, so taking it is outside the rule that only SQLite
opens the board's own files (docs/architecture.md).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path_for(db: Path) -> Path:
    """The dispatch lock of the board file ``db``."""
    return db.with_name(db.name + ".dispatch.lock")


@contextmanager
def dispatch_lock(db: Path) -> Iterator[bool]:
    """Yields True when this process holds the board's dispatch lock, False when
    another dispatcher has it (never waits)."""
    fd = os.open(lock_path_for(db), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
