"""Process identity and verified signals, with real processes.

The only things faked are boundaries that cannot be real here: another boot (a stored
fingerprint whose boot id differs) and a recycled pid (the kernel's view of a pid's
start time, read through ``engine.identity._read_stat_bytes``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import identity
from engine.identity import (
    UNVERIFIED,
    LineageError,
    SignalOutcome,
    fingerprint,
    is_alive,
    lineage,
    parse_stat,
    read_stat,
    send_signal,
    terminate,
)
from tests.support import wait_until


@pytest.fixture
def signals_sent(monkeypatch) -> list[tuple[str, int, int]]:
    """Every signal sent through os.kill, os.killpg or a pidfd (not the 0 probe), as
    (how, target, signal): a refusal is seen as no call at all, at once, rather than as
    a process still alive after a pause."""
    sent: list[tuple[str, int, int]] = []

    def spy(how, real):
        def call(target, sig, *rest):
            if sig:
                sent.append((how, target, sig))
            return real(target, sig, *rest)
        return call

    monkeypatch.setattr(os, "kill", spy("kill", os.kill))
    monkeypatch.setattr(os, "killpg", spy("killpg", os.killpg))
    if hasattr(signal, "pidfd_send_signal"):
        monkeypatch.setattr(signal, "pidfd_send_signal", spy("pidfd", signal.pidfd_send_signal))
    return sent


def running(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def test_fingerprint_has_boot_id_and_start_ticks():
    fp = fingerprint(os.getpid())
    boot, _, ticks = fp.partition("|")
    assert boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert ticks.isdigit()
    assert fingerprint(os.getpid()) == fp  # stable


def test_fingerprint_of_missing_pid_is_unverified():
    assert fingerprint(2**22 + 12345) == UNVERIFIED
    assert fingerprint(0) == UNVERIFIED
    assert fingerprint(-5) == UNVERIFIED


def test_comm_with_paren_space_and_non_utf8_byte(tmp_path, children):
    """The executable name holds ') ' and 0xff: parsing must split after the LAST ')'."""
    weird = os.path.join(os.fsencode(tmp_path), b"a) b\xff")
    os.symlink(shutil.which("sleep").encode(), weird)
    proc = children([weird, b"30"])
    assert wait_until(lambda: (s := read_stat(proc.pid)) is not None and s.comm != b"sleep" and s.state != "")
    stat = read_stat(proc.pid)
    assert stat.comm == b"a) b\xff"
    assert stat.ppid == os.getpid()
    assert stat.pgrp == proc.pid  # its own session, so its own group
    fp = fingerprint(proc.pid)
    assert fp != UNVERIFIED and fp.split("|")[1] == str(stat.start_ticks)
    assert fingerprint(proc.pid) == fp
    assert "\\xff" in stat.name  # displayable without losing the byte


def test_parse_stat_tricky_comm_bytes():
    tail = b" S 1 2 3 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
    raw = b"42 (x) ) (y\xff\n) z)" + tail
    stat = parse_stat(42, raw)
    assert stat is not None
    assert stat.comm == b"x) ) (y\xff\n) z"
    assert (stat.state, stat.ppid, stat.pgrp, stat.session, stat.start_ticks) == ("S", 1, 2, 3, 987654)
    assert parse_stat(42, b"garbage") is None
    assert parse_stat(42, b"42 (x) S 1") is None


def test_signal_to_unverified_or_missing_fingerprint_is_refused(children, signals_sent):
    proc = children(["sleep", "30"])
    for stored in (UNVERIFIED, None, "", "nonsense", "boot|notanumber"):
        result = send_signal(proc.pid, stored, signal.SIGTERM)
        assert result.outcome is SignalOutcome.UNVERIFIED, stored
    report = terminate(proc.pid, UNVERIFIED, grace=0.1)
    assert report.refused and report.signals == []
    assert signals_sent == [] and running(proc)


def test_fingerprint_from_another_boot_is_never_signalled(children, signals_sent):
    proc = children(["sleep", "30"])
    real = fingerprint(proc.pid)
    _boot, _, ticks = real.partition("|")
    other_boot = f"00000000-0000-4000-8000-000000000000|{ticks}"  # same pid, same ticks, other boot
    assert fingerprint(proc.pid) != other_boot
    result = send_signal(proc.pid, other_boot, signal.SIGKILL)
    assert result.outcome is SignalOutcome.PID_RECYCLED
    report = terminate(proc.pid, other_boot, grace=0.1)
    assert report.outcome is SignalOutcome.PID_RECYCLED and report.signals == []
    assert signals_sent == [] and running(proc)


def test_recycled_pid_with_other_start_time_is_never_signalled(children, signals_sent):
    proc = children(["sleep", "30"])
    boot, _, ticks = fingerprint(proc.pid).partition("|")
    stale = f"{boot}|{int(ticks) - 1}"  # what we stored for the pid's previous owner
    assert send_signal(proc.pid, stale, signal.SIGKILL).outcome is SignalOutcome.PID_RECYCLED
    assert terminate(proc.pid, stale, grace=0.1).signals == []
    assert signals_sent == [] and running(proc)


def test_pid_recycled_between_open_and_check_is_not_signalled(children, monkeypatch, signals_sent):
    """The kernel reports a new owner of the pid after the pidfd is opened (faked at the
    /proc boundary): the fingerprint check fails and nothing is sent through the fd."""
    proc = children(["sleep", "30"])
    fp = fingerprint(proc.pid)
    real_read = identity._read_stat_bytes

    def recycled(pid):
        raw = real_read(pid)
        if pid == proc.pid and raw:
            head, _, rest = raw.rpartition(b")")
            fields = rest.split()
            fields[19] = str(int(fields[19]) + 500).encode()
            return head + b") " + b" ".join(fields)
        return raw

    monkeypatch.setattr(identity, "_read_stat_bytes", recycled)
    assert send_signal(proc.pid, fp, signal.SIGKILL).outcome is SignalOutcome.PID_RECYCLED
    monkeypatch.undo()
    assert signals_sent == [] and running(proc)
    assert fingerprint(proc.pid) == fp


def test_dead_pid_is_reported_gone(children):
    proc = children(["true"])
    fp_before = None
    # Catch its fingerprint while it lives (it may already be a zombie: same fingerprint).
    fp_before = fingerprint(proc.pid)
    proc.wait(timeout=5)
    result = send_signal(proc.pid, fp_before if fp_before != UNVERIFIED else "b|1", signal.SIGTERM)
    assert result.outcome in (SignalOutcome.GONE, SignalOutcome.UNVERIFIED, SignalOutcome.PID_RECYCLED)
    assert not result.sent


def test_zombie_is_not_alive(children):
    proc = children(["true"])
    fp = fingerprint(proc.pid)
    assert wait_until(lambda: (s := read_stat(proc.pid)) is not None and s.is_zombie)
    assert fingerprint(proc.pid) == fp  # still the same (unreaped) process...
    assert not is_alive(proc.pid, fp)  # ...but it has exited
    assert send_signal(proc.pid, fp, signal.SIGKILL).outcome is SignalOutcome.GONE


def test_refuses_pid_one_and_self():
    assert send_signal(1, fingerprint(1), signal.SIGTERM).outcome is SignalOutcome.UNVERIFIED
    assert send_signal(os.getpid(), fingerprint(os.getpid()), signal.SIGTERM).outcome is SignalOutcome.UNVERIFIED


def test_terminate_sends_term_to_the_whole_group(children):
    # A shell leading its group with a background grandchild: both must go.
    proc = children(["sh", "-c", "sleep 30 & echo $! ; wait"], stdout=subprocess.PIPE, text=True)
    grandchild = int(proc.stdout.readline())
    fp = fingerprint(proc.pid)
    gfp = fingerprint(grandchild)
    # terminate returns once both are gone: a long grace costs nothing, and no load outlasts it
    report = terminate(proc.pid, fp, grace=60)
    assert report.outcome is SignalOutcome.SENT
    assert (proc.pid, "SIGTERM") in report.signals and (grandchild, "SIGTERM") in report.signals
    assert not any(s == "SIGKILL" for _p, s in report.signals)
    assert report.survivors == []
    assert not is_alive(grandchild, gfp)
    proc.wait(timeout=5)


def test_child_ignoring_term_gets_kill_after_grace(children):
    proc = children(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"],
                    stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    fp = fingerprint(proc.pid)
    t0 = time.monotonic()
    report = terminate(proc.pid, fp, grace=0.5)
    elapsed = time.monotonic() - t0
    assert (proc.pid, "SIGTERM") in report.signals
    assert (proc.pid, "SIGKILL") in report.signals
    assert report.survivors == []
    assert elapsed >= 0.5  # KILL only after the grace period
    assert proc.wait(timeout=5) == -signal.SIGKILL


def test_terminate_reports_pidfd_use(children):
    proc = children(["sleep", "30"])
    report = terminate(proc.pid, fingerprint(proc.pid), grace=2)
    assert report.via_pidfd is identity.HAVE_PIDFD
    assert report.to_json()["signals"][0] == {"pid": proc.pid, "signal": "SIGTERM"}


def test_lineage_is_this_process_and_its_ancestors():
    chain = lineage()
    assert chain[0] == (os.getpid(), fingerprint(os.getpid()))
    assert chain[1][0] == os.getppid()
    assert all(identity.is_verifiable(fp) for _pid, fp in chain)
    text = identity.format_lineage(chain)
    assert identity.parse_lineage(text) == chain
    with pytest.raises(ValueError):
        identity.parse_lineage("12=unverified")


def test_lineage_fails_closed_when_proc_is_unreadable(monkeypatch):
    monkeypatch.setattr(identity, "_read_stat_bytes", lambda pid: None)
    with pytest.raises(LineageError):
        lineage()


def test_lineage_of_a_child_process_through_the_real_cli():
    """A child computes its own lineage: our pid is in it with our fingerprint."""
    out = subprocess.run(
        [sys.executable, "-c", "from engine.identity import lineage, format_lineage; print(format_lineage(lineage()))"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent,
    ).stdout.strip()
    pairs = identity.parse_lineage(out)
    assert (os.getpid(), fingerprint(os.getpid())) in pairs
