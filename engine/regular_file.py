"""Reading a file of the home that must be a regular file: never waiting on a FIFO,
never reading a device. Kept apart from engine.fsutil (which imports typing and
tempfile) so a listing that reads config.yaml pays for nothing else."""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path


class NotARegularFile(OSError):
    """A FIFO, socket or device where a file of the home belongs: never read (an open
    of a FIFO waits for a writer forever, a device may never end)."""


_KINDS = ((stat_mod.S_ISFIFO, "a FIFO"), (stat_mod.S_ISSOCK, "a socket"), (stat_mod.S_ISCHR, "a character device"),
          (stat_mod.S_ISBLK, "a block device"), (stat_mod.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: Path | str, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes`` + 1 of them, so a
    caller can tell "too big"). Opened without blocking (``O_NONBLOCK``: a FIFO's open
    returns at once, and is then refused), never as a controlling terminal; anything but
    a regular file raises :class:`NotARegularFile` (an OSError: ``strerror`` says what
    it is), a missing one FileNotFoundError."""
    import errno

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        kind = is_special_file(path) if exc.errno == errno.ENXIO else None  # a socket cannot be opened
        if kind is None:
            raise
        raise NotARegularFile(errno.EINVAL, f"is {kind}, not a regular file", os.fspath(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat_mod.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"is {_kind(mode)}, not a regular file", os.fspath(path))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    finally:
        os.close(fd)


def is_special_file(path: Path | str) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a directory
    (``a FIFO``...), else None: for a file the caller is about to open for writing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode) else _kind(mode)
