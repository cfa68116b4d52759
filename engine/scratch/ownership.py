"""Who a process in the scratch tree belongs to, and therefore whether it keeps its
entry (and is spared) or may be signalled.

- this prune's own lineage (pid + fingerprint pairs): keeps its entry, never signalled;
- a live registered process (process sessions, kanban workers) or a descendant of
  one, matched by fingerprint: keeps its entry, never signalled;
- another user's process (seen only when we run as root): keeps its entry, never
  signalled (not ours);
- when the lineage or the registry is unknown: every process counts as keeping
  (fail closed: we cannot tell ours from theirs, so we signal nobody);
- anything else is "other": signalled only if its entry goes this pass. A process
  whose cwd was deleted counts as an orphan only when that cwd lay in an entry this
  pass removes or in an entry that no longer exists at all; a gone ``build/`` inside
  an entry that stays (active, kept, the scratch root itself) spares its process
  (``rm -rf build && mkdir build`` must not get the running compiler killed).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass

from engine import identity
from engine.scratch.procscan import ProcSnapshot, ScratchProcess, is_under
from engine.scratch.registered import RegistryUnreadable
from engine.scratch.target import PruneOptions, PruneTarget
from engine.text import escape_text


class Role(enum.StrEnum):
    LINEAGE = "lineage"
    REGISTERED = "registered"
    FOREIGN = "foreign"  # another user's: keeps its entry, never signalled
    UNKNOWN = "unknown"  # fail closed: treated as keeping
    OTHER = "other"


@dataclass(frozen=True)
class JudgedProcess:
    proc: ScratchProcess
    area: str  # "scratch" or "quarantine"
    entry: str | None  # top-level name inside the area (None: the area root itself)
    role: Role
    label: str = ""  # registry label (session id) or the fail-closed reason
    root: str = ""  # the area's real path (scratch or quarantine folder)

    @property
    def keeps(self) -> bool:
        return self.role is not Role.OTHER

    @property
    def gone_cwd(self) -> bool:
        """Its cwd was deleted, or no longer exists (an orphan of an earlier prune)."""
        return self.proc.cwd_deleted or not os.path.lexists(self.proc.cwd)

    @property
    def entry_gone(self) -> bool:
        """Its top-level entry no longer exists at all (checked now, on the filesystem).
        False for the area root itself, and when the entry cannot be checked."""
        if self.entry is None or not self.root:
            return False
        try:
            os.lstat(os.path.join(self.root, self.entry))
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False

    def orphan_in(self, doomed: set[str]) -> bool:
        """A gone cwd that may be reaped: in an entry going this pass, or in one gone."""
        if not self.gone_cwd or self.entry is None:
            return False
        return (self.area == "scratch" and self.entry in doomed) or self.entry_gone

    def keep_reason(self) -> str:
        p = self.proc
        who = f"pid={p.pid} ({escape_text(p.name)})"
        if self.role is Role.LINEAGE:
            return f"this prune's own lineage {who} works inside"
        if self.role is Role.REGISTERED:
            return f"live process {who} of {self.label} works inside"  # whose: the label says
        if self.role is Role.FOREIGN:
            return f"a process of another user {who} works inside"
        return f"a live process {who} works inside and {self.label}, so nothing is signalled"


@dataclass(frozen=True)
class Owners:
    """What the pass knows about ownership, resolved once per pass."""

    lineage: frozenset[tuple[int, str]]
    registered: dict[tuple[int, str], str]  # (pid, fp) -> label
    unknown_reason: str | None  # set: every process is treated as keeping


def resolve_owners(options: PruneOptions) -> Owners:
    reasons = []
    pairs: set[tuple[int, str]] = set()
    if options.lineage_error:
        reasons.append(f"the launcher's lineage is unknown ({options.lineage_error})")
    if options.lineage:
        pairs.update(options.lineage)
    try:
        pairs.update(identity.lineage())
    except identity.LineageError as exc:
        reasons.append(f"this prune's lineage is unknown ({exc})")
    registered: dict[tuple[int, str], str] = {}
    if options.registered is not None:
        try:
            for pid, fp, label in options.registered():
                if identity.is_verifiable(fp):
                    registered[(int(pid), fp)] = label
        except RegistryUnreadable as exc:
            reasons.append(str(exc))
        except Exception as exc:  # a provider bug is still "cannot read": fail closed
            reasons.append(f"cannot read the process registry: {exc}")
    return Owners(frozenset(pairs), registered, "; ".join(reasons) or None)


def _locate(path: str, root: str) -> str | None:
    if path == root:
        return None
    rel = path[len(root.rstrip(os.sep)) + 1:]
    return rel.split(os.sep, 1)[0] or None


def judge(snapshot: ProcSnapshot, target: PruneTarget, owners: Owners) -> list[JudgedProcess]:
    scratch_root = os.path.realpath(target.scratch_dir)
    quarantine_root = os.path.realpath(target.quarantine_dir)
    judged = []
    for p in snapshot.inside:
        if is_under(p.cwd, scratch_root):
            area, entry = "scratch", _locate(p.cwd, scratch_root)
        elif is_under(p.cwd, quarantine_root):
            area, entry = "quarantine", _locate(p.cwd, quarantine_root)
        else:
            continue
        key = (p.pid, p.fingerprint)
        if p.foreign:
            role, label = Role.FOREIGN, ""
        elif key in owners.lineage:
            role, label = Role.LINEAGE, ""
        elif owners.unknown_reason:
            role, label = Role.UNKNOWN, owners.unknown_reason
        elif key in owners.registered:
            role, label = Role.REGISTERED, owners.registered[key]
        else:
            role, label = Role.OTHER, ""
            for anc in snapshot.ancestors(p.pid):
                if anc in owners.registered:
                    role, label = Role.REGISTERED, owners.registered[anc]
                    break
        root = scratch_root if area == "scratch" else quarantine_root
        judged.append(JudgedProcess(p, area, entry, role, label, root))
    return judged


def judge_snapshot(snapshot: ProcSnapshot, target: PruneTarget, options: PruneOptions) -> list[JudgedProcess]:
    """``judge`` with the owners resolved only when a process works inside at all:
    with nobody inside there is nobody to judge, and the registries (importing the
    process engine, reading every session's files) and the lineage are not read."""
    if not snapshot.inside:
        return []
    return judge(snapshot, target, resolve_owners(options))


def victims(judged: Iterable[JudgedProcess], doomed: set[str]) -> list[tuple[JudgedProcess, str]]:
    """(process, why) for every process to TERM: not keeping, and its scratch entry is
    doomed, or its cwd is gone together with its entry (see the module doc). A cwd
    at the scratch root itself is spared."""
    out = []
    for j in judged:
        if j.keeps:
            continue
        if j.gone_cwd:
            if j.orphan_in(doomed):
                out.append((j, "its cwd no longer exists"))
        elif j.area == "scratch" and j.entry is not None and j.entry in doomed:
            out.append((j, f"its cwd is inside idle entry {j.entry!r}"))
    return out
