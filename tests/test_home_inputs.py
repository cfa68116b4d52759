"""Issue 12 bad inputs around the home and doctor, and issue 11's doctor lines: each is
one clear line (exit 2), doctor names what it finds and changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from engine.config import parse_config
from tests.conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "hermes_home_0_19_0"


@pytest.mark.parametrize("argv", [["ps"], ["doctor"], ["kanban", "create", "x"], ["run", "--", "true"], []])
def test_a_home_that_is_a_file_is_one_line(tmp_path, argv):
    f = tmp_path / "afile"
    f.write_text("x")
    r = run_cli("--home", str(f), *argv)
    assert r.returncode == 2
    assert r.stderr.strip() == f"hermes-tui: home: {f} is a file, not a directory (a home must be a directory)"


def test_a_home_under_a_file_cannot_be_created_one_line(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    r = run_cli("--home", str(f / "home"), "kanban", "create", "x")
    assert r.returncode == 2
    assert r.stderr.strip() == f"hermes-tui: home: {f / 'home'} cannot be created: {f} is a file, not a directory"


def test_a_home_whose_parents_are_missing_is_created(tmp_path):
    home = tmp_path / "new" / "deeper" / "home"
    assert run_cli("--home", str(home), "kanban", "create", "x").returncode == 0
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700


def test_doctor_says_no_config_means_defaults(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    r = run_cli("--home", str(home), "doctor")
    assert r.returncode == 0
    assert "no config.yaml (defaults)" in r.stdout and "config      OK" not in r.stdout
    assert json.loads(run_cli("--home", str(home), "doctor", "--json").stdout)["config_exists"] is False


def test_doctor_warns_when_the_home_is_open_to_others_and_leaves_it(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    os.chmod(home, 0o755)
    r = run_cli("--home", str(home), "doctor")
    assert "WARNING the home is 0755: open to other users" in r.stdout
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o755
    os.chmod(home, 0o700)
    assert "WARNING" not in run_cli("--home", str(home), "doctor").stdout


def test_doctor_says_a_hermes_home_is_a_guest_and_lists_hermes_sections(tmp_path):
    home = tmp_path / "hermes"
    shutil.copytree(FIXTURE, home)
    r = run_cli("--home", str(home), "doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "owner       a guest home (hermes-agent's or another program's: processes.json" in r.stdout
    assert "hermes-agent's sections, left to it (" in r.stdout and "terminal" in r.stdout  # counted, wrapped
    data = json.loads(run_cli("--home", str(home), "doctor", "--json").stdout)
    assert "terminal" in data["hermes_sections"] and "processes.json" in data["guest_signs"]
    own = tmp_path / "own"
    own.mkdir()
    assert "owner       hermes-tui's own home" in run_cli("--home", str(own), "doctor").stdout


def _keys_error(text: str) -> str:
    from engine.config import ConfigError
    from hermes_tui.keymap import validate_keys

    with pytest.raises(ConfigError) as err:
        validate_keys(parse_config(text, "config.yaml"))
    return str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("keys:\n  board.new: n\n  nope.thing: x\n", "config.yaml:3: unknown key 'nope.thing' in 'keys'"),
    ("keys:\n  processes.kill: f\n",
     "config.yaml:2: keys: 'processes.kill' and 'processes.follow' would both be 'f' in 2 Processes"),
    ("keys:\n  app.quit: k\n", "config.yaml:2: keys: 'app.quit' (k) is taken by 'processes.kill' in 2 Processes: "
                               "no key would quit there"),
    ("keys:\n  board.new: q\n", "config.yaml:2: keys: 'app.quit' (q) is taken by 'board.new' in 1 Board: "
                                "no key would quit there"),
])
def test_bad_keys_are_the_same_line_in_doctor_and_the_app(tmp_path, text, expected):
    assert _keys_error(text).startswith(expected)
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.yaml").write_text(text)
    doctor = run_cli("--home", str(home), "doctor")
    assert doctor.returncode == 2
    assert f"config      ERROR {home}/{expected}" in doctor.stdout
    app = run_cli("--home", str(home))  # the app checks keys: before it needs a terminal
    assert app.returncode == 2 and app.stderr.startswith(f"hermes-tui: {home}/{expected}")
    assert len(app.stderr.strip().splitlines()) == 1


def test_a_remap_that_clashes_with_nothing_is_fine():
    from hermes_tui.keymap import validate_keys

    validate_keys(parse_config("keys:\n  processes.kill: ctrl+k\n  app.quit: q,ctrl+q\n"))
