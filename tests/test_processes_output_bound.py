"""A session's stored output within its bound (processes.max_output_bytes): head and
tail kept, one marker line between, byte offsets unchanged for followers; the output
keeper that cuts it, started by the spawn and gone once nothing runs. Real processes,
real files with real holes (ext4 or tmpfs), paced by gate files."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.config import Settings
from engine.processes import ProcessRegistry
from engine.processes import output_bound as ob
from engine.processes.follower import OutputFollower, read_tail
from engine.processes.keeper import LOCK_FILE, Keeper, keeper_running
from tests.support import wait_until
from tests.support.cli import run_cli

MIB = 1 << 20
LINE = re.compile(rb"^line (\d+) x+$")

# Writes `steps` pieces of about 1 MiB of numbered lines; before piece k (k >= 1) it
# waits for the gate file "<gates>/k", so the test looks at the stored size between pieces.
WRITER = r"""
import os, sys, time
gates, steps, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 0
out = sys.stdout.buffer
for k in range(steps):
    if k:
        while not os.path.exists(os.path.join(gates, str(k))):
            time.sleep(0.01)
    for _ in range(per):
        out.write(b"line %d " % n + b"x" * 40 + b"\n")
        n += 1
    out.flush()
"""


def _registry(home, bound: int) -> ProcessRegistry:
    s = Settings()
    return ProcessRegistry(home, replace(s, processes=replace(s.processes, max_output_bytes=bound)))


def _writer(tmp_path: Path, steps: int) -> tuple[list[str], Path]:
    gates = tmp_path / "gates"
    gates.mkdir()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    per = MIB // 48  # lines of 48 bytes: about 1 MiB a piece
    return [sys.executable, str(script), str(gates), str(steps), str(per)], gates


def _stored(path: Path) -> int:
    return ob.stored_bytes(os.stat(path))


def _check_stream(data: bytes, last: int) -> None:
    """Numbered lines in order, marker lines between, a cut line only right after a
    marker, no zero byte anywhere: what a reader of a cut output must see."""
    assert b"\0" not in data
    lines = data.split(b"\n")
    assert lines[-1] == b""
    body = lines[:-1]
    is_marker = [b"bytes of output left out here" in ln or b"were cut while being read" in ln for ln in body]
    seen = -1
    jumped = False
    for i, line in enumerate(body):
        if is_marker[i]:
            jumped = True
            continue
        if not line:
            continue
        m = LINE.match(line)
        if m is None:
            # The line the cut went through: only right before or after a marker.
            near = (i + 1 < len(body) and is_marker[i + 1]) or (i > 0 and is_marker[i - 1])
            assert near, f"a broken line away from any marker: {line[:60]!r}"
            continue
        n = int(m.group(1))
        assert n > seen, f"line {n} after line {seen}"
        if not jumped:
            assert n == seen + 1, f"line {n} follows {seen} with no marker between"
        seen, jumped = n, False
    assert seen == last
    assert any(is_marker)


def test_cut_keeps_head_marker_and_tail_and_offsets(tmp_path):
    path = tmp_path / "out.log"
    with open(path, "wb") as fh:
        for i in range(200_000):
            fh.write(b"line %d " % i + b"x" * 40 + b"\n")
    size = path.stat().st_size
    cut = ob.cut_middle(str(path), MIB)
    assert cut is not None
    assert path.stat().st_size == size  # offsets of every reader stay right
    assert _stored(path) <= 2 * MIB
    with OutputFollower(path) as f:
        data = f.read_all().data
    _check_stream(data, 199_999)
    assert data.startswith(b"line 0 ")
    assert f"{cut.left_out} bytes of output left out here".encode() in data
    # Under the bound again: nothing more to cut.
    assert ob.cut_middle(str(path), MIB) is None
    # The tail of a cut file is read from its data only.
    tail = read_tail(path, lines=3)
    assert tail.text.splitlines()[-1].startswith("line 199999 ")


def test_a_file_under_twice_the_bound_is_left_alone(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"y" * (2 * MIB))
    assert ob.cut_middle(str(path), MIB) is None
    assert _stored(path) == 2 * MIB


@pytest.mark.slow
def test_30_mb_under_a_1_mib_bound_stores_under_2_5_mib_and_a_follower_sees_a_whole_stream(home, tmp_path):
    reg = _registry(home, MIB)
    argv, gates = _writer(tmp_path, 30)
    s = reg.spawn(argv)
    follower = OutputFollower(s.output_path)
    seen = bytearray()
    try:
        for k in range(1, 30):
            # Between the writer's pieces: the keeper keeps the stored bytes within
            # about twice the bound (one piece of 1 MiB may land before its next look).
            wait_until(lambda: _stored(s.output_path) <= 2 * MIB + MIB // 2 or s.output_path.stat().st_size < 3 * MIB,
                       timeout=60, what="the keeper cut the output")
            if k % 3 == 0:
                seen += follower.read_all().data  # a follower reading while it is cut
            (gates / str(k)).touch()
        reg.wait(s.id, timeout=120)
        wait_until(lambda: _stored(s.output_path) <= 2 * MIB + MIB // 2, timeout=60, what="the last cut")
        seen += follower.read_all().data
    finally:
        follower.close()
    total_lines = 30 * (MIB // 48)
    assert s.output_path.stat().st_size > 29 * MIB
    assert _stored(s.output_path) < 2.5 * MIB
    with OutputFollower(s.output_path) as f:
        whole = f.read_all().data
    _check_stream(whole, total_lines - 1)
    assert whole.startswith(b"line 0 ")
    _check_stream(bytes(seen), total_lines - 1)
    # `proc log` prints the head, the marker and the tail; --tail reads only the tail.
    env = {"HERMES_HOME": str(home.root)}
    out = run_cli("proc", "log", s.id, "--json", env=env)
    assert out.returncode == 0, out.stderr
    import json

    _check_stream(json.loads(out.stdout)["output"].encode(), total_lines - 1)
    tail = run_cli("proc", "log", s.id, "--tail", "1", env=env)
    assert tail.stdout.startswith(f"line {total_lines - 1} ")


def test_the_keeper_ends_once_nothing_bounded_runs(home, tmp_path):
    reg = _registry(home, MIB)
    gate = tmp_path / "go"
    s = reg.spawn(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"])
    wait_until(lambda: keeper_running(reg.root), timeout=30, what="a keeper for the home")
    gate.touch()
    reg.wait(s.id, timeout=30)
    wait_until(lambda: not keeper_running(reg.root), timeout=60, what="the keeper to end")
    assert (reg.root / LOCK_FILE).exists()


@pytest.mark.parametrize("group_too", [True, False], ids=["group-killed", "child-lives-on"])
def test_a_session_killed_with_kill_is_forgotten_once_nothing_of_it_runs(home, tmp_path, group_too):
    """A wrapper killed with KILL records no exit: the keeper watched that session, and
    lived on, forever (one idle keeper per such home). It forgets the session once
    nothing of it runs: at once when the whole group is gone, only after the last
    process of the group when a child outlived the wrapper."""
    import signal

    from engine.processes.keeper import keeper_pid

    reg = _registry(home, MIB)
    gate = tmp_path / "go"
    s = reg.spawn(["sh", "-c", f"sleep 600 & while [ ! -e {gate} ]; do sleep 0.05; done"])
    wait_until(lambda: keeper_pid(reg.root), timeout=30, what="a keeper for the home")
    keeper = keeper_pid(reg.root)
    # The command runs (a wrapper killed at its gate leaves nothing that writes).
    wait_until(lambda: any(p.name == "sleep" for p in _group(s.pid)), timeout=30, what="the command")
    popen = reg.popen_of(s.id)
    if group_too:
        os.killpg(s.pid, signal.SIGKILL)
    else:
        os.kill(s.pid, signal.SIGKILL)  # the wrapper only: its command and the sleep live on
    popen.wait(timeout=30)  # reaped: no zombie holds the group
    assert not (s.output_path.parent / "exit").exists()
    if not group_too:
        gate.touch()  # the command ends; its sleep still holds the group
        wait_until(lambda: not any(p.name == "sh" for p in _group(s.pid)), timeout=30, what="the command's end")
        looker = Keeper(reg.root)  # a keeper's listing, step by step
        looker.list_sessions()
        assert s.id in looker.watched  # the sleep may still write
        assert keeper_pid(reg.root) == keeper
        os.killpg(s.pid, signal.SIGKILL)
        wait_until(lambda: not _group(s.pid), timeout=30, what="the sleep's end")
        looker.list_sessions()
        assert looker.watched == {}
    wait_until(lambda: not keeper_running(reg.root), timeout=60, what="the keeper to end")


def _group(pgid: int) -> list:
    from engine import identity

    return list(identity.group_members(pgid).values())


def test_a_session_without_a_bound_starts_no_keeper_and_is_never_cut(home, tmp_path):
    reg = _registry(home, 0)
    s = reg.spawn(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' 'z'"])
    reg.wait(s.id, timeout=30)
    keeper = Keeper(reg.root)
    keeper.list_sessions()
    assert keeper.watched == {}
    assert not (reg.root / LOCK_FILE).exists()
    assert _stored(s.output_path) >= 3_000_000 - 4096


def test_the_bound_is_recorded_per_session_and_shown(home, tmp_path):
    env = {"HERMES_HOME": str(home.root)}
    out = run_cli("run", "--bg", "--max-output", "2MiB", "--", "sh", "-c", "echo hi", env=env)
    assert out.returncode == 0, out.stderr
    sid = out.stdout.strip().split()[-1]
    run_cli("proc", "wait", sid, "--timeout", "30", env=env)
    ps = run_cli("ps", "--all", "--json", env=env)
    import json

    row = next(r for r in json.loads(ps.stdout) if r["id"] == sid)
    assert row["max_output_bytes"] == 2 * MIB
    assert row["stored_bytes"] == 3
    bad = run_cli("run", "--bg", "--max-output", "lots", "--", "true", env=env)
    assert bad.returncode == 2 and "--max-output" in bad.stderr and "Traceback" not in bad.stderr


def test_a_cut_follower_in_the_middle_says_what_it_missed(tmp_path):
    path = tmp_path / "out.log"
    with open(path, "wb") as fh:
        for i in range(100_000):
            fh.write(b"line %d " % i + b"x" * 40 + b"\n")
    f = OutputFollower(path, offset=3 * MIB)  # it was reading what is about to be cut
    ob.cut_middle(str(path), MIB)
    data = f.read_all().data
    f.close()
    assert data.startswith(b"\n... hermes-tui: ")
    assert b"were cut while being read" in data.split(b"\n")[1]
    assert b"\0" not in data


def test_a_cutter_stopped_after_the_marker_leaves_a_readable_file(tmp_path, monkeypatch):
    path = tmp_path / "out.log"
    with open(path, "wb") as fh:
        for i in range(100_000):
            fh.write(b"line %d " % i + b"x" * 40 + b"\n")

    def stopped(*_a):
        raise ob.CannotCut(95, "stopped between the marker and the hole")

    monkeypatch.setattr(ob, "punch_hole", stopped)
    with pytest.raises(ob.CannotCut):
        ob.cut_middle(str(path), MIB)
    with OutputFollower(path) as f:
        data = f.read_all().data
    assert b"\0" not in data and b"left out here" in data
    monkeypatch.undo()
    assert ob.cut_middle(str(path), MIB) is not None  # the next cut finishes it
    assert _stored(path) <= 2 * MIB



def test_a_session_that_ends_before_the_keeper_looks_is_still_cut(home):
    reg = _registry(home, MIB)
    first = reg.spawn(["sh", "-c", "true"])  # starts the keeper; it may be looking elsewhere now
    reg.wait(first.id, timeout=30)
    s = reg.spawn(["sh", "-c", "yes 0123456789abcdef0123456789abcdef | head -c 8000000"])
    reg.wait(s.id, timeout=60)
    wait_until(lambda: _stored(s.output_path) <= 2 * MIB + MIB // 2, timeout=60, what="the cut after its exit")
    with OutputFollower(s.output_path) as f:
        data = f.read_all().data
    assert b"left out here" in data and b"\0" not in data


def test_one_listing_reads_proc_once_however_many_sessions_lost_their_wrapper(home, tmp_path, monkeypatch):
    """Each session whose wrapper was killed with KILL while its group lives on was
    looked up with a pass over all of /proc, each listing: now one pass serves them all."""
    import signal

    from engine import identity

    reg = _registry(home, MIB)
    gate = tmp_path / "go"
    sessions = [reg.spawn(["sh", "-c", f"sleep 600 & while [ ! -e {gate} ]; do sleep 0.05; done"])
                for _ in range(3)]
    try:
        for s in sessions:
            # The command runs (a wrapper killed at its gate leaves nothing that writes).
            wait_until(lambda s=s: any(p.name == "sleep" for p in _group(s.pid)), timeout=30, what="the command")
            popen = reg.popen_of(s.id)
            os.kill(s.pid, signal.SIGKILL)  # the wrapper only: its command and the sleep live on
            popen.wait(timeout=30)
        passes = []
        real = identity.live_groups

        def counted():
            passes.append(1)
            return real()

        monkeypatch.setattr(identity, "live_groups", counted)
        looker = Keeper(reg.root)
        looker.list_sessions()
        assert sorted(looker.watched) == sorted(s.id for s in sessions)  # each group still may write
        assert len(passes) == 1
    finally:
        for s in sessions:
            try:
                os.killpg(s.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
