"""Keep rules that do not need the process table: the marker and the lock.

- ``.scratch-keep`` at an entry's top level: the user said "never prune this".
- A flock held by someone else: try ``LOCK_EX | LOCK_NB`` on the entry (the
  systemd-tmpfiles convention); if it cannot be taken, someone holds it: keep.
  The lock is released at once. An entry that cannot even be opened to try is kept
  too (fail closed), with that reason.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat as st

KEEP_MARKER = ".scratch-keep"


def marker_reason(entry: str) -> str | None:
    try:
        os.lstat(os.path.join(entry, KEEP_MARKER))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        return f"cannot check for {KEEP_MARKER}: {exc.strerror or exc}"
    return f"{KEEP_MARKER} marker"


def lock_reason(entry: str) -> str | None:
    """None when nobody holds a lock on ``entry`` (or it cannot hold one: a symlink)."""
    try:
        mode = os.lstat(entry).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot check for a lock: {exc.strerror or exc}"
    if st.S_ISLNK(mode) or not (st.S_ISDIR(mode) or st.S_ISREG(mode)):
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(entry, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot open to check for a lock: {exc.strerror or exc}"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return "locked by another process (flock)"
            return f"cannot check for a lock: {exc.strerror or exc}"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def static_keep_reason(entry: str) -> str | None:
    """The marker, then the lock; None when neither keeps the entry."""
    return marker_reason(entry) or lock_reason(entry)


def check_failed(reason: str | None) -> bool:
    """The reason is "could not check" (fail closed), not a rule that matched."""
    return bool(reason) and reason.startswith("cannot ")
