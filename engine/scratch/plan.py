"""The prune plan: what a pass would do, computed without changing anything.

A dry run *is* the plan. The approval modal and ``prune`` on a terminal show it;
executing it re-validates every candidate right before it goes (see execute.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from engine.fsutil import tree_size
from engine.scratch.entries import EntryState, Survey, survey_scratch
from engine.scratch.ownership import victims
from engine.scratch.target import PruneOptions, PruneTarget
from engine.text import human_bytes, human_duration


@dataclass(frozen=True)
class Candidate:
    name: str
    path: str
    idle_seconds: float | None
    size_bytes: int
    git_files: tuple[str, ...] = ()  # linked worktrees' ".git" files the plan's walk found in it
    top_id: tuple[int, int] | None = None  # (st_dev, st_ino) of its top as the plan walked it


@dataclass(frozen=True)
class KeptEntry:
    name: str
    path: str
    state: EntryState
    reason: str


@dataclass(frozen=True)
class PlannedSignal:
    pid: int
    fingerprint: str
    name: str
    cwd: str
    why: str
    signal: str = "SIGTERM"  # then SIGKILL after the grace period if still running


@dataclass(frozen=True)
class ExpiringEntry:
    """A quarantined entry whose hours are over: deleted by the pass unless written to."""

    path: str
    name: str
    quarantined_at: float
    size_bytes: int


@dataclass(frozen=True)
class PrunePlan:
    scratch_dir: str
    created_at: float
    idle_hours: float
    cutoff: float
    quarantine_hours: float
    candidates: tuple[Candidate, ...]
    kept: tuple[KeptEntry, ...]
    signals: tuple[PlannedSignal, ...]
    expiring: tuple[ExpiringEntry, ...]
    process_error: str | None
    walked_at: float = 0.0  # when the plan's walks began (Survey.walked_at)
    arrival_cutoff: float | None = None  # Survey.arrival_cutoff

    @property
    def total_bytes(self) -> int:
        return sum(c.size_bytes for c in self.candidates)

    @property
    def quarantines(self) -> bool:
        return self.quarantine_hours > 0

    @property
    def is_empty(self) -> bool:
        return not (self.candidates or self.signals or self.expiring)


def _kept_reason(report) -> str:
    if report.kept_reason:
        return report.kept_reason
    if report.state is EntryState.ACTIVE:
        if report.arrived_seconds is not None:
            return f"active: arrived {human_duration(report.arrived_seconds)} ago"
        return "active: written to within the idle window"
    return report.state


def plan_from_survey(survey: Survey, options: PruneOptions) -> PrunePlan:
    candidates = []
    kept = []
    for e in survey.entries:
        if e.state is EntryState.IDLE:
            candidates.append(Candidate(e.name, e.path, e.idle_seconds, e.size_bytes or 0, e.activity.git_files,
                                        e.activity.top_id))
        else:
            kept.append(KeptEntry(e.name, e.path, e.state, _kept_reason(e)))
    signals = []
    if survey.process_error is None:
        doomed = {c.name for c in candidates}
        for j, why in victims(survey.processes, doomed):
            p = j.proc
            signals.append(PlannedSignal(p.pid, p.fingerprint, p.name, p.cwd, why))
    expiring = []
    for q in survey.quarantine:  # with quarantine_hours 0, leftovers expire at once
        if q.expires_at(options.quarantine_hours) <= survey.now:
            expiring.append(ExpiringEntry(q.path, q.name, q.quarantined_at, tree_size(q.path)))
    return PrunePlan(
        scratch_dir=str(survey.target.scratch_dir),
        created_at=survey.now,
        idle_hours=survey.idle_hours,
        cutoff=survey.cutoff,
        quarantine_hours=options.quarantine_hours,
        candidates=tuple(candidates) if survey.process_error is None else (),
        kept=tuple(kept),
        signals=tuple(signals),
        expiring=tuple(expiring) if survey.process_error is None else (),
        process_error=survey.process_error,
        walked_at=survey.walked_at,
        arrival_cutoff=survey.arrival_cutoff,
    )


def plan_prune(target: PruneTarget, options: PruneOptions, *, now: float | None = None,
               stop: threading.Event | None = None) -> PrunePlan:
    """Survey the scratch folder and say what a pass would do. Changes nothing. ``stop``
    set ends the walks (the entries not walked stay, unknown): a plan for a caller going away."""
    return plan_from_survey(survey_scratch(target, options, now=time.time() if now is None else now, stop=stop),
                            options)


def describe_plan(plan: PrunePlan, limit: int | None = None, redact: bool = True) -> list[str]:
    """The plan as plain lines: what goes (and how many bytes), which processes get
    which signal, what expires from quarantine, what stays and why. Shared by the
    CLI prompt and the approval modal, so both show exactly the same plan. ``limit``
    (the modal's) lists at most that many items of each part, then says how many more.
    Outside text (names, paths, reasons) has its secrets masked (``redact``: the
    setting ``processes.redact``) and its control characters escaped."""
    from engine.processes.redact import shown

    def outside(text: str) -> str:
        return shown(text, redact)

    def listed(items, line):
        shown = list(items if limit is None else items[:limit])
        out = [line(item) for item in shown]
        if len(items) > len(shown):
            out.append(f"  … and {len(items) - len(shown):,} more (hermes-tui prune --dry-run lists every one)")
        return out

    verb = f"to quarantine for {plan.quarantine_hours:g}h" if plan.quarantines else "to delete"
    n = len(plan.candidates)
    scratch = plan.scratch_dir.rstrip("/") + "/"

    def short(path: str) -> str:  # entries are named relative to the scratch dir the header names
        return outside(path[len(scratch):] if path.startswith(scratch) else path)

    lines = [f"Scratch {outside(plan.scratch_dir)}, idle window {plan.idle_hours:g}h.",
             f"{n} entr{'y' if n == 1 else 'ies'} {verb}, {human_bytes(plan.total_bytes)}:"]
    lines += listed(plan.candidates,
                    lambda c: f"  - {short(c.path)}  idle {human_duration(c.idle_seconds)}, {human_bytes(c.size_bytes)}")
    if plan.signals:
        lines.append("Processes to signal (SIGTERM, then SIGKILL if still running after the grace period):")
        lines += listed(plan.signals,
                        lambda s: f"  - pid {s.pid} ({outside(s.name)}) cwd {short(s.cwd)}: {outside(s.why)}")
    if plan.expiring:
        lines.append("Quarantined entries whose hours are over (deleted unless written to since):")
        lines += listed(plan.expiring, lambda e: f"  - {outside(e.path)}  {human_bytes(e.size_bytes)}")
    if plan.kept:
        lines.append("Staying:")
        lines += listed(plan.kept, lambda k: f"  - {short(k.path)}: {outside(k.reason)}")
    if plan.process_error:
        lines.append(f"The process check failed ({outside(plan.process_error)}): nothing is deleted.")
    return lines
