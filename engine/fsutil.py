"""Small filesystem helpers shared by the engine: atomic writes and tree sizes."""

from __future__ import annotations

import json
import os
import stat as stat_mod
from pathlib import Path
from typing import Any

from engine.regular_file import read_regular


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
    return json.loads(read_regular(path))


def tree_size(path: Path | str, stop_above: int | None = None, on_disk: bool = False) -> int:
    """Bytes under ``path`` (lstat sizes of files, never following symlinks; with
    ``on_disk``, what each file really holds, so a cut output's hole counts nothing).

    Unreadable parts are skipped (this is a report, not a decision). With
    ``stop_above`` the walk ends as soon as the total exceeds it. A mount inside (a
    bind mount has the same ``st_dev``: told by mount id) is not entered: its bytes
    are not the tree's.
    """
    from engine.scratch.mounts import path_key

    total = 0
    stack = [os.fspath(path)]
    try:
        st = os.lstat(stack[0])
        if not stat_mod.S_ISDIR(st.st_mode):
            return st.st_size
        top_mount = path_key(stack[0])
    except OSError:
        return 0
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
                        if path_key(entry.path) == top_mount:
                            stack.append(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                        total += min(st.st_size, st.st_blocks * 512) if on_disk else st.st_size
                except OSError:
                    continue
        if stop_above is not None and total > stop_above:
            return total
    return total


def sqlite_file_version(path: str | os.PathLike[str]) -> tuple:
    """The change marker of an SQLite database in WAL mode: the change time, size and
    inode of its file and its WAL; every commit moves one of them. Stats only: nothing
    is opened (a board file is SQLite's to open)."""
    version = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{os.fspath(path)}{suffix}")
        except OSError:
            version.append(None)
        else:
            version.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(version)
