"""Deleting a tree inside the pruner's own process, by directory fds.

Why not ``rm -rf``: a child would outlive a pruner killed with ``kill -9`` and keep
deleting with nobody left to record it. Here the delete dies with the pass, and the
pass wrote its "removing" record before starting (see execute.py).

Why fds: every directory is opened relative to its parent's fd and its children are
unlinked by name (``unlinkat``), so a tree deeper than PATH_MAX is deleted like any
other; open fds are bounded by the depth of the current branch.

Like ``rm --one-file-system``, a directory on another filesystem (a bind mount of
real data inside an entry) is never entered: it and its parents stay behind as
residue, which the caller's ``lstat`` then reports. Symlinks are unlinked, never
followed. Errors are not raised: what is left is the verdict.
"""

from __future__ import annotations

import os
import stat as st

_OPEN_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _empty_dir(fd: int) -> list[str]:
    """Unlink every non-directory in the directory ``fd``; return its subdirectories.

    ``unlink`` is simply tried on every name: Linux refuses a directory with EISDIR,
    which is how directories are told apart without an lstat or a ``DirEntry`` per
    name (files are the many, directories the few)."""
    subdirs = []
    unlink = os.unlink
    for name in os.listdir(fd):
        try:
            unlink(name, dir_fd=fd)
        except IsADirectoryError:
            subdirs.append(name)
        except PermissionError:  # EPERM: what some systems answer for a directory
            subdirs.append(name)
        except OSError:
            pass  # residue: reported by the caller's lstat
    return subdirs


def delete_tree(path: str) -> None:
    """Remove ``path`` (a directory, a file or a symlink) and everything below it."""
    try:
        top = os.lstat(path)
    except OSError:
        return
    if not st.S_ISDIR(top.st_mode):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    try:
        fd = os.open(path, _OPEN_DIR_FLAGS)
    except OSError:
        return
    try:
        device = os.fstat(fd).st_dev
        # (fd, subdirectories still to remove, its name in the parent). A frame with
        # nothing left is closed and its directory removed relative to the parent's fd.
        branch: list[tuple[int, list[str], str]] = [(fd, _listed(fd), "")]
    except OSError:
        os.close(fd)
        return
    try:
        while branch:
            fd, pending, name = branch[-1]
            if not pending:
                branch.pop()
                os.close(fd)
                if branch:
                    try:
                        os.rmdir(name, dir_fd=branch[-1][0])
                    except OSError:
                        pass  # residue
                continue
            child_name = pending.pop()
            try:
                child = os.open(child_name, _OPEN_DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # residue
            if os.fstat(child).st_dev != device:  # a mount inside: never entered
                os.close(child)
                continue
            branch.append((child, _listed(child), child_name))
    finally:
        for frame in branch:
            os.close(frame[0])
    try:
        os.rmdir(path)
    except OSError:
        pass


def _listed(fd: int) -> list[str]:
    """``_empty_dir`` that turns an unreadable directory into "no subdirectories"."""
    try:
        return _empty_dir(fd)
    except OSError:
        return []
