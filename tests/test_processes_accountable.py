"""Every session stays accountable: a command runs only once its session is recorded;
folders of spawns that never started count for nothing; one malformed session is one
line and skipped; a session whose wrapper was killed can still be stopped."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time

import pytest

from engine import identity
from engine.config import Settings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry, SpawnFailed
from engine.processes import registry as registry_mod
from engine.processes import start as start_mod
from engine.processes.session import STATE_STARTING, SessionCorrupt
from engine.scratch.registered import registry_provider
from tests.support import run_cli, wait_until


@pytest.fixture
def reg(home):
    registry = ProcessRegistry(home, Settings())
    yield registry
    for s in registry.list(include_finished=False):
        registry.kill(s.id, grace=0.2)


# -- recorded, then started ------------------------------------------------------------


def test_a_session_that_cannot_be_recorded_never_runs_its_command(reg, home, tmp_path, monkeypatch):
    """The disk fills between the wrapper's start and the session's record (the one
    boundary faked: the write of the final record fails with ENOSPC). The command is
    gated on that record, so it never runs, and its folder is gone."""
    marker = tmp_path / "ran"
    real = start_mod.write_meta_record

    def full_disk_for_the_record(d, meta, *a, **k):
        if meta.get("state") != STATE_STARTING:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(d, meta, *a, **k)

    monkeypatch.setattr(start_mod, "write_meta_record", full_disk_for_the_record)
    with pytest.raises(SpawnFailed, match="No space left on device.*did not run"):
        reg.spawn(["touch", str(marker)])
    assert not marker.exists()  # the wrapper has exited when spawn returns: it never will
    assert os.listdir(home.processes_dir) == []


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs (we run as root in CI); skipped where mounting is not allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_run_bg_on_a_full_disk_reports_failure_and_the_command_never_ran(small_disk, tmp_path):
    home = small_disk / "home"
    root = str(home)
    layout = HomeLayout(home).ensure()
    layout.ensure_dir(layout.processes_dir)
    layout.ensure_dir(layout.scratch_dir)
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:  # fill the disk to the last byte
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    marker = tmp_path / "ran"
    r = run_cli("--home", root, "run", "--bg", "--", "touch", str(marker))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "No space left on device" in r.stderr and "did not run" in r.stderr
    assert not marker.exists()
    assert [n for n in os.listdir(home / "processes") if n.startswith("proc_")] == []


# -- folders of spawns that never started ----------------------------------------------


def _not_started(home, name: str, meta: dict | None) -> None:
    d = home.processes_dir / name
    d.mkdir(parents=True)
    if meta is not None:
        (d / "meta.json").write_text(json.dumps(meta))


def test_folders_of_spawns_that_never_started_are_ignored_and_cleaned(reg, home, children):
    s = reg.spawn(["sleep", "30"])
    _not_started(home, "proc_00000000aaaa", {"id": "proc_00000000aaaa", "state": STATE_STARTING,
                                            "command": "x", "cwd": "/"})
    _not_started(home, "proc_00000000bbbb", None)  # died between mkdir and its first record
    assert [x.id for x in reg.list()] == [s.id]
    assert reg.problems() == []
    # The pruner's registered-process rule keeps working: no SessionCorrupt, no fail-closed.
    assert [sid for _p, _f, sid in reg.live_processes()] == [s.id]
    # the pruner's own seam (its label says whose the session is)
    assert [label for _p, _f, label in registry_provider(home, Settings())()] == [f"hermes-tui session {s.id}"]
    ps = run_cli("--home", str(home.root), "ps")
    assert ps.returncode == 0 and s.id in ps.stdout and ps.stderr == ""
    # Young folders may belong to a spawn still recording: kept. Abandoned ones: removed.
    assert reg.remove_abandoned_starts() == []
    old = time.time() - registry_mod.ABANDONED_START_SECONDS - 60
    for name in ("proc_00000000aaaa", "proc_00000000bbbb"):
        for path in (home.processes_dir / name, home.processes_dir / name / "meta.json"):
            if path.exists():
                os.utime(path, (old, old))
    assert sorted(reg.remove_abandoned_starts()) == ["proc_00000000aaaa", "proc_00000000bbbb"]
    assert sorted(os.listdir(home.processes_dir)) == sorted([s.id, *(
        n for n in os.listdir(home.processes_dir) if not n.startswith("proc_"))])


# -- malformed metadata ------------------------------------------------------------------

MALFORMED = {
    "proc_0000000000a1": b'{"id": "proc_0000000000a1", "cwd": "CWD", "pid": 12',  # truncated
    "proc_0000000000a2": json.dumps({"id": "proc_0000000000a2", "pid": "123", "cwd": "CWD"}).encode(),
    "proc_0000000000a3": json.dumps({"id": "proc_0000000000a3", "pid": 10**30, "cwd": "CWD"}).encode(),
    "proc_0000000000a4": json.dumps({"id": "proc_0000000000ff", "pid": 1234, "cwd": "CWD"}).encode(),
    "proc_0000000000a5": json.dumps({"id": "proc_0000000000a5", "pid": 1234, "cwd": "CWD",
                                     "started_at": "yesterday", "command": ["not", "a", "str"]}).encode(),
}


def test_each_malformed_session_is_one_line_and_everything_else_works(reg, home, tmp_path, children):
    workdir = tmp_path / "work"
    workdir.mkdir()
    good = reg.spawn(["sleep", "30"])
    for name, raw in MALFORMED.items():
        _not_started(home, name, None)
        (home.processes_dir / name / "meta.json").write_bytes(raw.replace(b"CWD", str(workdir).encode()))
    assert [x.id for x in reg.list()] == [good.id]
    problems = reg.problems()
    assert [p.message.split(":")[0] for p in problems] == sorted(MALFORMED)
    assert all(p.cwd == str(workdir) for p in problems)
    ps = run_cli("--home", str(home.root), "ps", "--all")
    assert ps.returncode == 0 and good.id in ps.stdout
    lines = ps.stderr.splitlines()
    assert len(lines) == len(MALFORMED) and all(line.startswith("hermes-tui: proc_") for line in lines)
    assert "Traceback" not in ps.stderr and "internal error" not in ps.stderr
    for name in MALFORMED:
        r = run_cli("--home", str(home.root), "proc", "poll", name)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and name in r.stderr
    # The pruner's rule: the good session is registered, and so is any live process under
    # the cwd a malformed session names (it may be that session's): spared, not signalled.
    inside = children(["sleep", "30"], cwd=workdir)
    elsewhere = children(["sleep", "30"], cwd=tmp_path)
    wait_until(lambda: os.readlink(f"/proc/{inside.pid}/cwd") == str(workdir), what="child cwd")
    live = registry_provider(home, Settings())()  # what the pruner asks
    pids = {pid for pid, _fp, _label in live}
    assert good.pid in pids and inside.pid in pids and elsewhere.pid not in pids
    assert all(identity.is_alive(pid, fp) for pid, fp, _label in live)


def test_a_malformed_session_without_a_readable_cwd_fails_closed_everywhere(reg, home):
    _not_started(home, "proc_0000000000b1", None)
    (home.processes_dir / "proc_0000000000b1" / "meta.json").write_bytes(b'{"id": "proc_00')
    with pytest.raises(SessionCorrupt, match="proc_0000000000b1"):
        reg.live_processes()


# -- the wrapper killed with kill -9 -------------------------------------------------------


def test_a_session_whose_wrapper_was_killed_is_lost_and_proc_kill_still_stops_it(reg, home, tmp_path):
    gone = tmp_path / "command-ended"
    s = reg.spawn(f"trap 'touch {gone}; exit 0' TERM; echo up; while :; do sleep 0.05; done")
    wait_until(lambda: "up" in s.output_path.read_text(), what="command running")
    command_pids = [pid for pid in identity.group_members(s.pid) if pid != s.pid]
    assert command_pids
    os.kill(s.pid, signal.SIGKILL)  # the supervising wrapper only
    reg.wait(s.id, timeout=20)
    wait_until(lambda: reg.get(s.id).status == "lost", what="lost")
    assert any(identity.read_stat(pid) is not None for pid in command_pids)  # the command runs on
    r = run_cli("--home", str(home.root), "proc", "kill", s.id, "--grace", "5")
    assert r.returncode == 0, r.stderr
    assert "killed" in r.stdout and "wrapper" in r.stdout and "SIGTERM" in r.stdout
    wait_until(gone.exists, what="the command's TERM trap")  # it got our TERM
    wait_until(lambda: not any(identity.is_alive(pid, identity.fingerprint(pid)) for pid in command_pids),
             what="command gone")
    assert reg.get(s.id).status == "killed"


def test_the_real_prune_spares_a_malformed_sessions_cwd_and_works_everywhere_else(home, children):
    """End to end through the real pruner: one session with a malformed meta.json (an
    impossible pid) that names an idle entry as its cwd, and a folder of a spawn that
    never started. The entry the malformed session may work in is kept and its process
    spared; another idle entry with a stranger in it is pruned and the stranger TERMed
    (before: one unreadable session switched all signalling off)."""
    from engine.scratch.execute import prune_pass
    from tests.support.scratch import make_entry, options, target_of

    t = target_of(home)
    theirs = make_entry(t.scratch_dir, "theirs")
    stranger_entry = make_entry(t.scratch_dir, "stranger")
    session = children(["sleep", "60"], cwd=theirs)
    stranger = children(["sleep", "60"], cwd=stranger_entry)
    for p, where in ((session, theirs), (stranger, stranger_entry)):
        wait_until(lambda p=p, where=where: os.readlink(f"/proc/{p.pid}/cwd") == str(where), what="cwd")
        wait_until(lambda p=p: identity.read_stat(p.pid).comm == b"sleep", what="exec")
    _not_started(home, "proc_0000000000d1", None)
    (home.processes_dir / "proc_0000000000d1" / "meta.json").write_text(
        json.dumps({"id": "proc_0000000000d1", "pid": 10**30, "cwd": str(theirs), "command": "sleep 60"}))
    _not_started(home, "proc_0000000000d2", {"id": "proc_0000000000d2", "state": STATE_STARTING})
    result = prune_pass(t, options(registered=registry_provider(home, Settings())))
    assert theirs.exists() and session.poll() is None
    assert not stranger_entry.exists()
    assert [(s.pid, s.signal) for s in result.signalled] == [(stranger.pid, "SIGTERM")]
    stranger.wait(timeout=20)
