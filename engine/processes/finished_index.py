"""An index of finished sessions, so listing many of them reads one file.

A session that ended with an exit record (and, if it was killed, a complete kill
record) never changes again. ``<home>/processes/.finished-index.json`` keeps such
sessions, each under a key made of its folder's and files' stat data (folder mtime and
inode; ``meta.json`` and ``exit`` mtimes and sizes). The index is only ever a shortcut:

- an entry is used only while its key equals what the folders show now (stat taken
  again at every listing); any difference, a missing folder, or an index that cannot be
  read or parsed makes the listing read that session from its folder as before;
- the key of a session is taken *before* its files are read, so a change during the
  read makes the key stale, never the content;
- writers replace the whole file atomically (write aside, rename); two writers racing
  leave one whole index, which the check above makes harmless. It is not fsynced: a
  lost or torn index only costs a rebuild.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.processes import session as sess
from engine.processes.session import ProcessSession

INDEX_FILE = ".finished-index.json"
VERSION = 2
# An index larger than this is not ours (tens of thousands of sessions at most).
MAX_BYTES = 64 * 1024 * 1024

StatKey = tuple[int, ...]

TYPE_CHECKING = False  # not typing's: a listing must not pay for importing it
if TYPE_CHECKING:
    from typing import Any


def stat_key(session_dir: Path | str, dir_fd: int | None = None) -> StatKey | None:
    """What must be unchanged for an indexed session to still be true; None when its
    exit record is missing (not indexable) or anything cannot be stat'ed. With
    ``dir_fd`` (the processes folder, open), ``session_dir`` is the folder's name."""
    try:
        folder = os.stat(session_dir, dir_fd=dir_fd)
        meta = os.stat(os.path.join(session_dir, sess.META_FILE), dir_fd=dir_fd)
        ended = os.stat(os.path.join(session_dir, sess.EXIT_FILE), dir_fd=dir_fd)
    except OSError:
        return None
    return (folder.st_mtime_ns, folder.st_ino, meta.st_mtime_ns, meta.st_size, ended.st_mtime_ns, ended.st_size)


def indexable(s: ProcessSession) -> bool:
    """Finished with an exit record, and settled (no kill still being completed)."""
    return s.finished and s.exit_code is not None and s.ended_at is not None and sess.is_settled(s)


def _session_record(s: ProcessSession) -> dict[str, Any]:
    return {
        "pid": s.pid, "fingerprint": s.fingerprint, "command": s.command, "cwd": s.cwd, "owner": s.owner,
        "started_at": s.started_at, "status": s.status, "exit_code": s.exit_code, "signal": s.signal,
        "ended_at": s.ended_at, "notify": s.notify, "watch": list(s.watch), "background": s.background,
        "argv": list(s.argv) if s.argv is not None else None,
        "name": s.name, "max_output_bytes": s.max_output_bytes, "restarted_from": s.restarted_from,
        "restart": s.restart, "max_restarts": s.max_restarts,
    }


def _session_of(session_dir: Path, rec: dict[str, Any]) -> ProcessSession:
    argv = rec["argv"]
    return ProcessSession(
        id=session_dir.name, pid=int(rec["pid"]), fingerprint=str(rec["fingerprint"]), command=str(rec["command"]),
        cwd=str(rec["cwd"]), owner=str(rec["owner"]), started_at=float(rec["started_at"]),
        status=sess.SessionStatus(rec["status"]), exit_code=int(rec["exit_code"]),
        signal=rec["signal"] if isinstance(rec["signal"], str) else None, ended_at=float(rec["ended_at"]),
        output_path=session_dir / sess.OUTPUT_FILE, notify=bool(rec["notify"]),
        watch=tuple(str(w) for w in rec["watch"]), background=bool(rec["background"]),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else None, dir=session_dir,
        **sess.extra_fields(rec),
    )


class FinishedIndex:
    """The index of one processes folder: :meth:`load` what still holds, :meth:`save`
    what the listing found (only when something changed)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / INDEX_FILE
        self._records: dict[str, tuple[StatKey, dict[str, Any]]] = {}
        self._loaded: int | None = None  # entries in the file as read (stale ones included); None: not read

    def load(self, names: list[str]) -> dict[str, ProcessSession]:
        """The indexed sessions among ``names`` whose key still matches their folder.
        The file is read once per instance; entries found stale are forgotten."""
        valid: dict[str, ProcessSession] = {}
        for session_id in self.holding(names):
            s = self.session(session_id)
            if s is not None:
                valid[session_id] = s
        return valid

    def holding(self, names: list[str]) -> list[str]:
        """The ids among ``names`` whose entry's key still matches their folder: sessions
        that are finished, settled and unchanged, known without building one of them (a
        listing of running sessions only drops them). Entries found stale are forgotten."""
        if self._loaded is None:
            self._records = self._read()
            self._loaded = len(self._records)
        wanted = [session_id for session_id in names if session_id in self._records]
        if not wanted:
            return []
        try:  # the folders are stat'ed relative to it: shorter paths for the kernel to walk
            dir_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return []
        held: list[str] = []
        try:
            for session_id in wanted:
                if stat_key(session_id, dir_fd) == self._records[session_id][0]:
                    held.append(session_id)
                else:
                    del self._records[session_id]  # rebuilt from its folder by the caller
        finally:
            os.close(dir_fd)
        return held

    def session(self, session_id: str, recheck: bool = False) -> ProcessSession | None:
        """The session an entry holds, or None (no entry, a malformed one, or with
        ``recheck`` one whose key no longer matches its folder: it is forgotten, and the
        caller reads the folder)."""
        held = self._records.get(session_id)
        if held is None:
            return None
        try:
            if recheck and stat_key(self.root / session_id) != held[0]:
                raise ValueError("stale")
            return _session_of(self.root / session_id, held[1])
        except (KeyError, TypeError, ValueError):
            del self._records[session_id]
            return None

    def _read(self) -> dict[str, tuple[StatKey, dict[str, Any]]]:
        try:
            from engine.regular_file import read_regular

            data = json.loads(read_regular(self.path, MAX_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("sessions"), dict):
            return {}
        records = {}
        for session_id, item in data["sessions"].items():
            if (isinstance(item, dict) and isinstance(item.get("key"), list) and isinstance(item.get("session"), dict)
                    and all(isinstance(k, int) for k in item["key"])):
                records[session_id] = (tuple(item["key"]), item["session"])
        return records

    def outdated(self, keyed: dict[str, tuple[StatKey, ProcessSession]], names: list[str]) -> bool:
        """Would :meth:`save` change the file: new sessions to add, or entries that went
        stale or whose folder is gone?"""
        if any(self._records.get(session_id, (None,))[0] != key for session_id, (key, _s) in keyed.items()):
            return True
        present = set(names)
        return len(self._records) != (self._loaded or 0) or any(session_id not in present for session_id in self._records)

    def save(self, keyed: dict[str, tuple[StatKey, ProcessSession]], names: list[str]) -> bool:
        """Write the entries that still held at :meth:`load` plus ``keyed`` (session_id -> key
        taken before reading, session), for the folders in ``names``, when that differs
        from the file. Any error leaves things as they were (the index is a shortcut)."""
        if not self.outdated(keyed, names):
            return False
        present = set(names)
        records = {session_id: rec for session_id, rec in self._records.items() if session_id in present}
        records.update((session_id, (key, _session_record(s))) for session_id, (key, s) in keyed.items())
        body = {"version": VERSION, "sessions": {session_id: {"key": list(k), "session": r} for session_id, (k, r) in records.items()}}
        tmp = self.root / f".{INDEX_FILE}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(body, separators=(",", ":")).encode())
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        self._records = records
        self._loaded = len(records)
        return True
