"""Deleting a tree inside the pruner's own process, by directory fds.

Why not ``rm -rf``: a child would outlive a pruner killed with ``kill -9`` and keep
deleting with nobody left to record it. Here the delete dies with the pass, and the
pass wrote its "removing" record before starting (see execute.py).

Why fds: every directory is opened relative to its parent's fd and its children are
unlinked by name (``unlinkat``), so a tree deeper than PATH_MAX is deleted like any
other; open fds are bounded by the depth of the current branch.

Two entry points: ``delete_tree`` removes whatever is there (quarantine expiry,
after its own check), and ``delete_unless_written`` is the verify walk and the
delete of a moved entry in one walk, stopping at the first write it meets.

A mount inside (a bind mount of real data, which has the same ``st_dev`` as the
entry, or another filesystem) is never entered: every directory is compared by mount
id with the top right after it is opened (mounts.py), so a mount made while the
delete runs is seen too. ``delete_tree`` leaves it and its parents behind as residue,
which the caller's ``lstat`` then reports; ``delete_unless_written`` stops at it
(``DeleteStop.MOUNT``), as at a write. Symlinks are unlinked, never followed. Errors
are not raised: what is left is the verdict.
"""

from __future__ import annotations

import enum
import os
import stat as st
from dataclasses import dataclass

from engine.scratch.mounts import child_key, mount_key, shown_inside, top_key

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
        top_mount, is_mount = top_key(fd, path)
        if is_mount:  # the top is a mount point itself: nothing goes
            os.close(fd)
            return
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
                    _rmdir_quietly(name, branch[-1][0])
                continue
            child_name = pending.pop()
            try:
                child = os.open(child_name, _OPEN_DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # residue
            try:
                crossed = mount_key(child) != top_mount
            except OSError:
                crossed = True  # cannot tell: not entered (residue)
            if crossed:  # a mount inside: never entered
                os.close(child)
                continue
            branch.append((child, _listed(child), child_name))
    finally:
        _close_frames(branch)
    _rmdir_quietly(path)


def _close_frames(branch: list) -> None:
    """Close the directory fds of a walk's open branch (the fd is each frame's first)."""
    for frame in branch:
        os.close(frame[0])


def _rmdir_quietly(name: str, dir_fd: int | None = None) -> None:
    """Remove an emptied directory; one that cannot go is residue for the caller's lstat."""
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass


def _listed(fd: int) -> list[str]:
    """``_empty_dir`` that turns an unreadable directory into "no subdirectories"."""
    try:
        return _empty_dir(fd)
    except OSError:
        return []


# --------------------------------------------------------------------------------------
# Deleting a moved entry while verifying it: one walk instead of two
# --------------------------------------------------------------------------------------


class DeleteStop(enum.StrEnum):
    """How a watched delete ended."""

    COMPLETED = "completed"  # every directory was seen and emptied (residue is the caller's lstat)
    WRITTEN = "written"  # an mtime at or after the moment was met: stopped before it
    UNREADABLE = "unreadable"  # a directory could not be opened, listed or lstat-ed: stopped
    MOUNT = "mount"  # a mount was met inside (never entered): stopped before it


@dataclass(frozen=True)
class WatchedDelete:
    """What a watched delete did. ``files_removed``: non-directories unlinked before
    it ended (more than 0 on a stop means the tree it leaves is partial). ``detail``:
    the escaped path of the write met, or of the failure, with its error."""

    stop: DeleteStop
    files_removed: int
    detail: str = ""


def _describe(exc: OSError, where: str) -> str:
    return f"{where!r}: {exc.strerror or exc}"


def delete_unless_written(path: str, since: float, shown: str | None = None) -> WatchedDelete:
    """Delete the directory ``path`` (an entry the pruner has moved to its own name)
    bottom-up, checking every inode's mtime before anything in its directory goes.

    This is the verify walk and the delete in one pass. Per directory: every name is
    ``lstat``-ed first (files, symlinks, subdirectories), and only when none of them
    carries an mtime at or after ``since`` are the directory's files unlinked; then its
    subdirectories follow (their own mtimes were checked in the parent's listing,
    before anything inside them was touched), and it is removed when they are done.
    The same inodes do not count as writes as in activity.py (symlinks, regular files
    with more than one link), and the top directory's own mtime does not count (a move
    may rewrite its ``..``).

    A write met stops the walk at once (nothing more is unlinked): the caller puts the
    tree back. Whatever was unlinked before was written before ``since`` (every file is
    checked before its unlink), so the write itself and everything not yet reached are
    kept; the caller says how many files had gone. A directory that cannot be read
    stops it the same way (fail closed), and so does a mount (``DeleteStop.MOUNT``,
    never entered; its mount point relative to the tree is the detail). ``shown``: the name the details use for
    ``path`` (the entry's own path, not the pruner's name for it)."""
    lstat, listdir, unlink, open_ = os.lstat, os.listdir, os.unlink, os.open
    ifmt, ifdir, iflnk, ifreg = 0o170000, st.S_IFDIR, st.S_IFLNK, st.S_IFREG  # 0o170000: the S_IFMT mask
    branch: list[tuple[int, list[str], str, str]] = []  # (fd, subdirs to go, name in parent, shown path)
    removed = 0
    name, where = "", shown or path
    try:
        top = lstat(path)
    except OSError as exc:
        return WatchedDelete(DeleteStop.UNREADABLE, 0, _describe(exc, where))
    if not st.S_ISDIR(top.st_mode):
        return _delete_file_unless_written(path, top, since, where)
    try:
        fd = open_(path, _OPEN_DIR_FLAGS)
    except OSError as exc:
        return WatchedDelete(DeleteStop.UNREADABLE, 0, _describe(exc, where))
    try:
        top_mount = mount_key(fd)
    except OSError as exc:
        os.close(fd)
        return WatchedDelete(DeleteStop.UNREADABLE, 0, _describe(exc, where))
    try:
        while True:
            subdirs: list[str] = []
            branch.append((fd, subdirs, name, where))
            files = []
            for child in listdir(fd):
                s = lstat(child, dir_fd=fd)
                fmt = s.st_mode & ifmt
                if fmt == ifdir:
                    # A mount: the delete stops before anything of this directory goes
                    # (and one made after this look is told by its fd when opened).
                    if child_key(child, fd, s.st_dev) != top_mount:
                        return WatchedDelete(DeleteStop.MOUNT, removed,
                                             repr(shown_inside(shown or path, where + "/" + child)))
                    subdirs.append(child)
                else:
                    files.append(child)
                    if fmt == iflnk or (fmt == ifreg and s.st_nlink > 1):
                        continue
                if s.st_mtime >= since:
                    return WatchedDelete(DeleteStop.WRITTEN, removed, repr(where + "/" + child))
            for child in files:
                try:
                    unlink(child, dir_fd=fd)
                    removed += 1
                except OSError:
                    pass  # residue: reported by the caller's lstat
            while branch and not branch[-1][1]:
                done_fd, _pending, done_name, _where = branch.pop()
                os.close(done_fd)
                if branch:
                    _rmdir_quietly(done_name, branch[-1][0])
            if not branch:
                break
            parent_fd, pending, _name, parent_where = branch[-1]
            name = pending.pop()
            where = parent_where + "/" + name
            fd = open_(name, _OPEN_DIR_FLAGS, dir_fd=parent_fd)
            try:
                crossed = mount_key(fd) != top_mount  # a bind mount has the same st_dev: the mount id tells
            except OSError:
                os.close(fd)
                raise
            if crossed:  # never entered: the delete stops, the caller puts the tree back
                os.close(fd)
                return WatchedDelete(DeleteStop.MOUNT, removed, repr(shown_inside(shown or path, where)))
    except OSError as exc:
        return WatchedDelete(DeleteStop.UNREADABLE, removed, _describe(exc, where))
    finally:
        _close_frames(branch)
    _rmdir_quietly(path)
    return WatchedDelete(DeleteStop.COMPLETED, removed)


def _delete_file_unless_written(path: str, top: os.stat_result, since: float, shown: str) -> WatchedDelete:
    """An entry that is a single file or symlink: its own mtime is its content's (a
    rename does not move it), so it counts, with the same exceptions as the walk."""
    counted = not (st.S_ISLNK(top.st_mode) or (st.S_ISREG(top.st_mode) and top.st_nlink > 1))
    if counted and top.st_mtime >= since:
        return WatchedDelete(DeleteStop.WRITTEN, 0, repr(shown))
    try:
        os.unlink(path)
    except OSError:
        return WatchedDelete(DeleteStop.COMPLETED, 0)  # residue: the caller's lstat reports it
    return WatchedDelete(DeleteStop.COMPLETED, 1)
