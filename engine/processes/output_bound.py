"""Keeping a session's stored output within a bound: its head, a marker, its tail.

A command writes its output straight into ``output.log`` (O_APPEND, no pipe, no relay),
so nothing stands between it and the disk. When the file holds more than twice the
bound, the middle is cut *in place*: one block after the head is overwritten with a
marker line that says how many bytes were left out, and everything from there up to
the last half-bound is given back to the filesystem by punching a hole
(``fallocate(PUNCH_HOLE | KEEP_SIZE)``). The file's size, and so every byte offset a
follower holds, stays what it was; only the cut part reads as a hole.

Readers find the cut with ``lseek(SEEK_DATA / SEEK_HOLE)``: :func:`data_after` says
where data goes on after an offset and how far it runs before the next hole. A file
with no hole (never cut, or a filesystem without holes) reads as before.

The layout of a cut file (``H`` = half the bound rounded up to a block, ``B`` = one
filesystem block)::

    [0, H)            the head: the first output, where start-up errors are
    [H, H+B)          the marker: one line, padded with spaces to fill its block
    [H+B, resume)     a hole (reads as zeros, takes no space)
    [resume, size)    the tail: at least half the bound, growing until the next cut

The steps of a cut are ordered so that a cutter stopped between any two leaves a file
that reads correctly: the marker is written first (a file with a marker and no hole
yet reads head, marker, then the original bytes), then the hole is punched. The next
cut redoes both from the file as it is; nothing is kept beside it.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
DEFAULT_BLOCK = 4096
MARKER_WORDS = "hermes-tui: {n} bytes of output left out here (processes.max_output_bytes)"


class CannotCut(OSError):
    """The filesystem cannot punch holes (or the file cannot be written): the output
    grows unbounded, and the keeper says so once."""


@dataclass(frozen=True)
class Cut:
    """What one :func:`cut_middle` did."""

    path: str
    left_out: int  # bytes between the head and the tail, in all (this cut and earlier ones)
    resume_at: int  # where the tail now starts
    stored: int  # bytes the file holds after the cut (head + marker + tail)


def _fallocate():
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fn = libc.fallocate
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    fn.restype = ctypes.c_int
    return fn, ctypes


_FALLOCATE = None


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Give ``[offset, offset+length)`` back to the filesystem, keeping the file's size."""
    global _FALLOCATE
    if length <= 0:
        return
    if _FALLOCATE is None:
        _FALLOCATE = _fallocate()
    fn, ctypes = _FALLOCATE
    if fn(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        err = ctypes.get_errno()
        raise CannotCut(err, os.strerror(err))


def block_of(st: os.stat_result) -> int:
    return max(512, int(getattr(st, "st_blksize", 0) or DEFAULT_BLOCK))


def head_end(bound: int, block: int) -> int:
    """Where the head ends: half the bound, rounded up to a whole block."""
    half = max(1, bound // 2)
    return -(-half // block) * block


def stored_bytes(st: os.stat_result) -> int:
    """Bytes a file really holds on disk (its blocks), not its apparent size."""
    return min(st.st_size, st.st_blocks * 512) if st.st_blocks else 0


def _seek(fd: int, offset: int, whence: int) -> int | None:
    try:
        return os.lseek(fd, offset, whence)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # past the last data (SEEK_DATA) or the end
            return None
        raise


def data_after(fd: int, offset: int, size: int) -> tuple[int, int]:
    """``(start, end)``: data goes on at ``start >= offset`` and runs (at least) to ``end``
    before a hole or the end of the file. ``start == end == size``: nothing left."""
    if offset >= size:
        return size, size
    start = _seek(fd, offset, os.SEEK_DATA)
    if start is None or start >= size:
        return size, size
    end = _seek(fd, start, os.SEEK_HOLE)
    return start, min(size if end is None else end, size)


def may_have_holes(st: os.stat_result) -> bool:
    """Cheap first look: a file whose blocks hold a block less than its size may hold a
    hole (a freshly written file can lag behind its blocks only by what is not flushed
    yet, which SEEK_DATA still reports as data)."""
    return st.st_size > 0 and st.st_blocks * 512 + block_of(st) < st.st_size


def marker_block(left_out: int, block: int, newline_first: bool) -> bytes:
    """One block of text: the marker line, padded with spaces, ending in a newline."""
    words = MARKER_WORDS.format(n=left_out).encode()
    lead = b"\n" if newline_first else b""
    body = lead + b"... " + words + b" ..."
    pad = block - len(body) - 1
    if pad < 0:
        body = body[: block - 1]
        pad = 0
    return body + b" " * pad + b"\n"


def current_resume(fd: int, size: int, hole_from: int) -> int:
    """Where the tail starts: after the hole that begins at ``hole_from`` (``hole_from``
    itself when there is no hole there, the file never cut or cut only half-way)."""
    start, _end = data_after(fd, hole_from, size)
    return start if start > hole_from else hole_from


def cut_middle(path: str, bound: int) -> Cut | None:
    """Cut the middle of ``path`` when it holds more than twice ``bound`` bytes.

    None: nothing to cut (under the bound, or missing). Raises :class:`CannotCut` when
    the filesystem cannot punch holes. Safe against an appending writer (it only ever
    writes at the end) and against a reader (offsets never move)."""
    if bound <= 0:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        import stat as stat_mod

        if not stat_mod.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        block = block_of(st)
        head = head_end(bound, block)
        hole_from = head + block
        if size <= 2 * bound or size <= hole_from + block:
            return None
        resume = current_resume(fd, size, hole_from)
        stored = head + block + (size - resume) if resume > hole_from else size
        if stored <= 2 * bound:
            return None
        new_resume = max(resume, (size - max(1, bound // 2)) // block * block)
        if new_resume <= hole_from:
            return None
        first = os.pread(fd, 1, head - 1) if head > 0 else b"\n"
        marker = marker_block(new_resume - head, block, newline_first=first != b"\n")
        os.pwrite(fd, marker, head)
        punch_hole(fd, hole_from, new_resume - hole_from)
        return Cut(path, new_resume - head, new_resume, head + block + (size - new_resume))
    finally:
        os.close(fd)


def left_out_at(fd: int, offset: int, size: int) -> tuple[int, int]:
    """For a reader at ``offset``: ``(next, skipped)``: where its next byte of data is,
    and how many bytes it skips to get there (0 when ``offset`` is on data)."""
    start, _end = data_after(fd, offset, size)
    return start, start - offset
