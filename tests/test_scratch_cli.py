"""``hermes-tui scratch`` and ``hermes-tui prune`` through the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO, run_cli
from tests.support.scratch import NO_ARRIVAL_CONFIG, make_entry, prune_on_pty, target_of


def _cli(home, *args, **kw):
    return run_cli("--home", str(home.root), *args, **kw)


def _setup(home):
    if not home.config_file.exists():
        home.config_file.write_text(NO_ARRIVAL_CONFIG)
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle", {"a/big.bin": "x" * 5000})
    live = make_entry(t.scratch_dir, "live")
    os.utime(live / "a" / "b" / "c" / "work.txt")
    kept = make_entry(t.scratch_dir, "parked", {".scratch-keep": "", "notes": "n"})
    return t, idle, live, kept


def test_scratch_json_lists_every_entry_with_its_fields(home):
    _setup(home)
    out = _cli(home, "scratch", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_name = {e["name"]: e for e in doc["entries"]}
    assert set(by_name) == {"idle", "live", "parked"}
    for e in doc["entries"]:
        assert set(e) == {"name", "path", "state", "idle_seconds", "arrived_seconds", "size_bytes", "kept_reason", "pids"}
    assert by_name["idle"]["state"] == "idle" and by_name["idle"]["idle_seconds"] > 24 * 3600
    assert by_name["idle"]["size_bytes"] >= 5000
    assert by_name["live"]["state"] == "active" and by_name["live"]["kept_reason"] is None
    assert by_name["parked"]["state"] == "kept" and by_name["parked"]["kept_reason"] == ".scratch-keep marker"


def test_scratch_text_listing(home):
    _setup(home)
    out = _cli(home, "scratch")
    assert out.returncode == 0
    assert "idle" in out.stdout and ".scratch-keep marker" in out.stdout and "NAME" in out.stdout


def test_prune_without_terminal_or_flag_refuses(home):
    t, idle, *_ = _setup(home)
    out = _cli(home, "prune")
    assert out.returncode == 2
    assert "--dry-run" in out.stderr and "--yes" in out.stderr and "Traceback" not in out.stderr
    assert idle.exists()


def test_prune_dry_run_json_changes_nothing(home):
    t, idle, live, kept = _setup(home)
    out = _cli(home, "prune", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["dry_run"] is True and doc["removed_count"] == 1  # would be
    assert [q["path"] for q in doc["quarantined"]] == [str(idle)]
    assert {k["path"]: k["reason"] for k in doc["kept"]}[str(kept)] == ".scratch-keep marker"
    assert idle.exists() and not home.prune_log.exists()


def test_prune_failing_inside_the_pass_says_one_line_and_logs_one(home):
    """An unexpected error in the pass: one stderr line naming the error itself, exit 1,
    and the log holds the pass's own line for it, once."""
    _setup(home)
    code = (
        "import sys\n"
        "from engine.scratch import execute\n"
        "def boom(*a, **k):\n"
        "    raise RuntimeError('disk on fire')\n"
        "execute._execute = boom\n"
        "from hermes_tui.cli import main\n"
        f"sys.exit(main(['--home', {str(home.root)!r}, 'prune', '--yes']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "HERMES_DEBUG")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert out.returncode == 1
    assert out.stderr == ("hermes-tui: internal error: RuntimeError: disk on fire "
                          "(run with HERMES_DEBUG=1 for the traceback)\n")
    lines = home.prune_log.read_text().splitlines()
    assert [line for line in lines if "pass failed" in line] == [lines[-1]]
    assert lines[-1].endswith("scratch prune: pass failed: RuntimeError: disk on fire")


def test_prune_yes_json_then_restore(home):
    t, idle, live, kept = _setup(home)
    out = _cli(home, "prune", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["dry_run"] is False and doc["removed_count"] == 1
    assert doc["quarantined"][0]["path"] == str(idle) and doc["quarantined"][0]["size_bytes"] >= 5000
    assert set(doc) >= {"dry_run", "removed", "quarantined", "kept", "signalled", "removed_count"}
    assert not idle.exists() and live.exists() and kept.exists()
    listing = json.loads(_cli(home, "scratch", "--json").stdout)
    assert [q["name"] for q in listing["quarantined"]] == ["idle"]
    back = _cli(home, "scratch", "restore", "idle")
    assert back.returncode == 0, back.stderr
    assert (idle / "a" / "big.bin").exists()
    missing = _cli(home, "scratch", "restore", "idle")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1


def test_prune_idle_hours_flag_and_bad_values(home):
    t, idle, live, kept = _setup(home)
    wide = json.loads(_cli(home, "prune", "--dry-run", "--json", "--idle-hours", "100").stdout)
    assert wide["quarantined"] == []
    for bad in ("0", "-3", "abc", "nan"):
        out = _cli(home, "prune", "--dry-run", "--idle-hours", bad)
        assert out.returncode == 2 and "Traceback" not in out.stderr


def test_prune_with_quarantine_off_deletes(home):
    home.config_file.write_text(NO_ARRIVAL_CONFIG + "  quarantine_hours: 0\n")
    t, idle, *_ = _setup(home)
    doc = json.loads(_cli(home, "prune", "--yes", "--json").stdout)
    assert [r["path"] for r in doc["removed"]] == [str(idle)] and doc["quarantined"] == []
    assert not idle.exists() and not home.quarantine_dir.exists()


def test_bad_config_is_exit_2(home):
    home.config_file.write_text("scratch:\n  idle_hours: soon\n")
    out = _cli(home, "scratch")
    assert out.returncode == 2 and "config.yaml:2" in out.stderr


def test_prune_on_a_terminal_shows_the_plan_and_no_changes_nothing(home):
    t, idle, *_ = _setup(home)
    rc, out = prune_on_pty(home, b"\n")
    assert rc == 0 and "Prune now? [y/N]" in out and "idle" in out and "Nothing was changed" in out
    assert idle.exists()


def test_prune_on_a_terminal_yes_prunes(home):
    t, idle, *_ = _setup(home)
    rc, out = prune_on_pty(home, b"y\n")
    assert rc == 0 and "1 entry pruned" in out
    assert not idle.exists()
