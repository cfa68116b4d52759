"""The prune and real processes: who gets TERM/KILL and who keeps an entry (the lineage,
registered-process and /proc rules of docs/scratch.md)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from engine import identity
from engine.scratch import execute as execute_mod
from engine.scratch.execute import execute_plan, prune_pass
from engine.scratch.plan import plan_prune
from engine.scratch.registered import RegistryUnreadable, registry_provider
from tests.support import wait_until
from tests.support.scratch import exited, in_cwd, log_text, make_entry, options, start_in, target_of


def test_s6_idle_sleeper_is_termed_live_sleeper_survives(home, children):
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle")
    live = make_entry(t.scratch_dir, "live")
    os.utime(live / "a" / "b" / "c" / "work.txt")
    a = start_in(children, ["sleep", "60"], idle)
    b = start_in(children, ["sleep", "60"], live)
    result = prune_pass(t, options())
    assert result.removed_count == 1 and not idle.exists() and live.exists()
    assert exited(a) and a.returncode == -signal.SIGTERM
    assert b.poll() is None
    assert [(s.pid, s.signal) for s in result.signalled] == [(a.pid, "SIGTERM")]
    assert f"sent TERM pid={a.pid} name='sleep' cwd={str(idle)!r}" in log_text(home)


def test_term_ignoring_process_gets_kill(home, children):
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle")
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    import subprocess

    p = children([sys.executable, "-c", code], cwd=idle, stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    result = prune_pass(t, options(grace=0.3))
    assert exited(p) and p.returncode == -signal.SIGKILL
    assert [s.signal for s in result.signalled] == ["SIGTERM", "SIGKILL"]
    assert f"sent KILL pid={p.pid} (still running after TERM)" in log_text(home)


def test_registered_process_keeps_its_entry_unregistered_one_is_termed(home, children):
    t = target_of(home)
    mine = make_entry(t.scratch_dir, "registered")
    stray = make_entry(t.scratch_dir, "stray")
    # a registered shell whose child (a descendant) does the work inside the entry
    reg = start_in(children, ["sh", "-c", "sleep 60; true"], mine)
    assert wait_until(lambda: any(in_cwd(int(d), mine) and identity.read_stat(int(d)).comm == b"sleep"
                                  for d in os.listdir("/proc") if d.isdigit()))
    other = start_in(children, ["sleep", "60"], stray)
    fp = identity.fingerprint(reg.pid)
    provider = lambda: [(reg.pid, fp, "hermes-tui session proc_test")]  # noqa: E731
    result = prune_pass(t, options(registered=provider))
    assert mine.exists() and not stray.exists()
    assert reg.poll() is None and exited(other)
    assert {s.pid for s in result.signalled} == {other.pid}
    text = log_text(home)
    assert f"kept {str(mine)!r} \u2014 live process pid=" in text
    assert "of hermes-tui session proc_test works inside" in text  # whose it is


def test_pid_reuse_does_not_make_a_process_registered(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    p = start_in(children, ["sleep", "60"], e)
    boot = identity.boot_id()
    provider = lambda: [(p.pid, f"{boot}|1", "stale row")]  # noqa: E731  (another start time)
    prune_pass(t, options(registered=provider))
    assert exited(p) and not e.exists()


def test_real_process_registry_session_keeps_its_entry(home, settings):
    from engine.processes import ProcessRegistry

    t = target_of(home)
    e = make_entry(t.scratch_dir, "session")
    reg = ProcessRegistry(home, settings)
    session = reg.spawn(["sleep", "60"], cwd=e)
    try:
        assert wait_until(lambda: any(in_cwd(int(d), e) for d in os.listdir("/proc") if d.isdigit()))
        result = prune_pass(t, options(registered=registry_provider(home, settings)))
        assert e.exists() and result.signalled == ()
        assert identity.is_alive(session.pid, session.fingerprint)
    finally:
        reg.kill(session.id, grace=0.5)
        reg.reap()


def test_launcher_lineage_inside_idle_entry_keeps_it_and_is_never_signalled(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "shell-here")
    shell = start_in(children, ["sleep", "60"], e)
    lineage = ((shell.pid, identity.fingerprint(shell.pid)),)
    result = prune_pass(t, options(lineage=lineage))
    assert e.exists() and shell.poll() is None and result.signalled == ()
    assert "this prune's own lineage pid=" in log_text(home)


def test_own_lineage_cwd_keeps_the_entry(home, tmp_path):
    """The pruning process itself works inside an idle entry: kept, and never signalled."""
    import subprocess

    t = target_of(home)
    e = make_entry(t.scratch_dir, "self")
    code = (
        "import sys; from pathlib import Path\n"
        "from engine.home import HomeLayout\n"
        "from engine.scratch.target import PruneTarget, PruneOptions\n"
        "from engine.scratch.execute import prune_pass\n"
        "r = prune_pass(PruneTarget.of(HomeLayout(Path(sys.argv[1]))), PruneOptions(quarantine_hours=0, arrival_hours=0))\n"
        "print(r.removed_count, len(r.signalled))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(home.root)], cwd=e, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, timeout=60)
    assert out.stdout.split() == ["0", "0"], out.stderr
    assert e.exists()


def test_non_utf8_comm_is_parsed_and_logged_on_one_line(home, children, tmp_path):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    link = os.path.join(os.fsencode(tmp_path), b"sl\xffp")
    os.symlink(b"/bin/sleep", link)
    p = children([link, b"60"], cwd=e)
    assert wait_until(lambda: in_cwd(p.pid, e) and identity.read_stat(p.pid).comm == b"sl\xffp")
    prune_pass(t, options())
    assert exited(p)
    lines = [ln for ln in log_text(home).splitlines() if "sent TERM" in ln]
    assert len(lines) == 1 and "name='sl\\udcffp'" in lines[0]


def test_non_utf8_comm_in_launcher_lineage_is_still_spared(home, children, tmp_path):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    link = os.path.join(os.fsencode(tmp_path), b"sh\xe2\x82")  # cut mid UTF-8 sequence
    os.symlink(b"/bin/sleep", link)
    p = children([link, b"60"], cwd=e)
    assert wait_until(lambda: in_cwd(p.pid, e) and identity.read_stat(p.pid).comm == b"sh\xe2\x82")
    result = prune_pass(t, options(lineage=((p.pid, identity.fingerprint(p.pid)),)))
    assert e.exists() and p.poll() is None and result.signalled == ()


def test_orphan_with_deleted_cwd_is_termed_even_with_nothing_to_prune(home, children):
    t = target_of(home)
    gone = make_entry(t.scratch_dir, "gone")
    p = start_in(children, ["sleep", "60"], gone)
    import shutil

    shutil.rmtree(gone)
    plan = plan_prune(t, options())
    assert plan.candidates == () and [s.pid for s in plan.signals] == [p.pid]
    execute_plan(t, plan, options())
    assert exited(p)


def test_directory_really_named_deleted_is_not_an_orphan(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "live")
    odd = e / "x (deleted)"
    odd.mkdir()
    p = start_in(children, ["sleep", "60"], odd)
    plan = plan_prune(t, options())
    assert plan.signals == ()
    execute_plan(t, plan, options())
    assert p.poll() is None and e.exists()


def test_unreadable_proc_deletes_nothing(home, children, monkeypatch):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    monkeypatch.setattr(identity, "_boot_id_cache", None)
    monkeypatch.setattr(identity, "_read_boot_id", lambda: None)  # fingerprints impossible
    plan = plan_prune(t, options())
    assert plan.candidates == () and plan.process_error
    assert "process check failed" in plan.kept[0].reason
    result = execute_plan(t, plan, options())
    assert e.exists() and result.process_error and not result.ok
    assert "process check failed, nothing deleted this pass" in log_text(home)


def test_process_check_that_raises_deletes_nothing(home, monkeypatch):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    opts = options()
    plan = plan_prune(t, opts)
    assert plan.candidates

    def boom(*a, **k):
        raise RuntimeError("cannot judge")

    monkeypatch.setattr(execute_mod, "judge_snapshot", boom)
    result = execute_plan(t, plan, opts)
    assert e.exists() and result.removed_count == 0
    assert "process check failed, nothing deleted this pass: RuntimeError: cannot judge" in log_text(home)


def test_unknown_lineage_signals_nobody_and_keeps_entries_with_processes(home, children):
    t = target_of(home)
    busy = make_entry(t.scratch_dir, "busy")
    empty = make_entry(t.scratch_dir, "empty")
    p = start_in(children, ["sleep", "60"], busy)
    result = prune_pass(t, options(lineage_error="no /proc in the launcher"))
    assert busy.exists() and not empty.exists() and p.poll() is None
    assert result.signalled == ()
    assert "lineage is unknown" in log_text(home)


def test_unreadable_registry_signals_nobody(home, children):
    t = target_of(home)
    busy = make_entry(t.scratch_dir, "busy")
    p = start_in(children, ["sleep", "60"], busy)

    def broken():
        raise RegistryUnreadable("cannot read the process registry: corrupt meta.json")

    result = prune_pass(t, options(registered=broken))
    assert busy.exists() and p.poll() is None and result.signalled == ()
    assert "corrupt meta.json" in log_text(home)


def test_process_arriving_after_the_plan_in_a_registered_way_keeps_the_entry(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts_plan = options()
    plan = plan_prune(t, opts_plan)
    assert [c.name for c in plan.candidates] == ["e"]
    p = start_in(children, ["sleep", "60"], e)
    fp = identity.fingerprint(p.pid)
    result = execute_plan(t, plan, options(registered=lambda: [(p.pid, fp, "late")]))
    assert e.exists() and p.poll() is None and result.removed_count == 0


def test_process_arriving_after_an_approved_plan_keeps_the_entry_and_is_not_signalled(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    other = make_entry(t.scratch_dir, "other")
    plan = plan_prune(t, options())
    assert plan.signals == ()
    p = start_in(children, ["sleep", "60"], e)
    result = execute_plan(t, plan, options())
    assert e.exists() and not other.exists() and p.poll() is None
    assert result.signalled == ()
    assert "started working inside after the plan" in log_text(home)


def test_another_users_process_keeps_its_entry_and_is_never_signalled(home, children, monkeypatch):
    """Faked boundary: we pretend to run as another uid, so the real child is 'theirs'."""
    from engine.scratch import procscan

    t = target_of(home)
    e = make_entry(t.scratch_dir, "theirs")
    p = start_in(children, ["sleep", "60"], e)
    monkeypatch.setattr(procscan.os, "getuid", lambda: 54321)
    result = prune_pass(t, options())
    assert e.exists() and p.poll() is None and result.signalled == ()
    assert "a process of another user pid=" in log_text(home)


def test_a_corrupt_session_in_the_real_registry_signals_nobody(home, settings, children):
    """The real registry (not a stub): one session folder with unreadable metadata may be a
    live registered process, so the pass spares every process and says why."""
    t = target_of(home)
    busy = make_entry(t.scratch_dir, "busy")
    p = start_in(children, ["sleep", "60"], busy)
    broken = home.processes_dir / "proc_0123456789ab"
    broken.mkdir(parents=True)
    (broken / "meta.json").write_text("{not json")
    result = prune_pass(t, options(registered=registry_provider(home, settings)))
    assert busy.exists() and p.poll() is None and result.signalled == ()
    assert "proc_0123456789ab" in log_text(home)


def test_a_process_that_survives_kill_is_reported_not_hidden(home, children, monkeypatch):
    """A process stuck in the kernel ignores even KILL; that cannot be made real here, so
    the /proc boundary keeps showing it alive after the (real) KILL. The pass must say so
    in the log and in its failures."""
    import subprocess

    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle")
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    p = children([sys.executable, "-c", code], cwd=idle, stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    alive_stat = identity._read_stat_bytes(p.pid)
    real_read = identity._read_stat_bytes
    killed = []
    real_send = identity.send_signal

    def send(pid, fp, sig, **kw):
        result = real_send(pid, fp, sig, **kw)
        if pid == p.pid and sig == signal.SIGKILL and result.sent:
            killed.append(pid)
        return result

    monkeypatch.setattr(identity, "send_signal", send)
    monkeypatch.setattr(identity, "_read_stat_bytes",
                        lambda pid: alive_stat if pid == p.pid and killed else real_read(pid))
    result = prune_pass(t, options(grace=0.3))
    assert killed == [p.pid]
    assert f"pid {p.pid} still running after KILL" in result.failures
    assert f"pid={p.pid} still running after KILL" in log_text(home)


def test_the_registries_are_read_only_when_a_process_works_inside(home, children):
    """Nobody inside scratch: nobody to judge, so the registries are not read (they
    cost the process engine's import and every session's files). One process inside:
    they are read, and a registered one keeps its entry."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    asked: list[bool] = []
    registered: list[tuple[int, str, str]] = []

    def provider():
        asked.append(True)
        return registered

    plan = plan_prune(t, options(registered=provider))
    assert asked == [] and [c.name for c in plan.candidates] == ["e"]
    p = start_in(children, ["sleep", "60"], e)
    registered.append((p.pid, identity.fingerprint(p.pid), "session-1"))
    plan = plan_prune(t, options(registered=provider))
    assert asked and plan.candidates == () and p.poll() is None


def test_nobody_inside_means_one_cwd_read_per_process_and_no_stat(home, children, monkeypatch):
    """The /proc pass reads every process's stat (fingerprint, ppid chain) only when
    some process works inside scratch or the quarantine; otherwise one readlink of each
    cwd is all it costs (red before: every process's stat was read). With one inside,
    every stat is read again and the process is found with its parents."""
    from engine.scratch.procscan import scan_processes

    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    roots = [str(t.scratch_dir), str(t.quarantine_dir)]
    real, read = identity.read_stat, []
    monkeypatch.setattr(identity, "read_stat", lambda pid: read.append(pid) or real(pid))
    snap = scan_processes(roots)
    assert snap.inside == () and read == [os.getpid()]  # only the pass's own check of itself
    p = start_in(children, ["sleep", "60"], e)
    read.clear()
    snap = scan_processes(roots)
    assert [x.pid for x in snap.inside] == [p.pid] and p.pid in read and os.getppid() in snap.parents
