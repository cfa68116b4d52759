"""Mount points inside scratch entries: told apart by mount id, never entered.

A bind mount (``mount --bind ~/project $TMPDIR/e/src``, as containers and sandboxes
make) of a directory on the same filesystem has the same ``st_dev`` as everything
around it, and even the same inode as its source: ``st_dev`` cannot tell it from the
entry's own directories, and a walk that compares only that would delete the source's
files through it. A mount is told apart by its **mount id**:

- ``statx(STATX_MNT_ID)`` of an open directory fd (Linux 5.8; ctypes, since Python 3.11
  has no ``os.statx``): every directory a walk opens is compared with the entry's top
  (:func:`mount_key`); a different id is a mount, never entered. The fd is what the
  walk would list, so a mount made a moment before the open is seen as well.
- ``/proc/self/mountinfo`` (:class:`MountTable`): the mount points themselves, also
  file bind mounts and mounts below a directory a walk never reached. Read once,
  then re-read only when the kernel says the table changed (the file is pollable),
  so a check right before every move costs one ``poll``.

Where ``statx`` cannot give a mount id, the walks fall back to ``st_dev`` (other
filesystems) and the table covers bind mounts.
"""

from __future__ import annotations

import errno
import functools
import os
import select

_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_NO_AUTOMOUNT = 0x800
_AT_EMPTY_PATH = 0x1000
_STATX_MNT_ID = 0x1000
_STATX_SIZE = 256
_STX_MASK_OFFSET = 0
_STX_ATTRIBUTES_OFFSET = 8
_STX_ATTRIBUTES_MASK_OFFSET = 56
_STX_MNT_ID_OFFSET = 144
_STATX_ATTR_MOUNT_ROOT = 0x2000

MOUNTINFO = "/proc/self/mountinfo"


@functools.cache
def _libc_statx():
    """libc's statx (None where there is none: the st_dev fallback)."""
    import ctypes

    from engine.libc import libc_function

    return libc_function("statx", (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p),
                         ctypes.c_int)


class _Statx:
    """One reusable statx buffer per thread of use (a walk is single-threaded; forked
    children get their own copy)."""

    def __init__(self) -> None:
        import ctypes
        import struct

        self.ctypes = ctypes
        self.buf = ctypes.create_string_buffer(_STATX_SIZE)
        self.unpack_mask = struct.Struct("=I").unpack_from
        self.unpack_id = struct.Struct("=Q").unpack_from

    def mount_id(self, fn, dir_fd: int, name: bytes, flags: int) -> int | None:
        rc = fn(dir_fd, name, flags, _STATX_MNT_ID, self.buf)
        if rc != 0:
            err = self.ctypes.get_errno()
            if err == errno.ENOSYS:
                return None
            raise OSError(err, os.strerror(err))
        if not self.unpack_mask(self.buf, _STX_MASK_OFFSET)[0] & _STATX_MNT_ID:
            return None  # a kernel before 5.8: no mount id
        return self.unpack_id(self.buf, _STX_MNT_ID_OFFSET)[0]

    def mount_root(self) -> bool | None:
        """Is the file of the last :meth:`mount_id` the root of its mount? None: the
        kernel does not say (STATX_ATTR_MOUNT_ROOT, Linux 5.8)."""
        if not self.unpack_id(self.buf, _STX_ATTRIBUTES_MASK_OFFSET)[0] & _STATX_ATTR_MOUNT_ROOT:
            return None
        return bool(self.unpack_id(self.buf, _STX_ATTRIBUTES_OFFSET)[0] & _STATX_ATTR_MOUNT_ROOT)


@functools.cache
def _statx() -> _Statx:
    return _Statx()


def fd_mount_id(fd: int) -> int | None:
    """The mount id of the open file ``fd``; None when the kernel cannot say."""
    fn = _libc_statx()
    if fn is None:
        return None
    return _statx().mount_id(fn, fd, b"", _AT_EMPTY_PATH | _AT_SYMLINK_NOFOLLOW)


def path_mount_id(path: str, dir_fd: int | None = None, *, follow: bool = False) -> int | None:
    """The mount id of ``path`` (a symlink is followed only with ``follow``, an
    automount point not triggered); None when the kernel cannot say. OSError when it
    cannot be looked at."""
    fn = _libc_statx()
    if fn is None:
        return None
    flags = _AT_NO_AUTOMOUNT | (0 if follow else _AT_SYMLINK_NOFOLLOW)
    return _statx().mount_id(fn, _AT_FDCWD if dir_fd is None else dir_fd, os.fsencode(path), flags)


def mount_key(fd: int) -> tuple[str, int]:
    """What tells the mount of the open directory ``fd`` apart: its mount id, else
    (an old kernel) its device. Two directories with different keys are on different
    mounts; OSError when it cannot be read (the caller fails closed)."""
    mnt = fd_mount_id(fd)
    if mnt is not None:
        return ("mnt", mnt)
    return ("dev", os.fstat(fd).st_dev)


def top_key(fd: int, path: str) -> tuple[tuple[str, int], bool]:
    """(:func:`mount_key` of the open directory ``fd``, whether it is a mount point
    itself: the root of its mount, or on another mount than the folder ``path`` is
    listed in). One ``statx`` where the kernel marks mount roots."""
    fn = _libc_statx()
    if fn is not None:
        sx = _statx()
        mnt = sx.mount_id(fn, fd, b"", _AT_EMPTY_PATH | _AT_SYMLINK_NOFOLLOW)
        root = sx.mount_root() if mnt is not None else None
        if root is not None:
            return ("mnt", mnt), root
    key = mount_key(fd)
    return key, key != parent_key(path)


def child_key(name: str, dir_fd: int, st_dev: int) -> tuple[str, int]:
    """:func:`mount_key` of the directory ``name`` in ``dir_fd``, looked up by name
    (``st_dev``: its lstat's, the fallback)."""
    mnt = path_mount_id(name, dir_fd)
    return ("mnt", mnt) if mnt is not None else ("dev", st_dev)


def path_key(path: str, *, follow: bool = False) -> tuple[str, int]:
    """:func:`mount_key` of ``path``, looked up by name (followed if a symlink only with
    ``follow``, an automount point not triggered)."""
    mnt = path_mount_id(path, follow=follow)
    if mnt is not None:
        return ("mnt", mnt)
    return ("dev", (os.stat if follow else os.lstat)(path).st_dev)


def parent_key(path: str) -> tuple[str, int]:
    """:func:`mount_key` of the directory that holds ``path`` (the folder an entry is
    listed in, followed if it is a symlink, as opening the entry through it does)."""
    return path_key(os.path.dirname(os.path.abspath(path)) or "/", follow=True)


def shown_inside(top: str, where: str) -> str:
    """``where`` (a path the walk built from ``top``) relative to ``top``, for a reason."""
    return where[len(top):].lstrip("/") if where.startswith(top) else where


def mount_reason(sub_path: str | None) -> str:
    """Why an entry with a mount in it stays (``sub_path``: the mount point relative to
    the entry, None or empty when the entry itself is one)."""
    if not sub_path:
        return "it is a mount point (never entered, never pruned)"
    return f"a mount inside: {sub_path!r} (never entered, never pruned)"


# --------------------------------------------------------------------------------------
# /proc/self/mountinfo
# --------------------------------------------------------------------------------------


def _unescape(field: bytes) -> bytes:
    r"""A mountinfo path: space, tab, newline and backslash are written ``\040``,
    ``\011``, ``\012``, ``\134``."""
    if b"\\" not in field:
        return field
    out = bytearray()
    i, n = 0, len(field)
    while i < n:
        c = field[i]
        if c == 0x5C and i + 3 < n and all(0x30 <= b <= 0x37 for b in field[i + 1:i + 4]):
            out.append(int(field[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(c)
            i += 1
    return bytes(out)


def parse_mountinfo(data: bytes) -> list[str]:
    """The mount points of a mountinfo text (the fifth field of each line), unescaped."""
    points = []
    for line in data.split(b"\n"):
        fields = line.split(b" ")
        if len(fields) >= 5:
            points.append(os.fsdecode(_unescape(fields[4])))
    return points


class MountTable:
    """The mount points of this process's namespace, kept fresh by polling the table:
    :meth:`under` re-reads it only when the kernel reports a change since the last
    read. ``error``: the table could not be read (then :meth:`under` says nothing and
    the walks' mount-id checks are all there is). ``MountTable()`` is an empty one
    (:meth:`read` reads the real one)."""

    def __init__(self) -> None:
        self.points: tuple[str, ...] = ()
        self.error: str | None = None
        self._fd: int | None = None
        self._poll = None

    @classmethod
    def read(cls) -> MountTable:
        table = cls()
        try:
            table._fd = os.open(MOUNTINFO, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            table.error = f"cannot read {MOUNTINFO}: {exc.strerror or exc}"
            return table
        try:
            poller = select.poll()
            poller.register(table._fd, select.POLLPRI | select.POLLERR)
            table._poll = poller
        except (OSError, AttributeError, ValueError):
            table._poll = None  # re-read every time
        table._load()
        return table

    def _load(self) -> None:
        assert self._fd is not None
        chunks = []
        try:
            os.lseek(self._fd, 0, os.SEEK_SET)
            while chunk := os.read(self._fd, 1 << 16):
                chunks.append(chunk)
        except OSError as exc:
            self.error = f"cannot read {MOUNTINFO}: {exc.strerror or exc}"
            self.points = ()
            return
        self.error = None
        self.points = tuple(parse_mountinfo(b"".join(chunks)))

    def refresh(self) -> None:
        """Re-read the table if it changed since the last read (every time where it
        cannot be polled)."""
        if self._fd is None:
            return
        if self._poll is None:
            self._load()
            return
        try:
            changed = bool(self._poll.poll(0))
        except OSError:
            changed = True
        if changed:
            self._load()

    def under(self, path: str, *, fresh: bool = True) -> str | None:
        """The first mount point at or below ``path`` (relative to it; "" for ``path``
        itself), None when there is none. ``fresh``: look at the table as it is now."""
        if fresh:
            self.refresh()
        if not self.points:
            return None
        # The folder resolved, not the last name: an entry that is a symlink (to "/",
        # say) is a link here, not the tree it points to.
        real = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
        prefix = real.rstrip("/") + "/"
        for point in self.points:
            if point == real:
                return ""
            if point.startswith(prefix):
                return point[len(prefix):]
        return None

    def under_any(self, root: str) -> dict[str, str]:
        """{entry name: first mount point inside it (relative)} for every mount point
        below the directory ``root`` (one look at the table for a whole survey)."""
        self.refresh()
        real = os.path.realpath(root).rstrip("/") + "/"
        found: dict[str, str] = {}
        for point in self.points:
            if point.startswith(real):
                name, _, rest = point[len(real):].partition("/")
                if name:
                    found.setdefault(name, rest)
        return found

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> MountTable:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
