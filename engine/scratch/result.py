"""What a prune pass reports: the result types of :mod:`engine.scratch.execute` and its errors.

A pass (or a dry run, :func:`result_of_plan`) ends in one :class:`PruneResult`: the
entries that went (deleted, or moved to quarantine), those kept and why, the processes
signalled, what came back from quarantine or expired from it, and what failed. The CLI
prints its ``summary()`` or ``to_json()``, the scratch pane toasts the summary, and the
prune log (:mod:`engine.scratch.audit`) holds the same facts line by line.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.scratch.plan import PrunePlan

# The kept reason of an entry put back because it was written to after the plan.
RESCUED_REASON = "touched since selection"


class PruneBusy(Exception):
    """Another pass of the same home holds the prune lock."""


class PassFailed(Exception):
    """The pass stopped on an unexpected error (``error``, also its ``__cause__``) and
    its one "pass failed" line is already in the audit log: the caller logs nothing
    more. ``str()`` is the error's own text."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class RemovedEntry:
    path: str
    size_bytes: int


@dataclass(frozen=True)
class QuarantineMove:
    path: str
    quarantine_path: str
    size_bytes: int


@dataclass(frozen=True)
class KeptRecord:
    path: str
    reason: str


@dataclass(frozen=True)
class SignalRecord:
    pid: int
    name: str
    cwd: str
    signal: str


@dataclass(frozen=True)
class RestoredRecord:
    path: str
    from_path: str
    reason: str


@dataclass(frozen=True)
class PruneResult:
    dry_run: bool
    removed: tuple[RemovedEntry, ...] = ()
    quarantined: tuple[QuarantineMove, ...] = ()
    kept: tuple[KeptRecord, ...] = ()
    signalled: tuple[SignalRecord, ...] = ()
    restored: tuple[RestoredRecord, ...] = ()
    expired: tuple[RemovedEntry, ...] = ()
    failures: tuple[str, ...] = ()
    process_error: str | None = None
    busy: bool = False
    stopped: bool = False  # a stop was asked for (Ctrl+C): the pass ended at a safe point

    @property
    def removed_count(self) -> int:
        """Entries that left the scratch folder (deleted or moved to quarantine)."""
        return len(self.removed) + len(self.quarantined)

    @property
    def bytes_freed(self) -> int:
        return sum(r.size_bytes for r in self.removed) + sum(q.size_bytes for q in self.quarantined)

    @property
    def ok(self) -> bool:
        return not (self.failures or self.process_error or self.busy)

    def summary(self, restore_hint: str = "") -> str:
        """One line for a person: what went, what was signalled, rescued, restored or failed.
        The CLI prints it and the scratch pane toasts it (``restore_hint``: how to undo)."""
        from engine.text import human_bytes

        n = self.removed_count
        parts = [f"{n} entr{'y' if n == 1 else 'ies'} pruned, {human_bytes(self.bytes_freed)} freed"]
        if self.quarantined:
            parts.append(f"{len(self.quarantined)} in quarantine" + (f" ({restore_hint})" if restore_hint else ""))
        terms = sum(1 for s in self.signalled if s.signal == "SIGTERM")
        if terms:
            parts.append(f"{terms} process(es) signalled")
        rescued = [k for k in self.kept if k.reason.startswith(RESCUED_REASON)]
        if rescued:
            parts.append(f"{len(rescued)} rescued (written to since the plan)")
        if self.restored:
            parts.append(f"{len(self.restored)} restored from quarantine")
        if self.expired:
            parts.append(f"{len(self.expired)} expired from quarantine")
        if self.failures:
            parts.append(f"{len(self.failures)} failed (see the prune log)")
        if self.process_error:
            parts.append("process check failed: nothing deleted")
        if self.stopped:
            parts.append("stopped on request: the entries not reached are as they were")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "removed": [{"path": r.path, "size_bytes": r.size_bytes} for r in self.removed],
            "quarantined": [{"path": q.path, "quarantine_path": q.quarantine_path, "size_bytes": q.size_bytes}
                            for q in self.quarantined],
            "kept": [{"path": k.path, "reason": k.reason} for k in self.kept],
            "signalled": [{"pid": s.pid, "name": s.name, "cwd": s.cwd, "signal": s.signal}
                          for s in self.signalled],
            "restored": [{"path": r.path, "from": r.from_path, "reason": r.reason} for r in self.restored],
            "expired": [{"path": r.path, "size_bytes": r.size_bytes} for r in self.expired],
            "failures": list(self.failures),
            "process_error": self.process_error,
            "busy": self.busy,
            "stopped": self.stopped,
            "removed_count": self.removed_count,
            "bytes_freed": self.bytes_freed,
        }


def result_of_plan(plan: PrunePlan) -> PruneResult:
    """What a dry run reports: the plan in the result's shape."""
    gone = tuple(RemovedEntry(c.path, c.size_bytes) for c in plan.candidates)
    return PruneResult(
        dry_run=True,
        removed=() if plan.quarantines else gone,
        quarantined=tuple(QuarantineMove(c.path, "", c.size_bytes) for c in plan.candidates)
        if plan.quarantines else (),
        kept=tuple(KeptRecord(k.path, k.reason) for k in plan.kept),
        signalled=tuple(SignalRecord(s.pid, s.name, s.cwd, s.signal) for s in plan.signals),
        expired=tuple(RemovedEntry(e.path, e.size_bytes) for e in plan.expiring),
        process_error=plan.process_error,
    )
