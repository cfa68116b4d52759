"""The prune's audit log, ``<home>/logs/scratch-prune.log``: writing and reading.

Record shapes are shared with Hermes (a real home's log must read the same), so
they are spelled once here. Every path and name goes through ``%r``: a newline in a
name is written as ``\\n`` and a non-UTF-8 byte as ``\\udcff``, so one record is
always one line and a crafted name cannot forge a record. Free text that may carry
outside text (a kept reason naming a process, an error string naming a sub-path)
goes through :func:`escape_text`: the same escapes, without the quotes.

A record that cannot be written (disk full, log folder missing) raises
:class:`AuditWriteError`; the caller takes no action it could not record.

The handler is opened per pass and closed at its end (no handle held between
passes); it rotates at 5 MB keeping 3 files, writes with ``errors=backslashreplace``
(a lone surrogate must not drop the record), and a rollover that finds the file
already renamed by a concurrent pass of the same home writes to the new file.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.regular_file import is_special_file, read_regular
from engine.text import escape_text

__all__ = ["AuditLog", "AuditWriteError", "escape_text", "open_audit"]

MAX_BYTES = 5 * 1024 * 1024
BACKUP_COUNT = 3
PREFIX = "scratch prune: "
DASH = "\u2014"

class AuditWriteError(Exception):
    """A record could not be written: the action it describes must not be taken."""


class _ConcurrentSafeRotatingHandler(logging.handlers.RotatingFileHandler):
    """Rotates like its base class, but remembers a failed write instead of printing a
    traceback to stderr (logging's default), so the writer can refuse the action."""

    last_error: BaseException | None = None

    def handleError(self, record) -> None:  # noqa: N802 (logging's name)
        import sys

        self.last_error = sys.exc_info()[1] or OSError("the record could not be written")
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        if stream is not None:
            try:
                stream.close()  # drop the unwritten buffer: a later record starts clean
            except Exception:
                pass

    def doRollover(self) -> None:  # noqa: N802 (logging's name)
        try:
            super().doRollover()
        except FileNotFoundError:
            # A concurrent pass renamed the file first: it is rotated already. The
            # stream is closed; emit() reopens the (new) base file for this record.
            if self.stream is not None:
                self.stream.close()
                self.stream = None  # type: ignore[assignment]


class AuditLog:
    """One pass's writer. Use as a context manager; records are INFO lines."""

    def __init__(self, log_file: Path | None, max_bytes: int | None = None, backup_count: int = BACKUP_COUNT):
        self.log_file = log_file
        max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self._logger = logging.Logger("engine.scratch.prune", logging.INFO)  # unregistered, no parent
        self._logger.propagate = False
        self._handler: logging.Handler | None = None
        if log_file is not None:
            handler = _ConcurrentSafeRotatingHandler(
                os.fspath(log_file), maxBytes=max_bytes, backupCount=backup_count,
                encoding="utf-8", errors="backslashreplace", delay=True,
            )
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            self._handler = handler
        else:
            self._handler = logging.NullHandler()
        self._logger.addHandler(self._handler)

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            try:
                self._handler.close()
            except Exception:
                pass  # a failed final flush was reported by the write that failed
            self._handler = None

    def _write(self, fmt: str, *args) -> None:
        """Write one record or raise AuditWriteError (nothing half-done is hidden)."""
        handler = self._handler
        if isinstance(handler, _ConcurrentSafeRotatingHandler):
            handler.last_error = None
        self._logger.info(PREFIX + fmt, *args)
        err = getattr(handler, "last_error", None)
        if err is not None:
            why = getattr(err, "strerror", None) or str(err) or type(err).__name__
            raise AuditWriteError(f"cannot write the prune log {escape_text(os.fspath(self.log_file))}: {why}")

    # -- the reference's shapes ------------------------------------------------------

    def removed(self, path: str, size: int) -> None:
        self._write("removed %r (%d bytes)", os.fspath(path), size)

    def sent_term(self, pid: int, name: str, cwd: str) -> None:
        self._write("sent TERM pid=%d name=%r cwd=%r", pid, name, os.fspath(cwd))

    def sent_kill(self, pid: int) -> None:
        self._write("sent KILL pid=%d (still running after TERM)", pid)

    def could_not_remove(self, path: str, exc: object) -> None:
        self._write("could not remove %r: %s", os.fspath(path), escape_text(str(exc)))

    def could_not_fully_remove(self, path: str) -> None:
        self._write("could not fully remove %r", os.fspath(path))

    def could_not_confirm(self, path: str) -> None:
        self._write("could not confirm removal of %r", os.fspath(path))

    def rescued(self, path: str, why: str = "touched since selection") -> None:
        self._write("rescued %r " + DASH + " %s, kept", os.fspath(path), escape_text(why))

    def removing(self, path: str, moved_to: str = "") -> None:
        """Written before a delete starts: a pass killed mid-delete still left a record
        (``moved_to``: the pruner's own name the entry is deleted under)."""
        if moved_to:
            self._write("removing %r (moved to %r to be deleted)", os.fspath(path), os.fspath(moved_to))
        else:
            self._write("removing %r", os.fspath(path))

    def kept_rescan_failed(self, path: str, error: str = "") -> None:
        if error:
            self._write("kept %r " + DASH + " activity re-scan failed, left untouched (%s)", os.fspath(path),
                        escape_text(error))
        else:
            self._write("kept %r " + DASH + " activity re-scan failed, left untouched", os.fspath(path))

    def vanished(self, path: str) -> None:
        self._write("entry %r vanished since selection", os.fspath(path))

    # -- ours ---------------------------------------------------------------------------

    def kept(self, path: str, reason: str) -> None:
        self._write("kept %r " + DASH + " %s", os.fspath(path), escape_text(reason))

    def quarantined(self, path: str, target: str, size: int) -> None:
        self._write("quarantined %r -> %r (%d bytes)", os.fspath(path), os.fspath(target), size)

    def could_not_quarantine(self, path: str, exc: object) -> None:
        self._write("could not quarantine %r: %s", os.fspath(path), escape_text(str(exc)))

    def restored(self, source: str, target: str, why: str) -> None:
        self._write("restored %r -> %r " + DASH + " %s", os.fspath(source), os.fspath(target), escape_text(why))

    def signal_failed(self, pid: int, name: str, detail: str) -> None:
        self._write("could not signal pid=%d name=%r: %s", pid, name, escape_text(detail))

    def survivor(self, pid: int) -> None:
        self._write("pid=%d still running after KILL", pid)

    def process_check_failed(self, why: str) -> None:
        self._write("process check failed, nothing deleted this pass: %s", escape_text(why))

    def stopped(self, where: str) -> None:
        self._write("pass stopped on request, %s", escape_text(where))

    def pass_failed(self, why: str) -> None:
        self._write("pass failed: %s", escape_text(why))

    def skipped_busy(self) -> None:
        self._write("skipped " + DASH + " another prune of this home is running")

    def worktree_prune_failed(self, repo: str, why: str) -> None:
        self._write("could not prune worktrees of %r: %s", os.fspath(repo), escape_text(why))


def open_audit(log_file: Path, ensure_dir=None) -> AuditLog:
    """An AuditLog on ``log_file``. Raises AuditWriteError when its folder cannot be
    made: a pass that cannot record what it does does nothing."""
    try:
        if ensure_dir is not None:
            ensure_dir(log_file.parent)
        else:
            log_file.parent.mkdir(parents=True, exist_ok=True)
    except Exception as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise AuditWriteError(f"cannot create the prune log folder {escape_text(os.fspath(log_file.parent))}: "
                              f"{why}") from None
    kind = is_special_file(log_file)
    if kind is not None:  # an open for writing would wait for a FIFO's reader forever
        raise AuditWriteError(f"cannot write the prune log {escape_text(os.fspath(log_file))}: it is {kind}, "
                              "not a file")
    return AuditLog(log_file)


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------

_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (.*)$")
_QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")

# (message start, action) in match order; the action is what the pane colours by.
_ACTIONS = (
    ("removed ", "removed"),
    ("removing ", "removing"),
    ("quarantined ", "quarantined"),
    ("restored ", "restored"),
    ("sent TERM", "TERM"),
    ("sent KILL", "KILL"),
    ("could not ", "error"),
    ("pid=", "error"),
    ("rescued ", "rescued"),
    ("kept ", "kept"),
    ("entry ", "vanished"),
    ("process check failed", "failed"),
    ("pass failed", "failed"),
    ("skipped", "skipped"),
)

@dataclass(frozen=True)
class PruneRecord:
    """One parsed line. ``path`` is the repr's inner text (escapes kept, so it is
    safe to show); ``detail`` is the message without the path. The log is written by
    hermes-agent too, and anyone who can write it can forge a line: both are passed
    through :func:`escape_text` as well, so a control character that was never
    escaped (``ESC]2;…BEL``, ``ESC[2J``) is shown as ``\x1b``, never acted on. ``raw``
    is the line as read (data, not for a terminal)."""

    time: str
    action: str
    path: str
    detail: str
    raw: str


def parse_record(line: str) -> PruneRecord:
    line = line.rstrip("\n")
    m = _LINE.match(line)
    if not m:
        return PruneRecord("", "other", "", escape_text(line), line)
    when, msg = m.group(1), m.group(2)
    if msg.startswith(PREFIX):
        msg = msg[len(PREFIX):]
    action = "other"
    for start, name in _ACTIONS:
        if msg.startswith(start):
            action = name
            break
    path = ""
    detail = msg
    q = _QUOTED.search(msg)
    if action in ("TERM",):
        q = None
        cm = re.search(r"cwd=(" + _QUOTED.pattern + r")", msg)
        if cm:
            path = cm.group(1)[1:-1]
            detail = msg[: cm.start()].rstrip()
    if q is not None:
        path = q.group(0)[1:-1]
        detail = (msg[: q.start()] + msg[q.end():]).replace("  ", " ").strip()
    return PruneRecord(when, action, escape_text(path), escape_text(detail), line)


def log_files(log_file: Path) -> list[Path]:
    """The log and its rotated files, oldest first (``.3``, ``.2``, ``.1``, base)."""
    files = [Path(f"{log_file}.{i}") for i in range(BACKUP_COUNT, 0, -1)]
    files.append(Path(log_file))
    return [f for f in files if f.exists()]


def iter_lines(data: bytes) -> Iterator[str]:
    for raw in data.splitlines():
        yield raw.decode("utf-8", errors="backslashreplace")


class LogTail:
    """Follows the prune log by byte offset across rotations.

    ``start()`` reads the rotated files and the log (oldest first, the last
    ``limit`` records); each ``poll()`` returns only the records appended since.
    When the log was rotated (its inode changed), the rest of the old file (now
    ``.1``) is read first, then the new file from 0; a file that shrank is re-read
    from 0. An incomplete last line is held back until its newline arrives.
    """

    def __init__(self, log_file: Path, limit: int = 5000):
        self.log_file = Path(log_file)
        self.limit = limit
        self._ino: int | None = None
        self._offset = 0
        self._partial = b""

    def start(self) -> list[PruneRecord]:
        records: list[PruneRecord] = []
        for f in log_files(self.log_file)[:-1]:
            try:
                data = read_regular(f)
            except OSError:
                continue
            records.extend(parse_record(line) for line in iter_lines(data) if line.strip())
        records.extend(self.poll())
        return records[-self.limit:]

    def _read_from(self, path: Path, offset: int) -> tuple[int, int, bytes] | None:
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return None  # a FIFO or device is no log
                if st.st_size < offset:
                    offset = 0
                    self._partial = b""
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return None
        return st.st_ino, offset + len(data), data

    def poll(self) -> list[PruneRecord]:
        chunks: list[bytes] = []
        try:
            ino_now = os.stat(self.log_file).st_ino
        except OSError:
            ino_now = None
        if self._ino is not None and ino_now != self._ino:
            rotated = Path(f"{self.log_file}.1")
            try:
                if os.stat(rotated).st_ino == self._ino:
                    got = self._read_from(rotated, self._offset)
                    if got:
                        chunks.append(got[2])
            except OSError:
                pass
            self._ino, self._offset = None, 0
        if ino_now is not None:
            got = self._read_from(self.log_file, self._offset)
            if got:
                self._ino, self._offset, data = got
                chunks.append(data)
        data = self._partial + b"".join(chunks)
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return [parse_record(line) for line in iter_lines(data[:cut]) if line.strip()]
