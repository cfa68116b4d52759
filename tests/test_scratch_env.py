"""The scratch folder as TMPDIR of spawned commands, and its permissions (set by the
home and the process registry; pinned here because losing them would put scratch
files outside every pruner)."""

from __future__ import annotations

import os
import stat
import sys

from engine.home import HomeLayout
from engine.processes import ProcessRegistry
from engine.processes.supervisor import spawn_environment


def test_s1_home_only_env_gets_scratch_and_is_rederived_for_another_home(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    env = spawn_environment(home_root=a, scratch_dir=a / "cache" / "scratch", session_id="p1",
                            base={"HERMES_HOME": str(a)})
    want = str(a / "cache" / "scratch")
    assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == env["HERMES_SCRATCH_DIR"] == want
    again = spawn_environment(home_root=b, scratch_dir=b / "cache" / "scratch", session_id="p2", base=env)
    assert again["TMPDIR"] == again["HERMES_SCRATCH_DIR"] == str(b / "cache" / "scratch")


def test_s2_user_tmpdir_is_left_alone(tmp_path):
    env = spawn_environment(home_root=tmp_path, scratch_dir=tmp_path / "cache" / "scratch", session_id="p",
                            base={"TMPDIR": "/var/folders/zz"})
    assert env["TMPDIR"] == "/var/folders/zz"
    assert "HERMES_SCRATCH_DIR" not in env and "TMP" not in env


def test_s3_spawned_command_and_its_child_use_the_scratch_dir(home, settings, monkeypatch):
    for var in ("TMPDIR", "TMP", "TEMP", "HERMES_SCRATCH_DIR"):
        monkeypatch.delenv(var, raising=False)
    code = ("import tempfile, subprocess, sys; print(tempfile.gettempdir()); sys.stdout.flush(); "
            "subprocess.run([sys.executable, '-c', 'import tempfile; print(tempfile.gettempdir())'])")
    reg = ProcessRegistry(home, settings)
    session = reg.spawn([sys.executable, "-c", code], cwd=home.root)
    done = reg.wait(session.id, timeout=60)
    reg.reap()
    out = (home.processes_dir / session.id / "output.log").read_text().split()
    assert done.finished and out == [str(home.scratch_dir), str(home.scratch_dir)]
    assert home.scratch_dir.is_dir()


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_s5_scratch_permissions_follow_the_home_policy(tmp_path):
    home = HomeLayout(tmp_path / "h1").ensure()
    assert _mode(home.ensure_dir(home.scratch_dir)) == 0o700
    shared = HomeLayout(tmp_path / "h2").ensure(environ={"HERMES_HOME_MODE": "2770"})
    assert _mode(shared.ensure_dir(shared.scratch_dir, environ={"HERMES_HOME_MODE": "2770"})) == 0o2770
    managed = HomeLayout(tmp_path / "h3")
    managed.scratch_dir.mkdir(parents=True)
    os.chmod(managed.scratch_dir, 0o755)
    managed.managed_marker.write_text("")  # empty marker: still managed
    managed.ensure_dir(managed.scratch_dir)
    assert _mode(managed.scratch_dir) == 0o755
    other = HomeLayout(tmp_path / "h4")  # another home's marker has no effect here
    other.scratch_dir.mkdir(parents=True)
    os.chmod(other.scratch_dir, 0o750)
    other.ensure_dir(other.scratch_dir)
    # Issues 9 and 12: a directory that existed before keeps its mode (was: fixed to 0700);
    # what hermes-tui creates itself gets the policy.
    assert _mode(other.scratch_dir) == 0o750
    assert _mode(other.ensure_dir(other.quarantine_dir)) == 0o700
