"""Following a growing output file by byte offset.

Each read takes only the bytes appended since the last one. An incomplete UTF-8
sequence at the end (at most 3 bytes) is held back in memory and put in front of the
next read, so a character split across two writes is never mangled and no byte is
read from the file twice. A file that shrank (truncated or replaced) restarts at
offset 0 and says so, so a view can clear itself instead of showing stale text.

:meth:`OutputFollower.read` returns a :class:`Chunk`: raw bytes cut at a character
boundary, decoded only when its ``text`` is asked for. Every reading method returns
that one type.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from engine.processes.output_bound import MARKER_WORDS, data_after, may_have_holes

# At most this much per read call: a bounded buffer is reused by the allocator, while
# one huge read would fault in fresh pages for every call. Callers loop until empty.
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """What one read of a follower gave: raw bytes cut at a character boundary, decoded
    only when ``text`` is asked for (a view that shows a tail decodes just the tail)."""

    data: bytes
    reset: bool  # the file shrank or was replaced: everything shown so far is stale
    offset: int  # file offset after this read (held-back bytes included)
    skipped: int = 0  # bytes read but dropped before ``data`` (see read_newest)
    cut: int = 0  # bytes jumped over that the output bound had cut (see output_bound)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def incomplete_tail(data: bytes | bytearray | memoryview) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character not yet complete (0-3)."""
    n = len(data)
    for back in range(1, min(3, n) + 1):
        b = data[n - back]
        if b < 0x80:
            return 0  # ASCII: complete
        if b >= 0xC0:  # a lead byte: how long should its sequence be?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return back if back < need else 0
        # a continuation byte: look further back
    return 0


class OutputFollower:
    """Reads new bytes of ``path`` from ``offset`` on. Not thread-safe: one reader each."""

    def __init__(self, path: Path | str, offset: int = 0, max_bytes_per_read: int = READ_CHUNK) -> None:
        self.path = Path(path)
        self.offset = offset
        self.max_bytes_per_read = max(4, int(max_bytes_per_read))
        self._pending = b""
        self._fd: int | None = None
        self._ino: int | None = None
        self.bytes_read = 0  # bytes taken from the file over our life (each exactly once)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OutputFollower:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            self._ino = os.fstat(self._fd).st_ino
        return self._fd

    def _restart(self) -> None:
        self.offset = 0
        self._pending = b""

    @property
    def delivered_offset(self) -> int:
        """The offset up to which every byte has been handed out."""
        return self.offset - len(self._pending)

    def read(self) -> Chunk:
        """New bytes (at most ``max_bytes_per_read``), ending on a character boundary.
        Empty data means there is nothing new right now (or no file yet)."""
        reset = False
        try:
            fd = self._open()
            st = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return Chunk(b"", False, self.offset)
        if st.st_ino != self._ino:  # replaced: follow the new file from its start
            self.close()
            fd = self._open()
            self._restart()
            reset = True
        st = os.fstat(fd)
        size = st.st_size
        if size < self.offset:
            self._restart()
            reset = True
        want = min(size - self.offset, self.max_bytes_per_read)
        if want <= 0:
            return Chunk(b"", reset, self.offset)
        note = b""
        jumped = 0
        sparse = may_have_holes(st)
        for _attempt in range(3):
            if sparse:
                # The output bound cut the middle: read data only, jump the hole.
                more, want, words = self._past_hole(fd, size, want)
                jumped += more
                note = note or words
                if want <= 0:
                    return Chunk(note, reset, self.offset, cut=jumped)
            data = os.pread(fd, want, self.offset)
            if not sparse:
                break
            start, end = data_after(fd, self.offset, size)
            if start == self.offset and end >= self.offset + len(data):
                break
            # Cut while we read it: these bytes may be zeros now; look again.
        else:
            return Chunk(note, reset, self.offset, cut=jumped)
        self.offset += len(data)
        self.bytes_read += len(data)
        if jumped:
            # A character split by the cut cannot be completed: its start is dropped.
            self._pending = b""
        if self._pending or note:
            data = self._pending + note + data
        held = incomplete_tail(data)
        if held:
            self._pending = data[-held:]
            data = data[:-held]
        else:
            self._pending = b""
        return Chunk(data, reset, self.offset, cut=jumped)

    def _past_hole(self, fd: int, size: int, want: int) -> tuple[int, int, bytes]:
        """Move past a cut part at our offset: (bytes jumped, bytes readable from the
        new offset before the next hole, a note when the jump was not announced by the
        marker, i.e. we had been reading what was then cut)."""
        start, end = data_after(fd, self.offset, size)
        jumped = start - self.offset
        note = b""
        if jumped:
            if not _after_marker(fd, self.offset):
                note = (f"\n... hermes-tui: {jumped} bytes of output were cut while being read "
                        "(processes.max_output_bytes) ...\n").encode()
            self.offset = start
        return jumped, min(want, end - start, self.max_bytes_per_read), note

    # The name the output view still calls; the same read.
    read_bytes = read

    def read_newest(self, keep: int) -> Chunk:
        """Everything new, of which only about the newest ``keep`` bytes are decoded.

        A view that draws the end of a fast stream reads every byte (the offset moves on)
        but pays the UTF-8 decode only for what it draws: older pieces are dropped as
        whole reads, so the text starts at a read boundary, which is a character
        boundary too. ``skipped`` counts the bytes read but not decoded."""
        pieces: deque[bytes] = deque()
        kept = skipped = 0
        reset = False
        while True:
            chunk = self.read()
            if chunk.reset:
                pieces.clear()
                kept = skipped = 0
                reset = True
            if not chunk.data:
                break
            pieces.append(chunk.data)
            kept += len(chunk.data)
            while len(pieces) > 1 and kept - len(pieces[0]) >= keep:
                dropped = pieces.popleft()
                kept -= len(dropped)
                skipped += len(dropped)
        return Chunk(b"".join(pieces), reset, self.offset, skipped)

    def read_all(self) -> Chunk:
        """Everything new, however much: repeated reads joined (resets are reported)."""
        parts: list[bytes] = []
        reset = False
        while True:
            chunk = self.read()
            if chunk.reset:
                parts.clear()
                reset = True
            if not chunk.data:
                return Chunk(b"".join(parts), reset, self.offset)
            parts.append(chunk.data)

    def flush(self) -> str:
        """At the very end: a dangling partial character becomes U+FFFD."""
        held, self._pending = self._pending, b""
        return held.decode("utf-8", errors="replace")


def _after_marker(fd: int, offset: int) -> bool:
    """Does the block that ends at ``offset`` hold the bound's marker line?"""
    words = MARKER_WORDS.split("{n}")[1].encode()
    back = min(offset, 8192)
    try:
        return words in os.pread(fd, back, offset - back)
    except OSError:
        return False


# The most :func:`read_tail` reads: a line longer than this (a log without newlines)
# is shown by its last part only, so a tail costs bounded time and memory.
TAIL_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Tail:
    """The end of a file: raw bytes starting on a character boundary, the file's size,
    and how many bytes before them were left out although they belong to the first
    line shown (0: that line is whole, or the whole file is shown)."""

    data: bytes
    total: int
    cut: int = 0

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def read_tail(path: Path | str, max_bytes: int = TAIL_MAX_BYTES, lines: int | None = None,
              block: int = 64 * 1024) -> Tail:
    """The end of a file, reading backwards in blocks, so the tail of a huge log costs
    only the tail: the last ``lines`` lines (every line when None), never more than the
    last ``max_bytes`` bytes. A missing file is an empty tail."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return Tail(b"", 0)
    try:
        st = os.fstat(fd)
        size = st.st_size
        if (lines is not None and lines <= 0) or size == 0:
            return Tail(b"", size)
        floor = max(0, size - max(1, max_bytes))
        if may_have_holes(st):
            floor = max(floor, _last_data_start(fd, floor, size))  # never read into a cut
        pos = size
        blocks: list[bytes] = []
        newlines = 0
        while pos > floor:
            step = min(block, pos - floor)
            pos -= step
            chunk = os.pread(fd, step, pos)
            blocks.append(chunk)
            # A final newline ends the last line; n lines need n newlines before the tail.
            newlines += chunk.count(b"\n", 0, len(chunk) - 1 if pos + step == size else len(chunk))
            if lines is not None and newlines >= lines:
                break
        data = b"".join(reversed(blocks))
    finally:
        os.close(fd)
    if lines is not None:
        start = _start_of_last_lines(data, lines)
        if start is not None:
            return Tail(data[start:], size)
    if pos == 0:
        return Tail(data, size)  # the whole file (or fewer lines than asked for)
    skip = _continuation_bytes(data)
    return Tail(data[skip:], size, pos + skip)


def _last_data_start(fd: int, pos: int, size: int) -> int:
    """Where the data that runs to the end of the file starts (at or after ``pos``)."""
    while True:
        start, end = data_after(fd, pos, size)
        if end >= size or start >= size:
            return start
        pos = end


def _start_of_last_lines(data: bytes, n: int) -> int | None:
    """Where the last ``n`` lines of ``data`` start, or None when it holds fewer."""
    cut = len(data) - 1  # skip the final newline (if any) when counting back
    for _ in range(n):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            return None
    return cut + 1


def _continuation_bytes(data: bytes) -> int:
    """How many bytes at the start of ``data`` continue a character cut off before it."""
    i = 0
    while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i
