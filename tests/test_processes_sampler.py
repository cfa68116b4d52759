"""The processes table's CPU and memory, read from /proc with real processes: a busy
session uses CPU and an idle one none, memory is counted, a session's children are its
members, and a pid taken by another process is not measured from the old one's ticks."""

from __future__ import annotations

import os

import pytest

from engine import identity
from engine.config import Settings
from engine.processes import ProcessRegistry
from engine.processes.sampler import CLOCK_TICKS, SessionSampler, session_members
from tests.support import wait_until


def _state(pid: int) -> str | None:
    stat = identity.read_stat(pid)
    return stat.state if stat else None


def stat_with(real: bytes, ticks: int, start: int | None = None) -> bytes:
    """A member's real /proc/<pid>/stat with its CPU ticks (user; system 0) and, given,
    its start time replaced: the /proc boundary, faked."""
    head, rest = real[: real.rfind(b")") + 1], real[real.rfind(b")") + 1:].split()
    rest[11], rest[12] = str(ticks).encode(), b"0"
    if start is not None:
        rest[19] = str(start).encode()
    return head + b" " + b" ".join(rest) + b"\n"


@pytest.fixture
def sleeping(home):
    """A real session running ``sleep``: (the session, the sleep's pid, its real stat,
    a sampler that rediscovers members each sample); killed after the test."""
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn(["sleep", "120"], owner="test")
    try:
        pid = wait_until(lambda: session_members(s.pid)[1:], what="sleep started")[0]
        yield s, pid, identity.stat_bytes(pid), SessionSampler(members_every=1)
    finally:
        reg.kill(s.id, grace=0.2)


def test_a_busy_session_uses_cpu_an_idle_one_none_and_both_use_memory(home, tmp_path):
    gate = tmp_path / "stop"
    reg = ProcessRegistry(home, Settings())
    busy = reg.spawn(["sh", "-c", f'while [ ! -e "{gate}" ]; do :; done'], owner="test")
    idle = reg.spawn(["sleep", "120"], owner="test")
    sampler = SessionSampler(members_every=1)
    try:
        wait_until(lambda: session_members(busy.pid)[1:], what="the busy loop started")
        sleeper = wait_until(lambda: session_members(idle.pid)[1:], what="sleep started")[0]
        wait_until(lambda: _state(sleeper) == "S", what="sleep asleep")  # no more ticks of its start
        first = sampler.sample([busy, idle])
        assert first[busy.id].cpu_percent == 0.0  # a first reading has nothing to measure from
        usage = wait_until(lambda: (u := sampler.sample([busy, idle]))[busy.id].cpu_percent > 0 and u,
                           what="the busy loop's CPU")
        assert usage[idle.id].cpu_percent == 0.0
        assert usage[busy.id].cpu_percent <= 100.0 * (os.cpu_count() or 1) + 1
        assert usage[busy.id].rss > 0 and usage[idle.id].rss > 0
        assert usage[busy.id].processes == 1 and usage[idle.id].processes == 1
    finally:
        gate.touch()
        for s in (busy, idle):
            reg.kill(s.id, grace=0.2)


def test_a_session_counts_its_commands_children(home):
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn("sleep 120 & sleep 120 & wait", owner="test")
    sampler = SessionSampler(members_every=1)
    try:
        usage = wait_until(lambda: (u := sampler.sample([s]))[s.id].processes == 3 and u,
                           what="the shell and its two sleeps")
        assert usage[s.id].rss > 0
    finally:
        reg.kill(s.id, grace=0.2)


def test_a_pid_taken_by_another_process_is_not_measured_from_the_old_ones_ticks(sleeping, monkeypatch):
    """The member's pid now belongs to a process started later (another start time):
    its ticks are not compared with the old process's (a huge or negative share)."""
    s, pid, real, sampler = sleeping
    readings = iter([stat_with(real, 50_000, start=1000), stat_with(real, 3, start=2000)])
    monkeypatch.setattr(identity, "_read_stat_bytes", lambda p: next(readings) if p == pid else real)
    assert sampler.sample([s])[s.id].cpu_percent == 0.0  # the first reading
    after = sampler.sample([s])[s.id]
    assert after.cpu_percent == 0.0 and after.processes == 1


def test_a_zombie_member_is_not_counted(sleeping, monkeypatch):
    s, pid, real, sampler = sleeping
    cut = real.rfind(b")") + 1
    zombie = real[:cut] + b" Z " + real[cut:].split(b" ", 2)[2]  # its state field, Z
    monkeypatch.setattr(identity, "_read_stat_bytes", lambda p: zombie if p == pid else real)
    usage = sampler.sample([s])[s.id]
    assert usage.processes == 0 and usage.rss == 0


def test_samples_closer_than_a_few_clock_ticks_repeat_the_last_share_instead_of_noise(sleeping, monkeypatch):
    """Two samples 0.2 ms apart saw one 10 ms tick: 5,488% of a CPU (a paired -n 4 round).
    Closer than MIN_SPAN_SECONDS, a sample measures from the older reading and repeats
    the last share; a share is never more than all the machine's CPUs."""
    from engine.processes import sampler as sampler_module

    s, pid, real, sampler = sleeping
    now = [1000.0]  # the sampler's clock, moved by the test
    ticks = [100]
    monkeypatch.setattr(sampler_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(identity, "_read_stat_bytes", lambda p: stat_with(real, ticks[0]) if p == pid else real)
    tick = CLOCK_TICKS

    def share_after(seconds: float, used_ticks: int) -> float:
        now[0] += seconds
        ticks[0] += used_ticks
        return sampler.sample([s])[s.id].cpu_percent

    assert share_after(0, 0) == 0.0  # the first reading
    assert share_after(0.0002, 1) == 0.0  # one tick in 0.2 ms: too close, the last share (none)
    assert share_after(1.0, tick // 2) == pytest.approx(100.0 * (1 + tick // 2) / tick / 1.0002)
    measured = sampler.sample([s])[s.id].cpu_percent  # at once again: the same share
    assert measured == pytest.approx(100.0 * (1 + tick // 2) / tick / 1.0002)
    assert share_after(0.3, 100 * tick) <= 100.0 * (os.cpu_count() or 1)  # 100 s of CPU in 0.3 s: capped
