"""config.yaml -> typed settings; every bad input is one line with file:line, exit 2."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, Settings, load_config, parse_config
from tests.conftest import run_cli


def test_missing_and_empty_files_mean_defaults(tmp_path):
    assert load_config(tmp_path / "nope.yaml") == Settings(source=None)
    empty = tmp_path / "config.yaml"
    empty.write_text("")
    s = load_config(empty)
    assert s.scratch.idle_hours == 24 and s.processes.tail_bytes == 256 * 1024
    assert s.kanban.dispatch_profiles is None and s.kanban.failure_limit == 2
    empty.write_text("# only a comment\n")
    assert load_config(empty).processes.kill_grace_seconds == 2


def test_full_config_is_typed_and_frozen():
    s = parse_config(
        """
scratch:
  idle_hours: 6
  quarantine_hours: 0
processes:
  max_finished: 10
kanban:
  dispatch_profiles: "worker, reviewer"
  default_assignee: worker
  profiles:
    worker:
      command: ./work.sh
      env: {MODE: fast, N: 3}
      max_in_progress: 2
    reviewer: ./review.sh
ui:
  theme: nord
keys:
  processes.background: ctrl+g
"""
    )
    assert s.scratch.idle_hours == 6.0 and s.scratch.quarantine_hours == 0
    assert s.processes.max_finished == 10
    assert s.kanban.dispatch_profiles == ("worker", "reviewer")
    assert s.kanban.profiles["worker"].env == {"MODE": "fast", "N": "3"}
    assert s.kanban.profiles["worker"].max_in_progress == 2
    assert s.kanban.profiles["reviewer"].command == "./review.sh"
    assert s.keys == {"processes.background": "ctrl+g"}
    assert s.key_lines["processes.background"] == 19
    with pytest.raises(AttributeError):
        s.scratch.idle_hours = 1  # frozen


def test_empty_dispatch_profiles_means_none_not_any():
    assert parse_config("kanban:\n  dispatch_profiles: []\n").kanban.dispatch_profiles == ()
    assert parse_config("kanban:\n  dispatch_profiles: ''\n").kanban.dispatch_profiles == ()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("scratch:\n  idle_hours: abc\n", "config.yaml:2: scratch.idle_hours must be a positive number, got 'abc'"),
        ("scratch:\n  idle_hours: -1\n", "config.yaml:2: scratch.idle_hours must be a positive number, got -1"),
        ("scratch:\n  idle_hours: true\n", "config.yaml:2: scratch.idle_hours must be a positive number, got true"),
        ("processes:\n  redact: maybe\n", "config.yaml:2: processes.redact must be true or false, got 'maybe'"),
        ("kanban:\n  max_in_progress: 1.5\n",
         "config.yaml:2: kanban.max_in_progress must be a positive integer, got 1.5"),
        ("\n\nscratch:\n  idle_hourz: 3\n",
         "config.yaml:4: unknown key 'idle_hourz' in 'scratch' (known: idle_hours, quarantine_hours, "
         "auto_prune, kill_grace_seconds, arrival_hours)"),
        ("scrach:\n  a: 1\n", "config.yaml:1: unknown section 'scrach' (did you mean 'scratch'?"),
        ("scratch: 5\n", "config.yaml:1: scratch must be a mapping, got 5"),
        ("- a\n- b\n", "config.yaml:1: the top level must be a mapping"),
        ("kanban:\n  profiles:\n    w:\n      env: {}\n", "config.yaml:3: kanban.profiles.w needs a 'command'"),
        ("kanban:\n  profiles:\n    w:\n      command: x\n      colour: red\n",
         "config.yaml:5: unknown key 'colour' in 'kanban.profiles.w'"),
        ("scratch:\n  idle_hours: 1\n  idle_hours: 2\n", "config.yaml:3: duplicate key 'idle_hours' in scratch"),
        ("keys:\n  app.quit: 5\n", "config.yaml:2: keys.app.quit must be a key"),
    ],
)
def test_bad_values_name_file_line_and_problem(text, expected):
    with pytest.raises(ConfigError) as err:
        parse_config(text, "config.yaml")
    assert str(err.value).startswith(expected)
    assert "\n" not in str(err.value)


def test_yaml_syntax_error_has_line_and_column():
    with pytest.raises(ConfigError) as err:
        parse_config("scratch:\n  idle_hours: [1, 2\nui: {}\n", "config.yaml")
    msg = str(err.value)
    assert msg.startswith("config.yaml:3:")
    assert msg.count(":") >= 3 and "\n" not in msg


def test_not_utf8_is_one_line(tmp_path):
    p = tmp_path / "config.yaml"
    p.write_bytes(b"ui:\n  theme: \xff\xfe\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(err.value) == f"{p}:2: is not valid UTF-8"


def test_config_that_is_a_directory(tmp_path):
    (tmp_path / "config.yaml").mkdir()
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "config.yaml")
    assert "is a directory" in str(err.value)


# -- through the real CLI: one line on stderr, exit 2, no traceback ------------------------

BAD_CONFIGS = {
    "syntax": ("scratch:\n  idle_hours: [3\n", ":3:1: "),
    "unknown": ("scratch:\n  idle_hourz: 3\n", ":2: unknown key 'idle_hourz' in 'scratch' (known: idle_hours,"),
    "type": ("scratch:\n  idle_hours: abc\n", ":2: scratch.idle_hours must be a positive number, got 'abc'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_through_the_cli_app_entry(tmp_path, case):
    text, fragment = BAD_CONFIGS[case]
    (tmp_path / "config.yaml").write_text(text)
    result = run_cli("--home", str(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"hermes-tui: {tmp_path}/config.yaml")
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_through_doctor(tmp_path, case):
    text, fragment = BAD_CONFIGS[case]
    (tmp_path / "config.yaml").write_text(text)
    result = run_cli("--home", str(tmp_path), "doctor")
    assert result.returncode == 2
    assert fragment in result.stdout
    assert "Traceback" not in result.stderr + result.stdout


def test_unknown_binding_id_in_keys_is_reported_with_its_line(tmp_path):
    (tmp_path / "config.yaml").write_text("ui:\n  theme: nord\nkeys:\n  app.quit: ctrl+q\n  no.such: x\n")
    result = run_cli("--home", str(tmp_path))
    assert result.returncode == 2
    assert f"{tmp_path}/config.yaml:5: unknown key 'no.such' in 'keys' (known: app.quit," in result.stderr
