"""Process identity and verified signals: the one module that decides whether a pid
may be signalled.

A *fingerprint* is ``"<boot_id>|<start_ticks>"``: the kernel's boot id and field 22
of ``/proc/<pid>/stat`` (start time in clock ticks since boot). Together they name
one process for the life of the machine; a pid number alone does not (pids are
recycled, and a row can outlive a reboot). When the capture fails the marker
:data:`UNVERIFIED` is stored instead, and such a pid is never signalled.

``/proc/<pid>/stat`` is parsed as bytes after the LAST ``)``: the command name in
parentheses may contain spaces, ``)`` and bytes that are not UTF-8.

Signals go through a pidfd where the kernel has one (``os.pidfd_open`` +
``signal.pidfd_send_signal``): the fd is opened first, the fingerprint is checked
second, and the signal is sent through the fd, so a pid recycled between the check
and the signal cannot receive it. Without pidfd we fall back to check-then-kill and
:data:`HAVE_PIDFD` says so (``doctor`` reports it).
"""

from __future__ import annotations

import enum
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

UNVERIFIED = "unverified"
PROC = Path("/proc")
BOOT_ID_FILE = PROC / "sys" / "kernel" / "random" / "boot_id"


# --------------------------------------------------------------------------------------
# Reading /proc (the boundary tests may fake: _read_boot_id and _read_stat_bytes)
# --------------------------------------------------------------------------------------


def _read_boot_id() -> str | None:
    try:
        return BOOT_ID_FILE.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


_boot_id_cache: str | None = None


def boot_id() -> str | None:
    """This boot's id (cached: it cannot change while we run)."""
    global _boot_id_cache
    if _boot_id_cache is None:
        _boot_id_cache = _read_boot_id()
    return _boot_id_cache


def _read_stat_bytes(pid: int) -> bytes | None:
    try:
        with open(PROC / str(pid) / "stat", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def stat_bytes(pid: int) -> bytes | None:
    """The raw ``/proc/<pid>/stat`` of ``pid`` (None when it cannot be read), for a
    reader of fields that :class:`ProcStat` does not keep (the sampler's CPU ticks)."""
    return _read_stat_bytes(pid)


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat we use. ``comm`` stays bytes (may be non-UTF-8)."""

    pid: int
    comm: bytes
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int

    @property
    def name(self) -> str:
        return self.comm.decode("utf-8", errors="backslashreplace")

    @property
    def is_zombie(self) -> bool:
        return self.state in ("Z", "X", "x")


def parse_stat(pid: int, raw: bytes) -> ProcStat | None:
    """Parse stat bytes. Everything after the last ')' is space-separated ASCII fields,
    starting with field 3 (state); the comm is between the first '(' and the last ')'."""
    open_ = raw.find(b"(")
    close = raw.rfind(b")")
    if open_ < 0 or close < open_:
        return None
    rest = raw[close + 1 :].split()
    # rest[0] is field 3 (state); field N is rest[N - 3]. Field 22 = starttime.
    if len(rest) < 20:
        return None
    try:
        return ProcStat(
            pid=pid,
            comm=raw[open_ + 1 : close],
            state=rest[0].decode("ascii", errors="replace"),
            ppid=int(rest[1]),
            pgrp=int(rest[2]),
            session=int(rest[3]),
            start_ticks=int(rest[19]),
        )
    except ValueError:
        return None


def read_stat(pid: int) -> ProcStat | None:
    """The parsed stat of ``pid``, or None when it does not exist or cannot be read."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    raw = _read_stat_bytes(pid)
    if raw is None:
        return None
    return parse_stat(pid, raw)


def proc_readable() -> bool:
    """True when /proc looks usable (our own stat parses)."""
    return read_stat(os.getpid()) is not None


# --------------------------------------------------------------------------------------
# Fingerprints
# --------------------------------------------------------------------------------------


def fingerprint_of(stat: ProcStat) -> str:
    bid = boot_id()
    if not bid:
        return UNVERIFIED
    return f"{bid}|{stat.start_ticks}"


def fingerprint(pid: int) -> str:
    """``"<boot_id>|<start_ticks>"`` for a live pid, or :data:`UNVERIFIED`."""
    stat = read_stat(pid)
    if stat is None:
        return UNVERIFIED
    return fingerprint_of(stat)


def is_verifiable(fp: str | None) -> bool:
    """A stored fingerprint we could ever match (not None, not 'unverified', well-formed)."""
    if not fp or fp == UNVERIFIED or not isinstance(fp, str):
        return False
    bid, sep, ticks = fp.partition("|")
    return bool(sep and bid and ticks.isdigit())


def boot_clock() -> float:
    """Seconds since this machine booted (``CLOCK_BOOTTIME``): never stepped by NTP or a
    person, counting suspend too; the clock a process's start time is on."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def age_of(fp: str | None, boot_now: float) -> float | None:
    """How long the process of fingerprint ``fp`` has run at ``boot_now`` (a reading of
    :func:`boot_clock`): its start time, on the boot clock, to now. None when ``fp`` is
    not a fingerprint of this boot (nothing can be said of its age here)."""
    if not is_verifiable(fp) or fp.partition("|")[0] != boot_id():
        return None
    return boot_now - int(fp.partition("|")[2]) / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def is_alive(pid: int, fp: str | None) -> bool:
    """Same process and not a zombie (a zombie has exited; it only waits to be reaped)."""
    if not is_verifiable(fp):
        return False
    stat = read_stat(pid)
    return stat is not None and not stat.is_zombie and fingerprint_of(stat) == fp


class Liveness(enum.StrEnum):
    """What a recorded (pid, fingerprint) pair names now (the values are stored and
    printed as they are)."""

    ALIVE = "alive"  # that very process, running
    UNVERIFIED_ALIVE = "unverified_alive"  # the pid runs, but no fingerprint was taken: never signalled
    RECYCLED = "recycled"  # the pid is another process now
    GONE = "gone"  # no such process any more (or only its zombie)


# The states in which something still runs under the recorded pid that may be ours.
RUNS = frozenset({Liveness.ALIVE, Liveness.UNVERIFIED_ALIVE})


def liveness(pid: int | None, fp: str | None) -> Liveness:
    """Whether ``pid`` is still the process ``fp`` was taken of; without a verifiable
    fingerprint, only whether the pid exists (such a pid is never signalled)."""
    if not pid:
        return Liveness.GONE
    stat = read_stat(pid)
    if stat is None or stat.is_zombie:
        return Liveness.GONE
    if not is_verifiable(fp):
        return Liveness.UNVERIFIED_ALIVE
    return Liveness.ALIVE if fingerprint_of(stat) == fp else Liveness.RECYCLED


def lineage(pid: int | None = None) -> tuple[tuple[int, str], ...]:
    """``(pid, fingerprint)`` of ``pid`` (default: this process) and all its ancestors.

    Raises :class:`LineageError` when the chain cannot be read: callers must then fail
    closed (signal nothing), not pretend the lineage is empty.
    """
    pid = os.getpid() if pid is None else pid
    chain: list[tuple[int, str]] = []
    seen: set[int] = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        stat = read_stat(pid)
        if stat is None:
            if chain:  # an ancestor vanished mid-walk (reparenting): the chain so far is real
                break
            raise LineageError(f"cannot read /proc/{pid}/stat")
        fp = fingerprint_of(stat)
        if fp == UNVERIFIED:
            raise LineageError("cannot read the boot id, so no fingerprint can be taken")
        chain.append((pid, fp))
        pid = stat.ppid
    return tuple(chain)


class LineageError(Exception):
    pass


def format_lineage(pairs: Iterable[tuple[int, str]]) -> str:
    """``pid=fingerprint,pid=fingerprint``: how a lineage travels through argv or env."""
    return ",".join(f"{pid}={fp}" for pid, fp in pairs)


def parse_lineage(text: str) -> tuple[tuple[int, str], ...]:
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        pid_s, sep, fp = part.partition("=")
        if not sep or not pid_s.isdigit() or not is_verifiable(fp):
            raise ValueError(f"bad lineage entry {part!r}")
        pairs.append((int(pid_s), fp))
    return tuple(pairs)


# --------------------------------------------------------------------------------------
# Verified signals
# --------------------------------------------------------------------------------------


def _probe_pidfd() -> bool:
    """Whether this kernel and Python can signal through a pidfd (probed on our own pid)."""
    if not (hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")):
        return False
    try:
        fd = os.pidfd_open(os.getpid())
    except OSError:
        return False
    os.close(fd)
    return True


# Whether signals go through a pidfd here: probed once (the kernel cannot gain or lose
# pidfds while we run). The one name for it: the signals, the registry and doctor ask this.
HAVE_PIDFD = _probe_pidfd()


class SignalOutcome(enum.StrEnum):
    SENT = "sent"
    UNVERIFIED = "unverified"  # no usable fingerprint stored: never signalled
    PID_RECYCLED = "pid_recycled"  # the pid now belongs to another process (or another boot)
    GONE = "gone"  # no such process (or only its zombie)
    ERROR = "error"  # the kernel refused (EPERM, ...)


@dataclass(frozen=True)
class SignalResult:
    pid: int
    signal: str
    outcome: SignalOutcome
    detail: str = ""
    via_pidfd: bool = False

    @property
    def sent(self) -> bool:
        return self.outcome is SignalOutcome.SENT


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _classify(pid: int, fp: str | None) -> SignalOutcome | None:
    """None when ``pid`` is verified as the live process ``fp``; otherwise why not."""
    if not is_verifiable(fp):
        return SignalOutcome.UNVERIFIED
    stat = read_stat(pid)
    if stat is None:
        return SignalOutcome.GONE
    if fingerprint_of(stat) != fp:
        return SignalOutcome.PID_RECYCLED
    if stat.is_zombie:
        return SignalOutcome.GONE
    return None


def send_signal(pid: int, fp: str | None, sig: int, *, group: bool = False) -> SignalResult:
    """Send ``sig`` to ``pid`` only if it is still the process ``fp`` names.

    With ``group=True`` the signal goes to the process group led by ``pid`` (only when
    ``pid`` really leads its group; otherwise to ``pid`` alone).
    """
    name = signal_name(sig)
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1 or pid == os.getpid():
        return SignalResult(pid, name, SignalOutcome.UNVERIFIED, "refusing pid <= 1 or our own pid")
    if not is_verifiable(fp):
        return SignalResult(pid, name, SignalOutcome.UNVERIFIED, "no verified fingerprint stored")
    pidfd = None
    if HAVE_PIDFD:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return SignalResult(pid, name, SignalOutcome.GONE, "no such process")
        except OSError as exc:
            return SignalResult(pid, name, SignalOutcome.ERROR, f"pidfd_open: {exc.strerror or exc}")
    try:
        why = _classify(pid, fp)
        if why is not None:
            return SignalResult(pid, name, why, {
                SignalOutcome.GONE: "process has exited",
                SignalOutcome.PID_RECYCLED: "pid now belongs to another process",
            }.get(why, ""))
        stat = read_stat(pid) if group else None
        try:
            if group and stat is not None and stat.pgrp == pid:
                # The leader is verified alive, so its group id cannot have been reused.
                if pidfd is not None:
                    # Re-check through the fd: if the leader died after the check, the
                    # fd says so (ESRCH) and we do not touch the number.
                    signal.pidfd_send_signal(pidfd, 0)
                os.killpg(pid, sig)
            elif pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return SignalResult(pid, name, SignalOutcome.GONE, "process has exited", pidfd is not None)
        except OSError as exc:
            return SignalResult(pid, name, SignalOutcome.ERROR, exc.strerror or str(exc), pidfd is not None)
        return SignalResult(pid, name, SignalOutcome.SENT, "group" if group else "", pidfd is not None)
    finally:
        if pidfd is not None:
            os.close(pidfd)


# --------------------------------------------------------------------------------------
# Termination: TERM to the group, grace, KILL survivors, report
# --------------------------------------------------------------------------------------


def _live_stats():
    """Every live (non-zombie) process's stat, one pass over /proc."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return
    for entry in names:
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None and not stat.is_zombie:
                yield stat


def group_members(pgid: int) -> dict[int, ProcStat]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    return {stat.pid: stat for stat in _live_stats() if stat.pgrp == pgid}


def live_groups() -> set[int]:
    """The process groups that have a live (non-zombie) member: one pass over /proc for
    a caller that asks of many groups at once."""
    return {stat.pgrp for stat in _live_stats()}


@dataclass
class TerminateReport:
    """What :func:`terminate` did: every signal sent, and who is still alive."""

    pid: int
    outcome: SignalOutcome  # of the first (TERM) step for the leader
    detail: str = ""
    signals: list[tuple[int, str]] = field(default_factory=list)  # (pid, "SIGTERM"/"SIGKILL")
    survivors: list[int] = field(default_factory=list)
    via_pidfd: bool = False

    @property
    def refused(self) -> bool:
        return self.outcome not in (SignalOutcome.SENT,)

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "signals": [{"pid": p, "signal": s} for p, s in self.signals],
            "survivors": list(self.survivors),
            "via_pidfd": self.via_pidfd,
        }


def wait_gone(members: dict[int, str], deadline: float, poll: float = 0.02) -> dict[int, str]:
    """Wait until no member (pid -> fingerprint) is alive, or the deadline. Returns the living."""
    while True:
        living = {pid: fp for pid, fp in members.items() if is_alive(pid, fp)}
        if not living or time.monotonic() >= deadline:
            return living
        time.sleep(poll)


def terminate(pid: int, fp: str | None, grace: float = 2.0) -> TerminateReport:
    """TERM the process group led by ``pid``, wait ``grace`` seconds, KILL survivors.

    Nothing is signalled unless the leader is verified by ``fp``. Members of the group
    are fingerprinted when TERM is sent; KILL goes to each surviving member whose
    fingerprint still matches (via pidfd), and to the group while its leader is still
    verified. Survivors after KILL are reported, never hidden. Zombies count as gone.
    """
    pid = int(pid)
    leader_stat = read_stat(pid)
    is_leader = leader_stat is not None and leader_stat.pgrp == pid
    members: dict[int, str] = {}
    if is_leader and is_verifiable(fp) and leader_stat is not None and fingerprint_of(leader_stat) == fp:
        members = {m: fingerprint_of(s) for m, s in group_members(pid).items()}
    first = send_signal(pid, fp, signal.SIGTERM, group=is_leader)
    report = TerminateReport(pid=pid, outcome=first.outcome, detail=first.detail, via_pidfd=first.via_pidfd)
    if not first.sent:
        return report
    members.setdefault(pid, fp or UNVERIFIED)
    report.signals.extend((m, "SIGTERM") for m in sorted(members))
    living = wait_gone(members, time.monotonic() + max(0.0, grace))
    if living:
        if is_leader and pid in living:
            res = send_signal(pid, fp, signal.SIGKILL, group=True)
            if res.sent:
                report.signals.extend((m, "SIGKILL") for m in sorted(living))
                living = {}
        for member, mfp in sorted(living.items()):
            res = send_signal(member, mfp, signal.SIGKILL)
            if res.sent:
                report.signals.append((member, "SIGKILL"))
        living = wait_gone(dict(sorted(members.items())), time.monotonic() + 1.0)
    report.survivors = sorted(living)
    return report
