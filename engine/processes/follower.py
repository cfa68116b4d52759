"""Following a growing output file by byte offset.

Each :meth:`OutputFollower.read` takes only the bytes appended since the last call.
An incomplete UTF-8 sequence at the end (at most 3 bytes) stays in the incremental
decoder until the rest arrives, so a character split across two writes is never
mangled. A file that shrank (truncated or replaced) restarts at offset 0 and says so,
so a view can clear itself instead of showing stale text.
"""

from __future__ import annotations

import codecs
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 1 << 20  # 1 MiB per read() call


@dataclass(frozen=True)
class OutputChunk:
    text: str
    reset: bool  # the file shrank: everything shown so far is stale
    offset: int  # byte offset after this chunk (including held-back bytes)


class OutputFollower:
    """Reads new bytes of ``path`` from ``offset`` on. Not thread-safe: one reader each."""

    def __init__(self, path: Path | str, offset: int = 0, max_bytes_per_read: int | None = None) -> None:
        self.path = Path(path)
        self.offset = offset
        self.max_bytes_per_read = max_bytes_per_read
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._fh = None
        self._ino: int | None = None
        self.bytes_read = 0  # total bytes taken from the file over our life (for the benchmark)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> OutputFollower:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self):
        if self._fh is None:
            self._fh = open(self.path, "rb", buffering=0)  # noqa: SIM115 - kept open across reads
            self._ino = os.fstat(self._fh.fileno()).st_ino
        return self._fh

    def _restart(self) -> None:
        self.offset = 0
        self._decoder.reset()

    def read(self) -> OutputChunk:
        """The text appended since the last read ('' when nothing new, or no file yet)."""
        reset = False
        try:
            fh = self._open()
            st = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return OutputChunk("", False, self.offset)
        if st.st_ino != self._ino:  # replaced: follow the new file from its start
            self.close()
            fh = self._open()
            self._restart()
            reset = True
        size = os.fstat(fh.fileno()).st_size
        if size < self.offset:
            self._restart()
            reset = True
        want = size - self.offset
        if self.max_bytes_per_read is not None:
            want = min(want, self.max_bytes_per_read)
        if want <= 0:
            return OutputChunk("", reset, self.offset)
        parts: list[str] = []
        while want > 0:
            data = os.pread(fh.fileno(), min(want, READ_CHUNK), self.offset)
            if not data:
                break
            self.offset += len(data)
            self.bytes_read += len(data)
            want -= len(data)
            parts.append(self._decoder.decode(data))
        return OutputChunk("".join(parts), reset, self.offset)

    @property
    def pending_bytes(self) -> int:
        """Bytes read but held back as the start of an unfinished character."""
        return len(self._decoder.getstate()[0])

    @property
    def delivered_offset(self) -> int:
        """The offset up to which every byte has been turned into text."""
        return self.offset - self.pending_bytes

    def flush(self) -> str:
        """At the very end: a dangling partial character becomes U+FFFD."""
        return self._decoder.decode(b"", final=True)


class TailBuffer:
    """The last ``limit`` characters of a stream, kept as whole lines where possible.

    Bounded memory for a view of an arbitrarily long output; the full text stays on disk.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._parts: deque[str] = deque()
        self._size = 0
        self.total_chars = 0
        self.truncated = False

    def clear(self) -> None:
        self._parts.clear()
        self._size = 0
        self.truncated = False

    def append(self, text: str) -> None:
        if not text:
            return
        self.total_chars += len(text)
        if len(text) >= self.limit:
            self._parts.clear()
            text = text[-self.limit :]
            self._size = 0
            self.truncated = True
        self._parts.append(text)
        self._size += len(text)
        while self._size > self.limit and self._parts:
            first = self._parts[0]
            excess = self._size - self.limit
            if len(first) <= excess:
                self._parts.popleft()
                self._size -= len(first)
            else:
                self._parts[0] = first[excess:]
                self._size -= excess
            self.truncated = True

    def text(self) -> str:
        joined = "".join(self._parts)
        if len(self._parts) > 1:
            self._parts.clear()
            self._parts.append(joined)
        if self.truncated:
            nl = joined.find("\n")
            if 0 <= nl < len(joined) - 1:
                return joined[nl + 1 :]  # drop the cut-off first line
        return joined

    def __len__(self) -> int:
        return self._size


def read_tail(path: Path | str, max_bytes: int) -> tuple[str, int]:
    """The decoded last ``max_bytes`` of a file and its total size (for poll/log/notify)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            start = max(0, size - max_bytes)
            fh.seek(start)
            data = fh.read(size - start)
    except FileNotFoundError:
        return "", 0
    if start > 0:
        # Skip continuation bytes of a character cut at the start of the window.
        i = 0
        while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
            i += 1
        data = data[i:]
    return data.decode("utf-8", errors="replace"), size
