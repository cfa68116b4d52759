"""Notifications: watch cooldown, strikes, lifetime cap, the watch overflow, completions
shown exactly once (across centers and restarts), redaction of what is shown."""

from __future__ import annotations

import pytest

from engine.processes import ProcessRegistry
from engine.processes.notify import (
    EventKind,
    NotificationCenter,
    WatchOverflow,
    WatchPolicy,
)
from tests.support import wait_until


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def reg(home, settings):
    r = ProcessRegistry(home, settings)
    yield r
    for s in r.list(include_finished=False):
        r.kill(s.id, grace=0.2)


# -- the per-session policy (time is given, so these are exact) -------------------------


def test_first_match_is_delivered_and_arms_the_cooldown():
    p = WatchPolicy(("ERROR",))
    assert p.match("an ERROR here") == "ERROR"
    assert p.match("error (lowercase) does not match") is None
    assert p.offer("ERROR", ["x"], 0.0) == ("deliver",)
    assert p.hits == 1 and p.cooldown_until == 15.0


def test_drops_in_cooldown_are_counted_and_reported_by_the_next_delivery():
    p = WatchPolicy(("E",))
    p.offer("E", ["1"], 0.0)
    for t in (1, 2, 3, 4):
        assert p.offer("E", ["x"], float(t)) == ("drop",)
    assert p.suppressed == 4
    assert p.offer("E", ["y"], 16.0) == ("deliver",)
    assert p.take_suppressed() == 4 and p.suppressed == 0


def test_many_drops_in_one_window_are_one_strike():
    p = WatchPolicy(("E",))
    p.offer("E", ["1"], 0.0)
    for i in range(24):
        p.offer("E", ["x"], 1.0 + i * 0.1)
    assert p.consecutive_strikes == 1 and not p.disabled


def test_three_consecutive_windows_with_drops_disable_watching():
    p = WatchPolicy(("E",))
    t = 0.0
    verdicts = []
    for _window in range(3):
        verdicts.append(p.offer("E", ["m"], t))
        verdicts.append(p.offer("E", ["d"], t + 1))
        t += 16
    assert verdicts[-1] == ("drop", "disable")
    assert p.disabled and "cooldown windows" in p.disabled_reason
    assert p.offer("E", ["late"], t + 100) == ()


def test_a_clean_window_resets_the_strikes():
    p = WatchPolicy(("E",))
    p.offer("E", ["m"], 0)
    p.offer("E", ["d"], 1)  # strike 1
    p.offer("E", ["m"], 16)
    p.offer("E", ["d"], 17)  # strike 2
    p.offer("E", ["m"], 32)  # window with no drops follows
    p.offer("E", ["m"], 48)  # resets
    assert p.consecutive_strikes == 0 and not p.disabled


def test_the_eighth_delivered_match_is_sent_then_watching_stops():
    p = WatchPolicy(("E",))
    out = [p.offer("E", ["m"], i * 20.0) for i in range(8)]
    assert out[:7] == [("deliver",)] * 7
    assert out[7] == ("deliver", "disable")
    assert "lifetime cap of 8" in p.disabled_reason
    assert p.offer("E", ["ninth"], 1000.0) == ()


def test_dropped_matches_do_not_count_toward_the_lifetime_cap():
    p = WatchPolicy(("E",))
    for i in range(7):
        p.offer("E", ["m"], i * 20.0)
        if i % 2 == 0:
            p.offer("E", ["d"], i * 20.0 + 1)
    assert p.hits == 7 and not p.disabled


# -- the watch overflow ------------------------------------------------------------------


def test_watch_overflow_trips_after_15_in_10s_then_releases_with_the_count():
    b = WatchOverflow()
    delivered, events = 0, []
    for i in range(18):
        ok, ev = b.allow(100.0 + i * 0.1)
        delivered += ok
        events += ev
    assert delivered == 15
    assert [e.kind for e in events] == [EventKind.TRIPPED]
    ok, ev = b.allow(110.0)  # still silent
    assert not ok and ev == []
    released = b.tick(100.0 + 1.5 + 30.0)
    assert [e.kind for e in released] == [EventKind.RELEASED]
    assert released[0].suppressed == 4  # the 16th, 17th, 18th and the one at t=110
    ok, ev = b.allow(140.0)
    assert ok and ev == []


def test_watch_overflow_does_not_trip_when_spread_out():
    b = WatchOverflow()
    assert all(b.allow(i * 1.0)[0] for i in range(40))


# -- the center over real sessions ------------------------------------------------------


def _poll_until(center, predicate) -> list:
    """The center's events, polled until ``predicate(events so far)`` holds."""
    got = []

    def more() -> bool:
        got.extend(center.poll())
        return predicate(got)

    wait_until(more, what="the events wanted")
    return got


def test_watch_match_event_is_redacted_and_capped(reg):
    lines = "; ".join(f"echo 'FAIL {i} password=hunter{i}'" for i in range(30))
    s = reg.spawn(f"{lines}; sleep 30", watch=["FAIL"])
    clock = Clock()
    center = NotificationCenter(reg, clock=clock)
    events = _poll_until(center, lambda ev: any(e.kind == EventKind.WATCH_MATCH for e in ev))
    match = next(e for e in events if e.kind == EventKind.WATCH_MATCH)
    assert match.session_id == s.id and match.pattern == "FAIL"
    assert 1 <= len(match.lines) <= 20
    assert all("hunter" not in line for line in match.lines)
    assert "hunter" not in match.text and "hunter" not in match.detail


def test_watch_progress_is_saved_so_a_restart_does_not_repeat(reg, home, settings):
    s = reg.spawn("echo 'ready now'; sleep 30", watch=["ready"])
    c1 = NotificationCenter(reg, clock=Clock())
    _poll_until(c1, lambda ev: any(e.kind == EventKind.WATCH_MATCH for e in ev))
    c1.close()
    c2 = NotificationCenter(ProcessRegistry(home, settings), clock=Clock(2000.0))
    assert [e for e in c2.poll() if e.session_id == s.id] == []


def test_completion_is_shown_once_across_two_centers_and_a_restart(reg, home, settings):
    s = reg.spawn("echo 'token sk-abcdefghijklmnopqrstuvwx12'; exit 2", notify=True)
    reg.wait(s.id, timeout=10)
    # No app was open when it completed: the next start shows it once.
    first = NotificationCenter(ProcessRegistry(home, settings)).poll(watch=False)
    second = NotificationCenter(ProcessRegistry(home, settings)).poll(watch=False)
    assert [e.kind for e in first] == [EventKind.COMPLETION]
    assert second == []
    ev = first[0]
    assert ev.session_id == s.id and ev.exit_code == 2 and not ev.ok
    assert "sk-abcdefghijkl" not in ev.detail and "token" in ev.detail
    assert ev.duration is not None and ev.duration >= 0


def test_no_completion_event_without_notify(reg):
    s = reg.spawn("true")
    reg.wait(s.id, timeout=10)
    assert NotificationCenter(reg).poll() == []


def test_completion_of_a_running_session_arrives_when_it_ends(reg, tmp_path):
    gate = tmp_path / "gate"  # it ends when the test lets it
    s = reg.spawn(f"while [ ! -e '{gate}' ]; do sleep 0.01; done; echo bye", notify=True)
    center = NotificationCenter(reg)
    assert center.poll() == []
    gate.touch()
    events = _poll_until(center, lambda ev: any(e.kind == EventKind.COMPLETION for e in ev))
    assert [e.session_id for e in events if e.kind == EventKind.COMPLETION] == [s.id]
    assert "bye" in events[-1].detail


def test_lifetime_cap_falls_back_to_notify_on_complete(reg, tmp_path):
    # The test paces the output: line i is printed once the gate file i exists, so each
    # poll sees exactly one new match, in a new cooldown window.
    script = (f"for i in $(seq 1 11); do while [ ! -e {tmp_path}/gate$i ]; do sleep 0.01; done; "
              "[ $i -le 10 ] && echo HIT $i; done; exit 0")
    s = reg.spawn(script, watch=["HIT"])
    clock = Clock()
    center = NotificationCenter(reg, clock=clock)
    got = []
    for i in range(1, 11):
        (tmp_path / f"gate{i}").touch()
        wait_until(lambda i=i: f"HIT {i}\n" in s.output_path.read_text(), what=f"line {i}")
        clock.t += 20  # a new cooldown window
        got += center.poll()
    (tmp_path / "gate11").touch()  # now it may end
    got += _poll_until(center, lambda ev: any(e.kind == EventKind.COMPLETION for e in got + ev))
    kinds = [e.kind for e in got if e.session_id == s.id]
    assert kinds.count(EventKind.WATCH_MATCH) == 8
    assert kinds.count(EventKind.WATCH_DISABLED) == 1
    assert kinds.index(EventKind.WATCH_DISABLED) > max(i for i, k in enumerate(kinds) if k == EventKind.WATCH_MATCH)
    assert kinds[-1] == EventKind.COMPLETION  # the fallback to notify-on-complete
    assert [e.lines for e in got if e.kind == EventKind.WATCH_MATCH][-1] == ("HIT 8",)


def test_watch_overflow_across_18_sessions(reg):
    sessions = [reg.spawn("echo BOOM; sleep 30", watch=["BOOM"]) for _ in range(18)]
    for s in sessions:
        wait_until(lambda s=s: "BOOM" in s.output_path.read_text(), what=f"{s.id}'s line")
    clock = Clock()
    center = NotificationCenter(reg, clock=clock)
    events = center.poll()
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.WATCH_MATCH) == 15
    assert kinds.count(EventKind.TRIPPED) == 1
    clock.t += 31
    later = center.poll()
    assert [e.kind for e in later] == [EventKind.RELEASED]
    assert later[0].suppressed == 3
