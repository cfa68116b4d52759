"""Executing a prune plan: signals, re-validation, delete or quarantine, audit.

Per candidate, in plan order:
1. keep rules again (a marker or a lock may have appeared since the plan);
2. collect linked git worktrees (before the re-check, so a rescued entry's stale
   registrations are still pruned);
3. re-validate the activity with the plan's cutoff; the same walk measures the size,
   so nothing runs between the re-check and the delete;
4. rename into quarantine, or delete (``rmtree`` / ``unlink``);
5. a delete is confirmed with an explicit ``lstat``: only FileNotFoundError proves
   absence (residue = "could not fully remove", any other error = "could not
   confirm removal"; neither is counted).

Processes are judged again with a fresh /proc scan: one that appeared since the plan
and keeps its entry drops the entry from this pass. A scan that fails deletes
nothing. A second pass of the same home running at the same time is refused by a
non-blocking lock (it logs one line and does nothing).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat as st
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import identity
from engine.scratch.activity import scan_activity
from engine.scratch.audit import AuditLog, open_audit
from engine.scratch.keep import check_failed, static_keep_reason
from engine.scratch.ownership import JudgedProcess, judge, resolve_owners, victims
from engine.scratch.plan import Candidate, ExpiringEntry, PrunePlan
from engine.scratch.procscan import ProcScanError, scan_processes
from engine.scratch.quarantine import (
    QuarantinedEntry,
    RestoreError,
    quarantine_target,
    rename_noreplace,
    restore_entry,
)
from engine.scratch.target import PruneOptions, PruneTarget
from engine.scratch.worktrees import linked_worktree_repos, prune_worktrees

# progress(done, total, bytes_freed, current path or "")
Progress = Callable[[int, int, int, str], None]


class PruneBusy(Exception):
    """Another pass of the same home holds the prune lock."""


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
        from engine.fsutil import human_bytes

        n = self.removed_count
        parts = [f"{n} entr{'y' if n == 1 else 'ies'} pruned, {human_bytes(self.bytes_freed)} freed"]
        if self.quarantined:
            parts.append(f"{len(self.quarantined)} in quarantine" + (f" ({restore_hint})" if restore_hint else ""))
        terms = sum(1 for s in self.signalled if s.signal == "SIGTERM")
        if terms:
            parts.append(f"{terms} process(es) signalled")
        rescued = [k for k in self.kept if k.reason == "touched since selection"]
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


# --------------------------------------------------------------------------------------
# The pass lock
# --------------------------------------------------------------------------------------


class PassLock:
    """A non-blocking flock on ``<home>/cache/.scratch-prune.lock``."""

    def __init__(self, target: PruneTarget):
        self.path = target.lock_file
        self.target = target
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.target.home.ensure_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> PassLock:
        if not self.acquire():
            raise PruneBusy("another prune of this home is running; try again when it ends")
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# --------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------


@dataclass
class _Run:
    target: PruneTarget
    plan: PrunePlan
    options: PruneOptions
    audit: AuditLog
    progress: Progress | None
    removed: list[RemovedEntry] = field(default_factory=list)
    quarantined: list[QuarantineMove] = field(default_factory=list)
    kept: list[KeptRecord] = field(default_factory=list)
    signalled: list[SignalRecord] = field(default_factory=list)
    restored: list[RestoredRecord] = field(default_factory=list)
    expired: list[RemovedEntry] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    repos: set[str] = field(default_factory=set)

    def keep(self, path: str, reason: str, log: bool = True) -> None:
        self.kept.append(KeptRecord(path, reason))
        if log:
            self.audit.kept(path, reason)

    def result(self, process_error: str | None = None) -> PruneResult:
        return PruneResult(
            dry_run=False,
            removed=tuple(self.removed),
            quarantined=tuple(self.quarantined),
            kept=tuple(self.kept),
            signalled=tuple(self.signalled),
            restored=tuple(self.restored),
            expired=tuple(self.expired),
            failures=tuple(self.failures),
            process_error=process_error,
        )


def execute_plan(
    target: PruneTarget,
    plan: PrunePlan,
    options: PruneOptions,
    progress: Progress | None = None,
) -> PruneResult:
    """Carry out ``plan``. Raises PruneBusy when another pass holds the lock (after
    logging it). Any unexpected error is logged as the pass's one failing line."""
    lock = PassLock(target)
    with open_audit(target.log_file, target.home.ensure_dir) as audit:
        if not lock.acquire():
            audit.skipped_busy()
            raise PruneBusy("another prune of this home is running; try again when it ends")
        try:
            return _execute(_Run(target, plan, options, audit, progress))
        except Exception as exc:
            audit.pass_failed(f"{type(exc).__name__}: {exc}")
            exc.audit_logged = True  # type: ignore[attr-defined]
            raise
        finally:
            lock.release()


def _execute(run: _Run) -> PruneResult:
    plan = run.plan
    for k in plan.kept:
        if k.state in ("kept", "unknown"):  # keep rules and failed scans get a line; activity does not
            run.audit.kept(k.path, k.reason)
        run.kept.append(KeptRecord(k.path, k.reason))
    if plan.process_error:
        run.audit.process_check_failed(plan.process_error)
        return run.result(plan.process_error)
    try:
        snapshot = scan_processes([os.fspath(run.target.scratch_dir), os.fspath(run.target.quarantine_dir)])
        judged = judge(snapshot, run.target, resolve_owners(run.options))
    except ProcScanError as exc:
        run.audit.process_check_failed(str(exc))
        return run.result(str(exc))
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        run.audit.process_check_failed(why)
        return run.result(why)

    candidates = _drop_newly_kept(run, judged)
    candidates, targets = _only_what_was_planned(run, candidates, victims(judged, {c.name for c in candidates}))
    _signal(run, targets)
    total = len(candidates) + len(plan.expiring)
    freed = 0
    for i, cand in enumerate(candidates):
        if run.progress:
            run.progress(i, total, freed, cand.path)
        freed += _prune_one(run, cand)
    for j, exp in enumerate(plan.expiring):
        if run.progress:
            run.progress(len(candidates) + j, total, freed, exp.path)
        freed += _expire_one(run, exp, judged)
    if run.progress:
        run.progress(total, total, freed, "")
    prune_worktrees(run.repos, on_error=run.audit.worktree_prune_failed)
    return run.result()


def _drop_newly_kept(run: _Run, judged: list[JudgedProcess]) -> list[Candidate]:
    keepers: dict[str, JudgedProcess] = {}
    for j in judged:
        if j.keeps and j.area == "scratch" and j.entry is not None:
            keepers.setdefault(j.entry, j)
    out = []
    for c in run.plan.candidates:
        if c.name in keepers:
            run.keep(c.path, keepers[c.name].keep_reason())
        else:
            out.append(c)
    return out


def _only_what_was_planned(
    run: _Run, candidates: list[Candidate], targets: list[tuple[JudgedProcess, str]]
) -> tuple[list[Candidate], list[tuple[JudgedProcess, str]]]:
    """An approved plan signals only the processes it showed. A process that started
    working inside a candidate since the plan keeps that entry (someone is there
    now); a new orphan waits for the next pass."""
    planned = {(s.pid, s.fingerprint) for s in run.plan.signals}
    keep_names: dict[str, JudgedProcess] = {}
    allowed = []
    for j, why in targets:
        if (j.proc.pid, j.proc.fingerprint) in planned:
            allowed.append((j, why))
        elif j.area == "scratch" and j.entry is not None and not j.gone_cwd:
            keep_names.setdefault(j.entry, j)
    if not keep_names:
        return candidates, allowed
    out = []
    for c in candidates:
        j = keep_names.get(c.name)
        if j is None:
            out.append(c)
        else:
            run.keep(c.path, f"process pid={j.proc.pid} ({j.proc.name}) started working inside after the plan")
    doomed = {c.name for c in out}
    allowed = [(j, why) for j, why in allowed if j.gone_cwd or j.entry in doomed]
    return out, allowed


# How long a KILLed process may take to be gone before it is reported as a survivor.
KILL_SETTLE_SECONDS = 1.0


def _signal(run: _Run, targets: list[tuple[JudgedProcess, str]]) -> None:
    """TERM every target, wait the grace period, KILL the ones still running.
    Every signal goes through identity.send_signal (verified, pidfd)."""
    termed: dict[int, JudgedProcess] = {}
    for j, _why in targets:
        p = j.proc
        res = identity.send_signal(p.pid, p.fingerprint, signal.SIGTERM)
        if res.sent:
            termed[p.pid] = j
            run.signalled.append(SignalRecord(p.pid, p.name, p.cwd, "SIGTERM"))
            run.audit.sent_term(p.pid, p.name, p.cwd)
        elif res.outcome is not identity.SignalOutcome.GONE:
            run.audit.signal_failed(p.pid, p.name, f"{res.outcome.value}: {res.detail}")
    if not termed:
        return
    deadline = time.monotonic() + run.options.kill_grace_seconds
    living = dict(termed)
    while living and time.monotonic() < deadline:
        time.sleep(0.05)
        living = {pid: j for pid, j in living.items() if identity.is_alive(pid, j.proc.fingerprint)}
    killed: dict[int, JudgedProcess] = {}
    for pid, j in sorted(living.items()):
        if not identity.is_alive(pid, j.proc.fingerprint):  # exited, or only a zombie now
            continue
        res = identity.send_signal(pid, j.proc.fingerprint, signal.SIGKILL)
        if res.sent:
            killed[pid] = j
            run.signalled.append(SignalRecord(pid, j.proc.name, j.proc.cwd, "SIGKILL"))
            run.audit.sent_kill(pid)
    # Survivors are reported, never hidden (a process stuck in the kernel ignores KILL).
    deadline = time.monotonic() + KILL_SETTLE_SECONDS
    while killed and time.monotonic() < deadline:
        time.sleep(0.02)
        killed = {pid: j for pid, j in killed.items() if identity.is_alive(pid, j.proc.fingerprint)}
    for pid in sorted(killed):
        run.audit.survivor(pid)
        run.failures.append(f"pid {pid} still running after KILL")


_rm_ok: bool | None = None


def _rm_available() -> bool:
    """GNU ``rm`` with ``--one-file-system`` (checked once)."""
    global _rm_ok
    if _rm_ok is None:
        try:
            probe = subprocess.run(["rm", "-rf", "--one-file-system", "--", "/nonexistent/hermes-probe"],
                                   stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
            _rm_ok = probe.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _rm_ok = False
    return _rm_ok


def delete_tree(path: str) -> None:
    """Remove a directory tree, errors ignored (the lstat afterwards is the verdict).

    ``rm -rf --one-file-system`` where available: it never follows symlinks, never
    descends into another filesystem mounted inside the entry (a bind mount of real
    data must not be emptied through scratch; it is left as residue and reported),
    and unlinks in inode order, which on a disk is markedly faster than a Python
    walk. Elsewhere ``shutil.rmtree``.
    """
    if _rm_available():
        try:
            subprocess.run(["rm", "-rf", "--one-file-system", "--", path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            return
        except (OSError, subprocess.SubprocessError):
            pass
    shutil.rmtree(path, ignore_errors=True)


def _remove(run: _Run, path: str) -> bool:
    """Delete ``path`` and prove it is gone. True only when lstat says ENOENT."""
    try:
        if st.S_ISDIR(os.lstat(path).st_mode):
            delete_tree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        run.audit.could_not_remove(path, exc)
        run.failures.append(f"could not remove {path!r}: {exc}")
        return False
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        run.audit.could_not_confirm(path)
        run.failures.append(f"could not confirm removal of {path!r}")
        return False
    run.audit.could_not_fully_remove(path)
    run.failures.append(f"could not fully remove {path!r}")
    return False


def _prune_one(run: _Run, cand: Candidate) -> int:
    path = cand.path
    reason = static_keep_reason(path)
    if check_failed(reason):  # the entry could not be read: the same honest record as a failed re-scan
        run.audit.kept_rescan_failed(path)
        run.kept.append(KeptRecord(path, f"activity re-scan failed, left untouched ({reason})"))
        return 0
    if reason is not None:
        run.keep(path, reason)
        return 0
    try:
        if st.S_ISDIR(os.lstat(path).st_mode):
            run.repos |= linked_worktree_repos(path)
    except OSError:
        pass  # the re-check below decides what this means
    act = scan_activity(path, run.plan.cutoff)
    if not act.idle:
        try:
            os.lstat(path)
            gone = False
        except FileNotFoundError:
            gone = True
        except OSError:
            gone = False
        if gone:
            run.audit.vanished(path)
        elif act.touched:
            run.audit.rescued(path)
            run.kept.append(KeptRecord(path, "touched since selection"))
        else:
            run.audit.kept_rescan_failed(path)
            run.kept.append(KeptRecord(path, "activity re-scan failed, left untouched"))
        return 0
    size = act.size_bytes or 0
    # Nothing between the re-check above and the delete/rename below.
    if run.options.quarantine_hours > 0:
        return _quarantine(run, path, cand.name, size)
    if not _remove(run, path):
        return 0
    run.audit.removed(path, size)
    run.removed.append(RemovedEntry(path, size))
    return size


def _quarantine(run: _Run, path: str, name: str, size: int) -> int:
    qdir = run.target.quarantine_dir
    try:
        run.target.home.ensure_dir(qdir)
        dest = quarantine_target(qdir, name)
        rename_noreplace(path, dest)
    except Exception as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        if getattr(exc, "errno", None) == errno.EXDEV:
            why += (" (the quarantine folder is on another filesystem than the scratch folder; "
                    "set scratch.quarantine_hours: 0 to delete instead)")
        run.audit.could_not_quarantine(path, why)
        run.failures.append(f"could not quarantine {path!r}: {why}")
        return 0
    run.audit.quarantined(path, os.fspath(dest), size)
    run.quarantined.append(QuarantineMove(path, os.fspath(dest), size))
    return size


def _expire_one(run: _Run, exp: ExpiringEntry, judged: list[JudgedProcess]) -> int:
    """Delete a quarantined entry whose hours are over, unless it was written to since
    it was quarantined or a live process still works inside: then restore it."""
    base = os.path.basename(exp.path)
    inside = [j for j in judged if j.area == "quarantine" and j.entry == base
              and identity.is_alive(j.proc.pid, j.proc.fingerprint)]
    act = scan_activity(exp.path, exp.quarantined_at, count_top=False)  # the move itself is no write
    if act.failed:
        try:
            os.lstat(exp.path)
        except FileNotFoundError:
            return 0  # restored or removed by someone else
        except OSError:
            pass
        run.audit.kept_rescan_failed(exp.path)
        run.kept.append(KeptRecord(exp.path, "activity re-scan failed, left in quarantine"))
        return 0
    if inside or act.touched:
        why = (f"a process pid={inside[0].proc.pid} ({inside[0].proc.name}) still works inside"
               if inside else "written to while in quarantine")
        q = QuarantinedEntry(exp.path, exp.name, exp.quarantined_at)
        try:
            dest = restore_entry(q, run.target.scratch_dir)
        except RestoreError as exc:
            run.keep(exp.path, f"{why}, and it cannot be restored: {exc}")
            return 0
        run.audit.restored(exp.path, os.fspath(dest), why)
        run.restored.append(RestoredRecord(os.fspath(dest), exp.path, why))
        return 0
    size = act.size_bytes or 0
    if not _remove(run, exp.path):
        return 0
    run.audit.removed(exp.path, size)
    run.expired.append(RemovedEntry(exp.path, size))
    return size


def prune_pass(
    target: PruneTarget,
    options: PruneOptions,
    progress: Progress | None = None,
) -> PruneResult:
    """Plan and execute in one go (the automatic pass and ``prune --yes``)."""
    from engine.scratch.plan import plan_prune

    plan = plan_prune(target, options)
    return execute_plan(target, plan, options, progress)


def restore(target: PruneTarget, wanted: str) -> RestoredRecord:
    """``hermes-tui scratch restore NAME``: put a quarantined entry back (logged)."""
    from engine.scratch.quarantine import find_quarantined

    q = find_quarantined(target.quarantine_dir, wanted)
    lock = PassLock(target)
    if not lock.acquire():
        raise RestoreError("a prune of this home is running; try again when it ends")
    try:
        dest = restore_entry(q, target.scratch_dir)
        # Putting it back is activity: without this the next pass would take it again.
        try:
            os.utime(dest, follow_symlinks=False)
        except OSError:
            pass
        with open_audit(target.log_file, target.home.ensure_dir) as audit:
            audit.restored(q.path, os.fspath(dest), "by request")
        return RestoredRecord(os.fspath(dest), q.path, "by request")
    finally:
        lock.release()
