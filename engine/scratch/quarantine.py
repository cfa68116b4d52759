"""Quarantine: the undo of a prune.

With ``scratch.quarantine_hours > 0`` a pruned entry is not deleted; it is renamed
(atomically, same filesystem) to ``<home>/cache/scratch-quarantine/<name>.<stamp>``
right after its last activity re-check. A rename cannot be cut half-way, so a write
that lands during the prune is not lost: it lands in the quarantined tree, and the
expiry pass (which runs a fresh activity check first) restores such an entry
instead of deleting it.

The stamp is the moment the pass's last activity check of the entry *started*
(its re-check, or the plan's walk in a pass that plans and acts at once; not the
rename's), and expiry counts only mtimes at or after it: a file written while that
walk ran is restored, never deleted at expiry. An entry name too long for
``<name>.<stamp>`` (names may use all 255 bytes) gets a shortened name ending in a
hash of the full one; the full name stays in the prune log's record of the move.

Renames never replace anything: ``renameat2(RENAME_NOREPLACE)`` where the kernel
has it, else a check-then-rename (a plain ``rename`` silently replaces a file or an
empty directory at the target).
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
_STAMP_RE = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?$")
_RENAME_NOREPLACE = 1
NAME_MAX = 255  # bytes in one path component (Linux filesystems)
_HASH_CHARS = 16
_AT_FDCWD = -100


def _libc_renameat2():
    """libc's renameat2, looked up on the first rename (listing the quarantine never
    pays for ctypes)."""
    import ctypes

    from engine.libc import libc_function

    return libc_function("renameat2", (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint),
                         ctypes.c_int)


def rename_noreplace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename ``src`` to ``dst``; FileExistsError if ``dst`` exists (never replaces)."""
    src_b, dst_b = os.fsencode(src), os.fsencode(dst)
    renameat2 = _libc_renameat2()
    if renameat2 is not None:
        import ctypes

        rc = renameat2(_AT_FDCWD, src_b, _AT_FDCWD, dst_b, _RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), os.fsdecode(src_b), None, os.fsdecode(dst_b))
    if os.path.lexists(dst_b):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(dst_b))
    os.rename(src_b, dst_b)


@dataclass(frozen=True)
class QuarantinedEntry:
    """One entry in the quarantine folder."""

    path: str
    name: str  # the original entry name
    quarantined_at: float

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    def expires_at(self, quarantine_hours: float) -> float:
        return self.quarantined_at + quarantine_hours * 3600.0


def stamp(now: float | None = None) -> str:
    return time.strftime(STAMP_FORMAT, time.gmtime(time.time() if now is None else now))


def parse_name(file_name: str) -> tuple[str, float] | None:
    """``<name>.<stamp>[-n]`` -> (name, epoch seconds); None if not one of ours."""
    name, sep, tail = file_name.rpartition(".")
    if not sep or not name:
        return None
    m = _STAMP_RE.match(tail)
    if not m:
        return None
    try:
        import calendar

        when = calendar.timegm(time.strptime(m.group(1), STAMP_FORMAT))
    except ValueError:
        return None
    return name, float(when)


def fit_name(name: str, room: int) -> str:
    """``name`` unchanged when ``room`` more bytes still fit in NAME_MAX; else its
    first bytes, ``~`` and a hash of the whole name (distinct names stay distinct)."""
    raw = os.fsencode(name)
    if len(raw) + room <= NAME_MAX:
        return name
    import hashlib  # only for over-long names: listings do not pay its import

    digest = hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]
    keep = NAME_MAX - room - len(digest) - 1
    return os.fsdecode(raw[:keep]) + "~" + digest


# Room kept after the name for ".<stamp>" and a "-n" counter.
_STAMP_ROOM = 1 + len("20260101T000000Z") + 8


def quarantine_target(quarantine_dir: Path, name: str, now: float | None = None) -> Path:
    """A free ``<name>.<stamp>`` path (``-2``, ``-3``... when the second is taken);
    ``now``: the moment the stamp records (the start of the entry's last check)."""
    base = f"{fit_name(name, _STAMP_ROOM)}.{stamp(now)}"
    candidate = quarantine_dir / base
    n = 2
    while os.path.lexists(candidate):
        candidate = quarantine_dir / f"{base}-{n}"
        n += 1
    return candidate


def list_quarantine(quarantine_dir: Path) -> list[QuarantinedEntry]:
    """Our entries in the quarantine folder, oldest first. Unknown names are ignored."""
    try:
        names = os.listdir(quarantine_dir)
    except OSError:
        return []
    found = []
    for file_name in names:
        parsed = parse_name(file_name)
        if parsed is None:
            continue
        name, when = parsed
        found.append(QuarantinedEntry(os.path.join(os.fspath(quarantine_dir), file_name), name, when))
    found.sort(key=lambda q: (q.quarantined_at, q.file_name))
    return found


class RestoreError(Exception):
    """One clear line: why an entry could not be put back."""


def find_quarantined(quarantine_dir: Path, wanted: str) -> QuarantinedEntry:
    """``wanted`` is a quarantined file name (``x.20260101T000000Z``) or an original
    name (``x``: its newest quarantine). Unknown or ambiguous -> RestoreError."""
    entries = list_quarantine(quarantine_dir)
    exact = [q for q in entries if q.file_name == wanted]
    if exact:
        return exact[0]
    # An over-long name was shortened on its way in: its shortened form is asked for.
    fitted = fit_name(wanted, _STAMP_ROOM)
    by_name = [q for q in entries if q.name in (wanted, fitted)]
    if by_name:
        return by_name[-1]
    if not entries:
        raise RestoreError(f"nothing is in quarantine ({quarantine_dir})")
    raise RestoreError(f"no quarantined entry named {wanted!r} (see 'hermes-tui scratch' for the list)")


def restore_entry(entry: QuarantinedEntry, scratch_dir: Path) -> Path:
    """Move a quarantined entry back to ``scratch_dir/<name>``; never replaces."""
    target = scratch_dir / entry.name
    try:
        rename_noreplace(entry.path, target)
    except FileExistsError:
        raise RestoreError(
            f"{target} exists already; move it away first (the quarantined copy stays at {entry.path})"
        ) from None
    except OSError as exc:
        raise RestoreError(f"cannot restore {entry.path!r}: {exc.strerror or exc}") from None
    return target
