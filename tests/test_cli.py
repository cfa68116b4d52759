"""The CLI skeleton and doctor, through the real command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli
from tests.support import wait_until


def _imports_after(argv: list[str], home) -> set[str]:
    code = (
        "import sys\n"
        "from hermes_tui.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(repr(sorted(m for m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "HERMES_HOME": str(home)})
    return set(eval(out.stderr.strip().splitlines()[-1]))


def test_help_does_not_import_textual(tmp_path):
    mods = _imports_after(["--help"], tmp_path)
    assert "hermes_tui.cli" in mods
    assert not {m for m in mods if m == "textual" or m.startswith("textual.")}
    assert "widgets" not in mods


def test_doctor_does_not_import_textual(tmp_path):
    mods = _imports_after(["doctor"], tmp_path)
    assert "engine.doctor" in mods
    assert not {m for m in mods if m == "textual" or m.startswith("textual.")}


def test_help_and_version():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "doctor" in result.stdout and "--home" in result.stdout and "--demo" in result.stdout
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("hermes-tui ")


def test_unknown_command_is_usage_error():
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr and "Traceback" not in result.stderr


def test_app_without_terminal_refuses_cleanly(tmp_path):
    result = run_cli("--home", str(tmp_path / "h"))
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr


def test_doctor_json_reports_the_home(tmp_path):
    home = tmp_path / "h"
    scratch = home / "cache" / "scratch" / "entry"
    scratch.mkdir(parents=True)
    (scratch / "f").write_bytes(b"x" * 5000)
    result = run_cli("--home", str(home), "doctor", "--json", env={"TMPDIR": "/var/tmp"})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["home"] == str(home)
    assert data["config_ok"] is True and data["config_error"] is None
    assert data["scratch_bytes"] >= 5000
    assert data["tmpdir_user_set"] is True and data["tmpdir"] == "/var/tmp"
    assert data["pidfd_available"] is True
    assert data["large_cache_dirs"] == []


def test_doctor_tells_our_tmpdir_from_the_users(tmp_path):
    home = tmp_path / "h"
    ours = str(home / "cache" / "scratch")
    result = run_cli("--home", str(home), "doctor", "--json", env={"TMPDIR": ours, "HERMES_SCRATCH_DIR": ours})
    assert json.loads(result.stdout)["tmpdir_user_set"] is False
    text = run_cli("--home", str(home), "doctor", env={"TMPDIR": "/elsewhere"}).stdout
    assert "TMPDIR      set by you to /elsewhere" in text


def test_doctor_flags_big_unpruned_cache_folders(tmp_path):
    """A sparse 1.5 GiB file: real size reporting without writing 1.5 GiB."""
    home = tmp_path / "h"
    big = home / "cache" / "models"
    big.mkdir(parents=True)
    with open(big / "weights.bin", "wb") as fh:
        fh.truncate(1536 * 1024 * 1024)
    pruned = home / "cache" / "scratch"
    pruned.mkdir()
    with open(pruned / "huge", "wb") as fh:
        fh.truncate(2 * 1024**3)
    data = json.loads(run_cli("--home", str(home), "doctor", "--json").stdout)
    assert [d["path"] for d in data["large_cache_dirs"]] == [str(big)]
    assert "no pruner covers it" in run_cli("--home", str(home), "doctor").stdout


def test_doctor_creates_nothing(tmp_path):
    home = tmp_path / "never"
    result = run_cli("--home", str(home), "doctor")
    assert result.returncode == 0
    assert "not created yet" in result.stdout
    assert not home.exists()


def test_home_mode_error_is_one_line(tmp_path):
    result = run_cli("--home", str(tmp_path / "h"), env={"HERMES_HOME_MODE": "rwx"})
    assert result.returncode == 2
    assert result.stderr.strip() == "hermes-tui: home: HERMES_HOME_MODE must be an octal mode such as 0700, got 'rwx'"


def test_a_cli_command_starts_the_hourly_scratch_pass_detached(tmp_path):
    """`kanban create` is not a prune command, but once it has succeeded it starts the
    automatic pass (once an hour per home) in a detached child: the stamp is written and
    the idle entry goes. (Changed: this used `ps`, which is read-only and no longer starts
    the pass, issue 11.)"""
    import time

    home = tmp_path / "h"
    idle = home / "cache" / "scratch" / "old-run"
    idle.mkdir(parents=True)
    (idle / "f").write_text("x")
    old = time.time() - 3 * 86400
    os.utime(idle / "f", (old, old))
    os.utime(idle, (old, old))
    (home / "config.yaml").write_text("scratch:\n  arrival_hours: 0\n")  # os.utime cannot age its arrival
    result = run_cli("--home", str(home), "kanban", "create", "a card", env={"HERMES_AUTO_PRUNE": ""})
    assert result.returncode == 0, result.stderr
    stamp = home / "cache" / "scratch" / ".last_prune"
    assert stamp.exists()
    wait_until(lambda: not idle.exists(), what="the idle entry pruned")
    assert "old-run" in (home / "logs" / "scratch-prune.log").read_text()
    # Within the hour, a second command starts nothing. A pass is started only after its
    # stamp is touched, so an untouched stamp shows, when the command returns, that none was.
    stamped = stamp.stat().st_mtime_ns
    idle.mkdir()
    os.utime(idle, (old, old))
    run_cli("--home", str(home), "kanban", "create", "another", env={"HERMES_AUTO_PRUNE": ""})
    assert stamp.stat().st_mtime_ns == stamped
    assert idle.exists()


@pytest.mark.parametrize("argv", [
    ["ps"], ["ps", "--all"], ["scratch"], ["doctor"], ["kanban", "list"], ["proc", "poll", "proc_nope"],
    ["kanban", "show", "999"], ["kanban", "assign", "999", "nobody"], ["proc", "kill", "proc_nope"],
])
def test_read_only_and_failing_commands_never_start_the_pass(tmp_path, argv):
    """Issue 11: read-only commands and commands that fail start no automatic pass (the
    stamp is written before a pass starts, so no stamp means no pass)."""
    home = tmp_path / "h"
    (home / "cache" / "scratch").mkdir(parents=True)
    run_cli("--home", str(home), *argv, env={"HERMES_AUTO_PRUNE": ""})
    assert not (home / "cache" / "scratch" / ".last_prune").exists()


def test_hermes_auto_prune_0_keeps_the_cli_from_pruning(tmp_path):
    home = tmp_path / "h"
    (home / "cache" / "scratch").mkdir(parents=True)
    assert run_cli("--home", str(home), "ps", env={"HERMES_AUTO_PRUNE": "0"}).returncode == 0
    assert not (home / "cache" / "scratch" / ".last_prune").exists()


def test_numeric_flags_are_checked_with_one_clear_line(tmp_path):
    for argv, message in (
        (["proc", "log", "x", "--tail", "-1"], "argument --tail: must be a whole number >= 0, got '-1'"),
        (["proc", "wait", "x", "--timeout", "nan"], "argument --timeout: must be a positive number of seconds"),
        (["prune", "--idle-hours", "inf"], "argument --idle-hours: must be a positive number of hours"),
    ):
        result = run_cli("--home", str(tmp_path / "h"), *argv)
        assert result.returncode == 2, argv
        assert message in result.stderr and "Traceback" not in result.stderr


def test_the_help_index_matches_what_each_command_registers():
    """`--help` lists commands from an index (no module imported); each line must be the
    one the command's own module registers, and every command must resolve."""
    import argparse

    from hermes_tui.cli import COMMANDS, build_parser, command_in

    for name, (_module, line) in COMMANDS.items():
        parser = build_parser(name)
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        registered = {c.dest: c.help for c in action._choices_actions}
        assert registered[name] == line, name
        assert action.choices[name].add_help, f"{name} got a placeholder, not its real parser"
    assert command_in(["--home", "doctor", "ps", "--all"]) == "ps"
    assert command_in(["--home=/x", "kanban", "list"]) == "kanban"
    assert command_in(["--demo"]) is None and command_in(["nope"]) is None


def test_every_command_has_its_own_help():
    for name in ("doctor", "run", "ps", "proc", "kanban", "scratch", "prune"):
        result = run_cli(name, "--help")
        assert result.returncode == 0, name
        assert f"usage: hermes-tui {name}" in result.stdout


def test_the_dataclasses_every_command_loads_have_docstrings():
    """A dataclass without a docstring gets one written with inspect.signature when its
    module is imported: start-up time of every command that loads it."""
    import dataclasses
    import importlib
    import inspect

    for name in ("engine.config", "engine.home", "engine.processes.session", "engine.kanban.models",
                 "engine.kanban.backend", "engine.kanban.backends.sqlite.connection", "engine.kanban.relocate",
                 "engine.kanban.transitions", "engine.kanban.tick_result"):
        module = importlib.import_module(name)
        made = [cls.__name__ for cls in vars(module).values() if inspect.isclass(cls) and dataclasses.is_dataclass(cls)
                and cls.__module__ == name and (cls.__doc__ or "").startswith(cls.__name__ + "(")]
        assert made == [], name
