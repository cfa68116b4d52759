"""Small filesystem helpers shared by the engine: atomic writes and tree sizes."""

from __future__ import annotations

import json
import os
import stat as stat_mod
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` so readers see either the old file or the whole new one."""
    import tempfile  # here: a listing that writes nothing does not pay for importing it

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_json(path: Path, obj: Any, mode: int = 0o600) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode(), mode)


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


def read_json(path: Path) -> Any:
    return json.loads(read_regular(path))


def tree_size(path: Path | str, stop_above: int | None = None) -> int:
    """Bytes under ``path`` (lstat sizes of files, never following symlinks).

    Unreadable parts are skipped (this is a report, not a decision). With
    ``stop_above`` the walk ends as soon as the total exceeds it.
    """
    total = 0
    stack = [os.fspath(path)]
    try:
        st = os.lstat(stack[0])
    except OSError:
        return 0
    if not stat_mod.S_ISDIR(st.st_mode):
        return st.st_size
    while stack:
        top = stack.pop()
        try:
            it = os.scandir(top)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
        if stop_above is not None and total > stop_above:
            return total
    return total
