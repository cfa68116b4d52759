"""Issue 11, "Never harm a home": hermes-tui in a home made by the real hermes-agent
0.19.0 (tests/fixtures/hermes_home_0_19_0, copied per test). hermes registered a live
background process in processes.json whose cwd is an idle scratch entry: no command,
no prune and no app session signals it or moves its entry, read-only commands create
and change nothing, and hermes's files stay byte-identical."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import sys
from pathlib import Path

import pytest

from engine import identity
from engine.config import load_config
from engine.home import HomeLayout
from tests.conftest import run_cli
from tests.support import READING_GROUPS, wait_settled, wait_until
from tests.support.scratch import make_entry

FIXTURE = Path(__file__).parent / "fixtures" / "hermes_home_0_19_0"
HERMES_FILES = ("config.yaml", "kanban.db", "processes.json", "state.db", "SOUL.md")
# The commands run without hermes-agent's own CLI on PATH (with it, `kanban create` would
# rightly ask hermes to add a card to its board).
GUEST_ENV = {"HERMES_AUTO_PRUNE": "", "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])}


def _in_cwd(pid: int, path: Path) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/cwd") == str(path)
    except OSError:
        return False


def register_with_hermes(root: Path, pid: int, cwd: Path, start_ticks: int | None = None) -> None:
    """Put ``pid`` into processes.json the way hermes wrote its own entry (the
    fixture's entry, with this test's live process in it)."""
    entries = json.loads((FIXTURE / "processes.json").read_text())
    entry = dict(entries[0])
    entry.update(pid=pid, cwd=str(cwd),
                 host_start_time=identity.read_stat(pid).start_ticks if start_ticks is None else start_ticks)
    (root / "processes.json").write_text(json.dumps([entry], indent=2))


@pytest.fixture
def hermes_home(tmp_path, children):
    """(home, hermes's live process, its idle scratch entry)."""
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    os.chmod(root, 0o755)
    with open(root / "config.yaml", "a") as fh:  # the entry below has just arrived (see options())
        fh.write("\nscratch:\n  arrival_hours: 0\n")
    entry = make_entry(root / "cache" / "scratch", "hermes-work")
    proc = children(["sleep", "600"], cwd=entry)
    assert wait_until(lambda: _in_cwd(proc.pid, entry) and identity.read_stat(proc.pid).comm == b"sleep")
    register_with_hermes(root, proc.pid, entry)
    return HomeLayout(root), proc, entry


def tree_state(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its type, mode and content (files hashed, dirs
    with their mtime so a file created and removed again shows too)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames + ["."]:
            path = Path(dirpath) / name
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                state[str(path.relative_to(root))] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                state[str(path.relative_to(root))] = ("file", stat.S_IMODE(st.st_mode), digest)
            else:
                state[str(path.relative_to(root))] = ("other", stat.S_IMODE(st.st_mode))
    return state


def hermes_bytes(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in HERMES_FILES}


READ_ONLY = [
    ["ps"], ["ps", "--all"], ["ps", "--json"], ["scratch"], ["scratch", "--json"], ["doctor"], ["doctor", "--json"],
    ["kanban", "list"], ["kanban", "show", "1"],
    ["proc", "poll", "proc_0dc6737718db"],
]
EVERY_COMMAND = READ_ONLY + [
    ["kanban", "create", "x"], ["kanban", "dispatch"], ["run", "--", "true"], ["proc", "kill", "proc_0dc6737718db"],
    ["scratch", "restore", "nothing-here"], ["prune", "--dry-run"],
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_read_only_commands_create_and_change_nothing(hermes_home, argv):
    home, proc, entry = hermes_home
    before = tree_state(home.root)
    result = run_cli("--home", str(home.root), *argv, env=GUEST_ENV)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert proc.poll() is None and entry.exists()
    assert tree_state(home.root) == before


@pytest.mark.parametrize("argv", EVERY_COMMAND, ids=" ".join)
def test_no_command_signals_hermes_process_or_changes_its_files(hermes_home, argv):
    """Every command, with the automatic pass allowed by the environment: hermes's
    process lives, its entry stays, its files keep every byte."""
    home, proc, entry = hermes_home
    files = hermes_bytes(home.root)
    result = run_cli("--home", str(home.root), *argv, env=GUEST_ENV, timeout=60)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert proc.poll() is None and entry.exists()
    assert hermes_bytes(home.root) == files
    assert not (home.scratch_dir / ".last_prune").exists()  # no automatic pass in a guest home


async def test_an_app_session_changes_no_hermes_file_and_signals_nothing(hermes_home):
    from hermes_tui.app import HermesApp

    home, proc, entry = hermes_home
    files = hermes_bytes(home.root)
    settings = load_config(home.config_file)
    app = HermesApp(home, settings)
    async with app.run_test(size=(160, 48)) as pilot:
        for key in ("1", "2", "3", "4", "r", "1"):
            await pilot.press(key)
            await pilot.pause()
        await wait_settled(pilot, (*READING_GROUPS, "board-dispatch"))  # what the keys started has ended
        await pilot.press("q")
    assert proc.poll() is None and entry.exists()
    assert hermes_bytes(home.root) == files


def test_hermes_config_is_accepted_by_every_command(hermes_home):
    home, _proc, _entry = hermes_home
    for argv in (["ps"], ["scratch"], ["doctor"]):
        result = run_cli("--home", str(home.root), *argv)
        assert result.returncode == 0, (argv, result.stderr)


def test_prune_yes_keeps_the_entry_and_never_signals_hermes_process(hermes_home):
    home, proc, entry = hermes_home
    files = hermes_bytes(home.root)
    result = run_cli("--home", str(home.root), "prune", "--yes", env=GUEST_ENV)
    assert result.returncode == 0, result.stderr
    assert proc.poll() is None and entry.exists()
    log = home.prune_log.read_text()
    assert f"live process pid={proc.pid} (sleep) of hermes-agent session " in log
    assert "TERM" not in log
    assert hermes_bytes(home.root) == files


def test_a_descendant_of_a_hermes_process_is_spared_too(hermes_home, children):
    home, proc, _entry = hermes_home
    work = make_entry(home.scratch_dir, "hermes-child-work")
    shell = children(["sh", "-c", "sleep 600; true"], cwd=work)
    assert wait_until(lambda: any(_in_cwd(int(d), work) and identity.read_stat(int(d)).comm == b"sleep"
                                  for d in os.listdir("/proc") if d.isdigit()))
    register_with_hermes(home.root, shell.pid, work)
    result = run_cli("--home", str(home.root), "prune", "--yes", env=GUEST_ENV)
    assert result.returncode == 0, result.stderr
    assert shell.poll() is None and work.exists()
    assert "of hermes-agent session " in home.prune_log.read_text()


def test_a_reused_pid_in_processes_json_is_not_hermes(hermes_home):
    """The entry's start ticks differ from the live process's: that pid was reused, so
    the process is a stranger in an idle entry (ours to stop, in this test)."""
    home, proc, entry = hermes_home
    register_with_hermes(home.root, proc.pid, entry, start_ticks=1)
    result = run_cli("--home", str(home.root), "prune", "--yes", env=GUEST_ENV)
    assert result.returncode == 0, result.stderr
    assert proc.wait(timeout=30) == -signal.SIGTERM and not entry.exists()


@pytest.mark.parametrize("content", [b"[{\"pid\": ", b"{\"pid\": 5}", b"[{\"pid\": \"12\"}]", b"\xff\xfe"])
def test_a_malformed_processes_json_makes_the_pruner_signal_nobody(hermes_home, children, content):
    home, proc, entry = hermes_home
    stray_entry = make_entry(home.scratch_dir, "stray")
    stray = children(["sleep", "600"], cwd=stray_entry)
    assert wait_until(lambda: _in_cwd(stray.pid, stray_entry) and identity.read_stat(stray.pid).comm == b"sleep")
    (home.root / "processes.json").write_bytes(content)
    result = run_cli("--home", str(home.root), "prune", "--yes", env=GUEST_ENV)
    assert result.returncode == 0, result.stderr
    assert proc.poll() is None and stray.poll() is None
    assert entry.exists() and stray_entry.exists()
    assert "processes.json cannot be read" in home.prune_log.read_text()


def test_no_automatic_pass_in_a_guest_home_unless_asked_explicitly(hermes_home):
    from engine.scratch import schedule

    home, proc, entry = hermes_home
    settings = load_config(home.config_file)
    assert settings.scratch.auto_prune  # the default is on...
    schedule._reset_for_tests()
    try:
        assert schedule.maybe_start_auto_prune(home, settings) is None  # ...but not here
        assert not (home.scratch_dir / ".last_prune").exists()
        with open(home.config_file, "a") as fh:
            fh.write("  auto_prune: true\n  quarantine_hours: 0\n")  # the fixture's scratch: section
        schedule._reset_for_tests()
        child = schedule.maybe_start_auto_prune(home, load_config(home.config_file))
        assert child is not None and child.wait(timeout=60) == 0
    finally:
        schedule.mark_started()
    assert proc.poll() is None and entry.exists()
    assert f"live process pid={proc.pid} (sleep) of hermes-agent session " in home.prune_log.read_text()


def test_an_own_home_still_starts_the_automatic_pass(tmp_path):
    from engine.hermes.guest import home_owner
    from engine.scratch.schedule import allowed_in

    own = HomeLayout(tmp_path / "own").ensure()
    assert not home_owner(own.root, load_config(own.config_file)).is_guest
    assert allowed_in(own, load_config(own.config_file))


@pytest.mark.parametrize("sign", ["processes.json", "state.db", "SOUL.md", ".env", "logs/agent.log"])
def test_each_hermes_file_makes_a_guest_home(tmp_path, sign):
    from engine.hermes.guest import home_owner

    root = tmp_path / "h"
    (root / sign).parent.mkdir(parents=True, exist_ok=True)
    (root / sign).write_text("")
    assert home_owner(root, None).signs == (sign,)


def test_hermes_kanban_db_alone_makes_a_guest_home_and_stays_identical(tmp_path):
    from engine.hermes.guest import home_owner

    root = tmp_path / "h"
    root.mkdir()
    shutil.copy(FIXTURE / "kanban.db", root / "kanban.db")
    before = tree_state(root)
    assert home_owner(root, None).signs == ("kanban.db of another program",)
    assert tree_state(root) == before


async def _app_session(home: HomeLayout) -> None:
    from hermes_tui.app import HermesApp

    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        for key in ("1", "2", "3", "4", "1"):
            await pilot.press(key)
            await pilot.pause()
        await pilot.press("q")


async def test_an_app_session_creates_nothing_without_hermes_board(hermes_home):
    """Opening the app on hermes's home (its board aside, see the next test) creates and
    changes nothing in it."""
    home, proc, _entry = hermes_home
    (home.root / "kanban.db").unlink()
    before = tree_state(home.root)
    await _app_session(home)
    assert tree_state(home.root) == before and proc.poll() is None


async def test_an_app_session_creates_nothing_with_hermes_board(hermes_home):
    home, _proc, _entry = hermes_home
    before = tree_state(home.root)
    await _app_session(home)
    assert tree_state(home.root) == before
