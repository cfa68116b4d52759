"""Executing a prune plan: signals, re-validation, rename-verify-delete, audit.

Rules are checked against the state right before each action, and every action is
recorded *before* it is taken (a record that cannot be written stops the pass:
nothing unrecorded is ever done, see audit.AuditWriteError).

1. A fresh /proc scan: a process that appeared since the plan and keeps its entry
   drops the entry; a scan that fails deletes nothing.
2. The keep rules of every candidate again (marker, flock): an entry kept now is
   dropped.
3. The activity re-check walk of every remaining candidate (its start is the
   moment T), then the keep rules once more. An entry found written to, unreadable,
   gone or kept is dropped here, before any signal: no process of an entry that
   stays is ever signalled. A pass that carries out the plan it has just made
   (``just_planned``) re-walks only the entries it signals in; for the others the
   plan's walk is this check and T is the moment it began (see ``_recheck``).
4. Only now the planned processes of the entries still going (and orphans whose
   entry no longer exists, checked again) get TERM, then KILL after the grace
   period.
5. Per entry: the keep rules once more; then the entry is renamed
   (``renameat2(RENAME_NOREPLACE)``) to a name the pruner owns: its quarantine
   name (stamped T) or ``TRASH_PREFIX + name`` in the scratch folder.
6. The moved tree is checked for any mtime at or after T (a write that landed
   while the re-check walked, or while the processes were signalled); one found
   puts the entry back and records it ``rescued``. A verify walk of the whole moved
   tree does it in both modes, before anything of it goes (with delete, the trees
   after the one being deleted are verified meanwhile, activity.scan_ahead). With
   quarantine the move is then recorded (``quarantined``). With delete a ``removing`` record is written
   and the delete walk checks once more (delete.py: ``delete_unless_written`` checks
   every inode before its directory's files go, stops at a write that landed after
   the verify walk passed and the tree goes back, partial, saying how many older
   files had gone; by directory fds, so a tree deeper than PATH_MAX goes too; in this
   process, so a ``kill -9`` of the pass stops the delete with it). A delete is confirmed with an explicit ``lstat``: only
   FileNotFoundError proves absence.

A trash entry left by an interrupted pass is put back under its name by the next
pass (its removal may not have been verified). A second pass of the same home
running at the same time is refused by a non-blocking lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field

from engine import identity
from engine.scratch.activity import (
    Activity,
    TouchState,
    scan_activity,
    scan_ahead,
    scan_many,
    walk_start_moment,
)
from engine.scratch.audit import AuditLog, AuditWriteError, escape_text, open_audit
from engine.scratch.delete import DeleteStop, WatchedDelete, delete_tree, delete_unless_written
from engine.scratch.entries import EntryState
from engine.scratch.keep import check_failed, static_keep_reason
from engine.scratch.mounts import MountTable, mount_reason
from engine.scratch.ownership import JudgedProcess, judge_snapshot, victims
from engine.scratch.plan import Candidate, ExpiringEntry, PrunePlan
from engine.scratch.procscan import ProcScanError, scan_processes
from engine.scratch.quarantine import (
    QuarantinedEntry,
    RestoreError,
    fit_name,
    quarantine_target,
    rename_noreplace,
    restore_entry,
)
from engine.scratch.result import (
    RESCUED_REASON,
    KeptRecord,
    PassFailed,
    PruneBusy,
    PruneResult,
    QuarantineMove,
    RemovedEntry,
    RestoredRecord,
    SignalRecord,
)
from engine.scratch.target import TRASH_PREFIX, PruneOptions, PruneTarget
from engine.scratch.worktrees import prune_worktrees, repos_of_git_files

# progress(done, total, bytes_freed, current path or "")
Progress = Callable[[int, int, int, str], None]


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
    just_planned: bool = False
    should_stop: Callable[[], bool] | None = None
    stopped: bool = False
    removed: list[RemovedEntry] = field(default_factory=list)
    quarantined: list[QuarantineMove] = field(default_factory=list)
    kept: list[KeptRecord] = field(default_factory=list)
    signalled: list[SignalRecord] = field(default_factory=list)
    restored: list[RestoredRecord] = field(default_factory=list)
    expired: list[RemovedEntry] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    repos: set[str] = field(default_factory=set)
    mounts: MountTable = field(default_factory=MountTable)  # the pass's view of the mount table

    def keep(self, path: str, reason: str, log: bool = True) -> None:
        self.kept.append(KeptRecord(path, reason))
        if log:
            self.audit.kept(path, reason)

    def stop_here(self, where: str) -> bool:
        """True (once recorded) when a stop was asked for: the caller is at a safe point
        (nothing half-done) and takes no further step."""
        if self.stopped:
            return True
        if self.should_stop is None or not self.should_stop():
            return False
        self.stopped = True
        self.audit.stopped(where)
        return True

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
            stopped=self.stopped,
        )


def execute_plan(
    target: PruneTarget,
    plan: PrunePlan,
    options: PruneOptions,
    progress: Progress | None = None,
    *,
    just_planned: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> PruneResult:
    """Carry out ``plan``. ``should_stop`` (Ctrl+C in the CLI) is asked at every safe
    point: before any process is signalled, before each entry is moved, before each
    moved tree is deleted or recorded (the rest are put back), before each quarantine
    expiry; once it says yes the pass records ``pass stopped`` and returns what it did. Raises PruneBusy when another pass holds the lock (after
    logging it), AuditWriteError when a record could not be written (the action it
    described was not taken, and nothing after it). Any other unexpected error is
    logged as the pass's one failing line.

    ``just_planned``: the caller made ``plan`` right before this call and showed it to
    nobody (the automatic pass, ``prune --yes``), so no prompt lies between its walk
    and now; see ``_recheck`` for what that saves."""
    lock = PassLock(target)
    with open_audit(target.log_file, target.home.ensure_dir) as audit:
        if not lock.acquire():
            audit.skipped_busy()
            raise PruneBusy("another prune of this home is running; try again when it ends")
        try:
            with MountTable.read() as mounts:
                return _execute(_Run(target, plan, options, audit, progress, just_planned, should_stop,
                                     mounts=mounts))
        except AuditWriteError:
            raise
        except Exception as exc:
            try:
                audit.pass_failed(f"{type(exc).__name__}: {exc}")
            except AuditWriteError:
                pass  # its line could not be written: the error goes up as it is
            else:
                raise PassFailed(exc) from exc
            raise
        finally:
            lock.release()


def _execute(run: _Run) -> PruneResult:
    plan = run.plan
    for k in plan.kept:
        if k.state in (EntryState.KEPT, EntryState.UNKNOWN):  # keep rules and failed scans get a line; activity does not
            run.audit.kept(k.path, k.reason)
        run.kept.append(KeptRecord(k.path, k.reason))
    if plan.process_error:
        run.audit.process_check_failed(plan.process_error)
        return run.result(plan.process_error)
    _put_back_leftover_trash(run)
    try:
        snapshot = scan_processes([os.fspath(run.target.scratch_dir), os.fspath(run.target.quarantine_dir)])
        judged = judge_snapshot(snapshot, run.target, run.options)
    except ProcScanError as exc:
        run.audit.process_check_failed(str(exc))
        return run.result(str(exc))
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        run.audit.process_check_failed(why)
        return run.result(why)

    candidates = _drop_newly_kept(run, judged)
    candidates, targets = _only_what_was_planned(run, candidates, victims(judged, {c.name for c in candidates}))
    candidates = _drop_kept_by_rule(run, candidates)
    total = len(candidates) + len(plan.expiring)
    if run.progress and candidates:
        run.progress(0, total, 0, candidates[0].path)
    moment, idle = _recheck(run, candidates, {j.entry for j, _why in targets if j.area == "scratch"})
    if run.stop_here("before any process was signalled or entry moved"):
        return run.result()
    _signal(run, _still_targets(targets, {c.name for c, _act in idle}))
    freed = _prune_candidates(run, idle, moment, total)
    for j, exp in enumerate(plan.expiring):
        if run.stop_here(f"before the quarantine expiry of {exp.path!r}"):
            break
        if run.progress:
            run.progress(len(candidates) + j, total, freed, exp.path)
        freed += _expire_one(run, exp, judged)
    if run.progress:
        run.progress(total, total, freed, "")
    prune_worktrees(run.repos, on_error=run.audit.worktree_prune_failed)
    return run.result()


def _keep_by_rule(run: _Run, path: str) -> bool:
    """The marker, the flock and a mount inside, checked now; a kept entry is
    recorded (a check that could not be made keeps it too: fail closed)."""
    mount = run.mounts.under(path)
    if mount is not None:
        run.keep(path, mount_reason(mount))
        return True
    reason = static_keep_reason(path)
    if check_failed(reason):  # the entry could not be read: the same honest record as a failed re-scan
        run.audit.kept_rescan_failed(path, reason or "")
        run.kept.append(KeptRecord(path, f"activity re-scan failed, left untouched ({reason})"))
        return True
    if reason is not None:
        run.keep(path, reason)
        return True
    return False


def _drop_kept_by_rule(run: _Run, candidates: list[Candidate]) -> list[Candidate]:
    """A marker or a lock that appeared since the plan (or the prompt) keeps the entry,
    and no process of it is signalled."""
    return [c for c in candidates if not _keep_by_rule(run, c.path)]


def _still_targets(targets: list[tuple[JudgedProcess, str]], doomed: set[str]
                   ) -> list[tuple[JudgedProcess, str]]:
    """The targets whose reason still holds right now: their entry is still going,
    or their gone cwd lay in an entry that no longer exists."""
    return [(j, why) for j, why in targets
            if (j.area == "scratch" and j.entry in doomed) or (j.gone_cwd and j.entry_gone)]


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
            run.keep(c.path, f"process pid={j.proc.pid} ({j.proc.name!r}) started working inside after the plan")
    doomed = {c.name for c in out}
    allowed = [(j, why) for j, why in allowed if j.orphan_in(doomed)
               or (j.area == "scratch" and j.entry in doomed)]
    return out, allowed


# How long a KILLed process may take to be gone before it is reported as a survivor.
KILL_SETTLE_SECONDS = 1.0


def _signal(run: _Run, targets: list[tuple[JudgedProcess, str]]) -> None:
    """TERM every target, wait the grace period, KILL the ones still running.
    Every signal goes through identity.send_signal (verified, pidfd), and is
    recorded before it is sent (no record, no signal)."""
    termed: dict[int, JudgedProcess] = {}
    for j, _why in targets:
        p = j.proc
        if not identity.is_alive(p.pid, p.fingerprint):
            continue
        run.audit.sent_term(p.pid, p.name, p.cwd)
        res = identity.send_signal(p.pid, p.fingerprint, signal.SIGTERM)
        if res.sent:
            termed[p.pid] = j
            run.signalled.append(SignalRecord(p.pid, p.name, p.cwd, "SIGTERM"))
        else:
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
        run.audit.sent_kill(pid)
        res = identity.send_signal(pid, j.proc.fingerprint, signal.SIGKILL)
        if res.sent:
            killed[pid] = j
            run.signalled.append(SignalRecord(pid, j.proc.name, j.proc.cwd, "SIGKILL"))
        elif res.outcome is not identity.SignalOutcome.GONE:
            run.audit.signal_failed(pid, j.proc.name, f"{res.outcome.value}: {res.detail}")
    # Survivors are reported, never hidden (a process stuck in the kernel ignores KILL).
    deadline = time.monotonic() + KILL_SETTLE_SECONDS
    while killed and time.monotonic() < deadline:
        time.sleep(0.02)
        killed = {pid: j for pid, j in killed.items() if identity.is_alive(pid, j.proc.fingerprint)}
    for pid in sorted(killed):
        run.audit.survivor(pid)
        run.failures.append(f"pid {pid} still running after KILL")


def _confirm_gone(run: _Run, path: str, shown: str) -> bool:
    """True only when ``lstat`` says ENOENT; otherwise the failure is recorded."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        run.audit.could_not_confirm(shown)
        run.failures.append(f"could not confirm removal of {shown!r}")
        return False
    run.audit.could_not_fully_remove(shown)
    run.failures.append(f"could not fully remove {shown!r}")
    return False


def _remove(run: _Run, path: str, shown: str | None = None) -> bool:
    """Delete ``path`` in this process and prove it is gone (``shown``: the name the
    records use, the entry's own path when ``path`` is its trash name)."""
    delete_tree(path)
    return _confirm_gone(run, path, shown or path)


def _gone(path: str) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


@dataclass(frozen=True)
class _Moved:
    """An entry renamed to the pruner's own name, waiting for its verify walk."""

    cand: Candidate
    owned: str
    size: int
    top_id: tuple[int, int] | None = None  # the top's (st_dev, st_ino) as last walked


def _recheck(run: _Run, candidates: list[Candidate], with_signals: set[str]
             ) -> tuple[float, list[tuple[Candidate, Activity]]]:
    """The activity re-check walk of every candidate, then its keep rules once more,
    all before any signal: an entry found active, unreadable, gone or kept here is
    dropped and none of its processes is signalled. Returns the moment the walks
    started (T: every later check looks for an mtime at or after it) and the entries
    still idle with their walks. The walks run together (split across processes
    like the survey).

    A plan made just before (``run.just_planned``) was walked a moment ago, with no
    prompt between: then only the entries with a process to signal (``with_signals``,
    entry names) are walked again, and T is the moment the plan's walks began. The
    others keep the plan's walk as their check: anything written to them since T,
    even in a directory that walk had passed, is found by the verify walk of the
    moved tree before anything of it is deleted or recorded, as a write during a
    re-check walk is."""
    if run.just_planned:
        moment = run.plan.walked_at
        walked = [c for c in candidates if c.name in with_signals]
    else:
        moment = walk_start_moment()
        walked = candidates
    rechecks = dict(zip([c.path for c in walked], scan_many([c.path for c in walked], run.plan.cutoff,
                                                             arrival_cutoff=run.plan.arrival_cutoff),
                        strict=True))
    idle = []
    for cand in candidates:
        act = rechecks.get(cand.path)
        if act is None:  # not walked again: the plan's walk found it idle
            idle.append((cand, Activity(TouchState.IDLE, size_bytes=cand.size_bytes, git_files=cand.git_files,
                                        top_id=cand.top_id)))
        elif _still_idle(run, cand.path, _same_entry(cand.top_id, act)) and not _keep_by_rule(run, cand.path):
            idle.append((cand, act))
    return moment, idle


def _still_idle(run: _Run, path: str, act: Activity) -> bool:
    """The re-check's verdict; an entry that is not idle now is recorded as
    vanished, rescued (written to since the plan) or unreadable."""
    if act.idle:
        return True
    if act.mount is not None:
        run.keep(path, mount_reason(act.mount))
    elif _gone(path):
        run.audit.vanished(path)
    elif act.touched:
        run.audit.rescued(path)
        run.kept.append(KeptRecord(path, RESCUED_REASON))
    else:
        run.audit.kept_rescan_failed(path, act.error)
        run.kept.append(KeptRecord(path, "activity re-scan failed, left untouched"))
    return False


def _prune_candidates(run: _Run, idle: list[tuple[Candidate, Activity]], moment: float, total: int) -> int:
    """Move aside, verify, then quarantine or delete every entry the re-check found
    idle (its processes were signalled in between).

    The keep rules are checked once more right before each move (a marker made
    while the processes were signalled keeps the entry). Every moved tree is then
    checked for an mtime at or after T (``moment``), so a write that lands anywhere
    after it is found whatever runs in between: by the verify walk of the whole moved
    tree before anything of it goes, and with delete by the delete walk once more
    (``delete_unless_written``). If a record cannot be written, every moved entry not
    yet recorded is put back first."""
    moved: list[_Moved] = []
    done = 0  # moved entries already finished (recorded, put back, or deleted)
    try:
        for cand, act in idle:
            if run.stop_here(f"before moving {cand.path!r}"):
                break
            entry = _move_if_still_kept_by_nothing(run, cand, act, moment)
            if entry is not None:
                moved.append(entry)
        freed = 0
        # The whole moved tree is verified before anything of it goes, in both modes:
        # nothing written before the entry left its place is deleted because of a
        # write the delete walk would only meet later. A move rewrites "..": the top's
        # own mtime does not count. With quarantine the walks run together (split
        # across processes); with delete each tree's walk ends before its delete
        # starts, and the trees after it are walked meanwhile (scan_ahead).
        owned = [m.owned for m in moved]
        quarantine = run.options.quarantine_hours > 0
        verdicts = ((v for v in scan_many(owned, moment, count_top=False)) if quarantine
                    else scan_ahead(owned, moment, count_top=False))
        with closing(verdicts):
            for m, verdict in zip(moved, verdicts, strict=True):
                if run.stop_here(f"before removing {m.cand.path!r}"):
                    for rest in moved[done:]:  # moved, not yet recorded: back under their names
                        _undo_quietly(rest.cand.path, rest.owned)
                    done = len(moved)
                    break
                if run.progress:
                    run.progress(done, total, freed, m.cand.path)
                if _verified_untouched(run, m.cand.path, m.owned, _same_entry(m.top_id, verdict)):
                    if quarantine:
                        freed += _record_quarantine(run, m.cand.path, m.owned, m.size)
                    else:  # the delete walk checks every inode again before it goes
                        freed += _delete_moved(run, m, moment)
                done += 1
        return freed
    except BaseException:
        for m in moved[done:]:  # nothing stays moved without its record
            _undo_quietly(m.cand.path, m.owned)
        raise


def _same_entry(top_id: tuple[int, int] | None, verdict: Activity) -> Activity:
    """The verify walk's verdict, unless the moved tree is not the one the plan (or
    the re-check) walked: an entry that arrived in its place since (``mv -T`` over an
    emptied directory) carries its origin's old mtimes, and the verify walk ignores
    the top, whose ctime the move itself has just set. A different inode counts as a
    write: the tree goes back."""
    if verdict.idle and top_id is not None and verdict.top_id != top_id:
        return Activity(TouchState.TOUCHED, verdict.newest_mtime, top_id=verdict.top_id)
    return verdict


def _move_if_still_kept_by_nothing(run: _Run, cand: Candidate, act: Activity, moment: float) -> _Moved | None:
    """Keep rules now, then the rename (None: it stays)."""
    if _keep_by_rule(run, cand.path):
        return None
    run.repos |= repos_of_git_files(act.git_files)  # read before the move: the paths name the entry
    owned = _move_aside(run, cand, moment)
    return None if owned is None else _Moved(cand, owned, act.size_bytes or 0, act.top_id or cand.top_id)


def _move_aside(run: _Run, cand: Candidate, moment: float) -> str | None:
    """Rename the entry (atomically, never replacing) to a name the pruner owns:
    its quarantine name stamped ``moment``, or its trash name in the scratch folder.
    None (and a recorded failure) when it cannot be moved."""
    path = cand.path
    try:
        if run.options.quarantine_hours > 0:
            qdir = run.target.quarantine_dir
            run.target.home.ensure_dir(qdir)
            dest = os.fspath(quarantine_target(qdir, cand.name, now=moment))
        else:
            dest = os.path.join(os.path.dirname(path), TRASH_PREFIX + fit_name(cand.name, len(TRASH_PREFIX)))
        rename_noreplace(path, dest)
    except Exception as exc:
        if isinstance(exc, FileNotFoundError) and _gone(path):  # gone since its last check
            run.audit.vanished(path)
            return None
        why = getattr(exc, "strerror", None) or str(exc)
        if getattr(exc, "errno", None) == errno.EXDEV:
            why += (" (the quarantine folder is on another filesystem than the scratch folder; "
                    "set scratch.quarantine_hours: 0 to delete instead)")
        if run.options.quarantine_hours > 0:
            run.audit.could_not_quarantine(path, why)
            run.failures.append(f"could not quarantine {path!r}: {why}")
        else:
            run.audit.could_not_remove(path, why)
            run.failures.append(f"could not remove {path!r}: {why}")
        return None
    return dest


def _put_back(run: _Run, path: str, owned: str) -> bool:
    """Rename ``owned`` back to ``path``; a failure is recorded (the tree stays,
    intact, at ``owned``)."""
    try:
        rename_noreplace(owned, path)
        return True
    except OSError as exc:
        why = f"could not be put back from {owned!r}: {exc.strerror or exc}"
        run.audit.could_not_remove(path, why)
        run.failures.append(f"{path!r} {why}")
        return False


def _verified_untouched(run: _Run, path: str, owned: str, act: Activity) -> bool:
    """``act``: the moved tree's walk for any mtime at or after the re-check's start.
    A write found, or a walk that fails, puts the entry back: ``rescued``."""
    if act.idle:
        return True
    if act.mount is not None:  # a mount made inside since the re-check: the entry stays
        if _put_back(run, path, owned):
            run.keep(path, mount_reason(act.mount))
        return False
    why = "written to while the pass re-checked it" if act.touched else f"verify walk failed ({act.error})"
    if _put_back(run, path, owned):
        run.audit.rescued(path, why)
        run.kept.append(KeptRecord(path, RESCUED_REASON if act.touched else why))
    return False


def _record_quarantine(run: _Run, path: str, owned: str, size: int) -> int:
    """The move into quarantine is recorded; if it cannot be, it is undone."""
    try:
        run.audit.quarantined(path, owned, size)
    except AuditWriteError:
        _undo_quietly(path, owned)
        raise
    run.quarantined.append(QuarantineMove(path, owned, size))
    return size


def _delete_moved(run: _Run, m: _Moved, moment: float) -> int:
    """Write "removing", then delete the trash tree here (it dies with the pass),
    checking every inode for a write at or after ``moment`` before it goes. A write
    met (or a directory that cannot be read) stops the delete and puts what is there
    back: ``rescued``, saying how many older files had already been deleted."""
    path, owned = m.cand.path, m.owned
    mount = run.mounts.under(owned)  # the table as it is right before the delete
    if mount is not None:
        if _put_back(run, path, owned):
            run.keep(path, mount_reason(mount))
        return 0
    try:
        run.audit.removing(path, owned)
    except AuditWriteError:
        _undo_quietly(path, owned)
        raise
    outcome = delete_unless_written(owned, moment, shown=path)
    if outcome.stop is not DeleteStop.COMPLETED:
        _rescue_partly_deleted(run, path, owned, outcome)
        return 0
    if not _confirm_gone(run, owned, path):
        _undo_quietly(path, owned)  # what is left goes back where its owner looks for it
        return 0
    run.audit.removed(path, m.size)
    run.removed.append(RemovedEntry(path, m.size))
    return m.size


def _rescue_partly_deleted(run: _Run, path: str, owned: str, outcome: WatchedDelete) -> None:
    """Put back a tree whose delete stopped, and say what it had already lost (only
    files older than the re-check's start, each checked before its unlink)."""
    if outcome.stop is DeleteStop.WRITTEN:
        why = f"written to while the pass re-checked it ({outcome.detail})"
        kept_as = RESCUED_REASON
    elif outcome.stop is DeleteStop.MOUNT:
        why = kept_as = f"a mount was made inside ({outcome.detail}) while the pass removed it, never entered"
    else:
        why = kept_as = f"verify walk failed ({outcome.detail})"
    if outcome.files_removed:
        partly = f"; {outcome.files_removed} older file(s) had already been deleted, the rest is back"
        why, kept_as = why + partly, kept_as + partly
    if _put_back(run, path, owned):
        run.audit.rescued(path, why)
        run.kept.append(KeptRecord(path, kept_as))


def _undo_quietly(path: str, owned: str) -> None:
    """Put a moved entry back when its record could not be written (nothing may be
    done without a record; the caller reports the write failure)."""
    try:
        rename_noreplace(owned, path)
    except OSError:
        pass


def _put_back_leftover_trash(run: _Run) -> None:
    """A trash entry is only there while a pass removes it; one found now was left
    by a pass that was killed. Its removal may not have been verified, so it goes
    back under its name (the next pass judges it afresh)."""
    root = os.fspath(run.target.scratch_dir)
    try:
        names = [n for n in os.listdir(root) if n.startswith(TRASH_PREFIX)]
    except OSError:
        return
    for name in names:
        owned = os.path.join(root, name)
        path = os.path.join(root, name[len(TRASH_PREFIX):])
        try:
            rename_noreplace(owned, path)
        except OSError as exc:
            run.audit.could_not_remove(owned, f"left by an interrupted pass, cannot be put back: "
                                              f"{exc.strerror or exc}")
            continue
        why = "left by an interrupted pass"
        run.audit.restored(owned, path, why)
        run.restored.append(RestoredRecord(path, owned, why))


def _expire_one(run: _Run, exp: ExpiringEntry, judged: list[JudgedProcess]) -> int:
    """Delete a quarantined entry whose hours are over, unless it was written to since
    the moment its stamp records (the start of its re-check) or a live process still
    works inside: then restore it."""
    base = os.path.basename(exp.path)
    inside = [j for j in judged if j.area == "quarantine" and j.entry == base
              and identity.is_alive(j.proc.pid, j.proc.fingerprint)]
    act = scan_activity(exp.path, exp.quarantined_at, count_top=False)  # the move itself is no write
    mount = act.mount if act.mount is not None else run.mounts.under(exp.path)
    if mount is None and act.failed:
        if _gone(exp.path):
            return 0  # restored or removed by someone else
        run.audit.kept_rescan_failed(exp.path, act.error)
        run.kept.append(KeptRecord(exp.path, "activity re-scan failed, left in quarantine"))
        return 0
    if inside or act.touched or mount is not None:
        if mount is not None:
            why = mount_reason(mount)
        elif inside:
            why = f"a process pid={inside[0].proc.pid} ({escape_text(inside[0].proc.name)}) still works inside"
        else:
            why = "written to while in quarantine"
        q = QuarantinedEntry(exp.path, exp.name, exp.quarantined_at)
        try:
            dest = restore_entry(q, run.target.scratch_dir)
        except RestoreError as exc:
            run.keep(exp.path, f"{why}, and it cannot be restored: {exc}")
            return 0
        try:
            run.audit.restored(exp.path, os.fspath(dest), why)
        except AuditWriteError:
            _undo_quietly(exp.path, os.fspath(dest))
            raise
        run.restored.append(RestoredRecord(os.fspath(dest), exp.path, why))
        return 0
    size = act.size_bytes or 0
    if run.mounts.under(exp.path) is not None:  # made since its walk: the next pass restores it
        run.keep(exp.path, mount_reason(run.mounts.under(exp.path, fresh=False)))
        return 0
    run.audit.removing(exp.path)
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
    return execute_plan(target, plan, options, progress, just_planned=True)


def restore(target: PruneTarget, wanted: str) -> RestoredRecord:
    """``hermes-tui scratch restore NAME``: put a quarantined entry back (logged; a
    restore that cannot be recorded is undone and refused)."""
    from engine.scratch.quarantine import find_quarantined

    q = find_quarantined(target.quarantine_dir, wanted)
    lock = PassLock(target)
    if not lock.acquire():
        raise RestoreError("a prune of this home is running; try again when it ends")
    try:
        try:
            audit = open_audit(target.log_file, target.home.ensure_dir)
        except AuditWriteError as exc:
            raise RestoreError(str(exc)) from None
        with audit:
            dest = restore_entry(q, target.scratch_dir)
            try:
                audit.restored(q.path, os.fspath(dest), "by request")
            except AuditWriteError as exc:
                _undo_quietly(q.path, os.fspath(dest))
                raise RestoreError(f"{exc}; nothing was restored") from None
        # Putting it back is activity: without this the next pass would take it again.
        try:
            os.utime(dest, follow_symlinks=False)
        except OSError:
            pass
        return RestoredRecord(os.fspath(dest), q.path, "by request")
    finally:
        lock.release()
