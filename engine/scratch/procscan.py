"""Which processes work inside the scratch tree: one pass over /proc.

Only same-user processes may be signalled; another user's process found inside
(visible only to root) keeps its entry instead.

Only the cwd counts (an editor or ``tail`` holding a file open elsewhere is not
"working in" an entry, and is not ours to signal). ``/proc/<pid>/stat`` is read
through :mod:`engine.identity` (bytes, parsed after the last ``)``), so a comm with
spaces, ``)`` or non-UTF-8 bytes cannot shift a field.

A whole scan that cannot be done (``/proc`` unlistable, our own stat unreadable)
raises :class:`ProcScanError`; callers then delete nothing that pass. A single
process whose cwd cannot be read is skipped (it may have exited; if it is another
user's, it is not ours), which errs toward not signalling.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from engine import identity

DELETED_SUFFIX = " (deleted)"


class ProcScanError(Exception):
    """/proc could not be read as a whole: no process may be judged this pass."""


@dataclass(frozen=True)
class ScratchProcess:
    """A same-user process whose cwd is inside one of the scanned roots."""

    pid: int
    fingerprint: str
    ppid: int
    comm: bytes
    cwd: str  # without the kernel's " (deleted)" suffix
    cwd_deleted: bool  # the kernel says the cwd directory no longer exists
    foreign: bool = False  # another user's (visible when we run as root): never ours to signal

    @property
    def name(self) -> str:
        """As a path would be decoded (non-UTF-8 bytes become surrogates, which the
        audit log's %r then writes as ``\\udcff``: the same escape as for paths)."""
        return os.fsdecode(self.comm)


@dataclass(frozen=True)
class ProcSnapshot:
    """Processes inside the roots, plus pid -> (ppid, fingerprint) for every process
    read, so a descendant of a registered process can be recognised by walking up."""

    inside: tuple[ScratchProcess, ...]
    parents: Mapping[int, tuple[int, str]]

    def ancestors(self, pid: int) -> Iterable[tuple[int, str]]:
        """(pid, fingerprint) of ``pid``'s ancestors, nearest first, as far as known."""
        seen = {pid}
        cur = self.parents.get(pid)
        while cur is not None:
            ppid = cur[0]
            if ppid <= 0 or ppid in seen or ppid not in self.parents:
                return
            seen.add(ppid)
            yield ppid, self.parents[ppid][1]
            cur = self.parents[ppid]


def is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (both absolute, normalised)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root + os.sep if root != os.sep else os.sep)


def _read_cwd(pid: int) -> tuple[str, bool] | None:
    """(cwd, deleted) or None when it cannot be read (exited, not ours)."""
    link = f"/proc/{pid}/cwd"
    try:
        raw = os.readlink(link)
    except OSError:
        return None
    if not raw.endswith(DELETED_SUFFIX):
        return raw, False
    # A directory may really be called "x (deleted)": believe the suffix only when
    # the path as written is not the very directory the process sits in.
    try:
        real = os.stat(link)
        named = os.stat(raw, follow_symlinks=False)
        if (real.st_dev, real.st_ino) == (named.st_dev, named.st_ino):
            return raw, False
    except OSError:
        pass
    return raw[: -len(DELETED_SUFFIX)], True


def _cwd_under(pid: int, roots: list[str]) -> bool:
    cwd = _read_cwd(pid)
    return cwd is not None and any(is_under(cwd[0], r) for r in roots)


def scan_processes(roots: Iterable[str]) -> ProcSnapshot:
    """Same-user processes whose cwd is under any of ``roots`` (real paths).

    Most of the time nobody works inside: one ``readlink`` of each process's cwd tells,
    and only when some cwd is inside is every process's stat read (fingerprints and
    the ppid chains a judgement needs). Nobody inside gives an empty snapshot."""
    roots = [os.path.realpath(r) for r in roots]
    uid = os.getuid()
    try:
        names = os.listdir("/proc")
    except OSError as exc:
        raise ProcScanError(f"cannot list /proc: {exc.strerror or exc}") from None
    me = os.getpid()
    if identity.read_stat(me) is None:
        raise ProcScanError("cannot read /proc/self/stat")
    if identity.boot_id() is None:
        raise ProcScanError("cannot read the boot id, so no process can be fingerprinted")
    pids = [int(entry) for entry in names if entry.isdigit()]
    if not any(_cwd_under(pid, roots) for pid in pids):
        return ProcSnapshot((), MappingProxyType({}))
    parents: dict[int, tuple[int, str]] = {}
    inside: list[ScratchProcess] = []
    for pid in pids:
        stat = identity.read_stat(pid)
        if stat is None:
            continue  # exited while we looked
        fp = identity.fingerprint_of(stat)
        parents[pid] = (stat.ppid, fp)
        if stat.is_zombie:
            continue  # no cwd, nothing to signal
        try:
            foreign = os.stat(f"/proc/{pid}").st_uid != uid
        except OSError:
            continue
        cwd = _read_cwd(pid)  # another user's cwd is only readable to root
        if cwd is None:
            continue
        path, deleted = cwd
        if any(is_under(path, r) for r in roots):
            inside.append(ScratchProcess(pid, fp, stat.ppid, stat.comm, path, deleted, foreign))
    return ProcSnapshot(tuple(inside), MappingProxyType(parents))
