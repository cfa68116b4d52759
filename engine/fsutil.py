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


def read_json(path: Path) -> Any:
    with open(path, "rb") as fh:
        return json.loads(fh.read())


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


def human_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_duration(seconds: float | None) -> str:
    """Compact age: '42s', '5m 3s', '3h 4m', '3d 4h'."""
    if seconds is None:
        return "?"
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d {h}h" if h else f"{d}d"
