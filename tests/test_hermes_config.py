"""Issue 11, "Speak its config": hermes-agent's own config.yaml (written by the real
hermes-agent 0.19.0, tests/fixtures/hermes_home_0_19_0) is accepted, the keys that
mean the same thing are honoured, and a key neither program knows is still an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ConfigError, load_config, parse_config
from engine.hermes.config_keys import HERMES_AGENT_VERSION, HERMES_KANBAN_KEYS, HERMES_SECTIONS

FIXTURE = Path(__file__).parent / "fixtures" / "hermes_home_0_19_0"


def test_the_fixture_was_written_by_the_version_the_key_list_was_read_from():
    assert (FIXTURE / ".hermes-agent-version").read_text().strip() == HERMES_AGENT_VERSION


def test_hermes_agents_full_config_is_accepted_and_its_sections_are_someone_elses():
    s = load_config(FIXTURE / "config.yaml")
    foreign = dict(s.foreign_sections)
    assert "terminal" in foreign and "model" in foreign and "kanban" not in foreign
    assert set(foreign) <= HERMES_SECTIONS
    lines = (FIXTURE / "config.yaml").read_text().splitlines()
    assert lines[foreign["terminal"] - 1] == "terminal:"


def test_hermes_kanban_keys_that_mean_the_same_are_honoured():
    s = load_config(FIXTURE / "config.yaml")
    assert s.kanban.failure_limit == 3  # set with `hermes config set kanban.failure_limit 3`
    assert s.kanban.dispatch_interval_seconds == 60
    assert s.kanban.default_assignee is None  # hermes writes ''
    assert "kanban.dispatch_in_gateway" in s.hermes_keys
    assert s.is_set("kanban.failure_limit") and not s.is_set("scratch.auto_prune")
    assert parse_config("kanban:\n  max_in_progress: 7\n").kanban.max_in_progress == 7
    assert parse_config("kanban:\n  default_assignee: coder\n").kanban.default_assignee == "coder"


def test_every_hermes_kanban_key_is_accepted():
    text = "kanban:\n" + "".join(f"  {k}: null\n" for k in sorted(HERMES_KANBAN_KEYS)
                                 if k not in ("dispatch_interval_seconds", "failure_limit", "max_in_progress"))
    assert parse_config(text).kanban.default_assignee is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("kanban:\n  failure_limit: 2\n  colour: red\n", "config.yaml:3: unknown key 'colour' in 'kanban'"),
        ("terminal: {}\nkanbn:\n  x: 1\n", "config.yaml:2: unknown section 'kanbn' (did you mean 'kanban'?"),
        ("kanban:\n  failure_limit: lots\n", "config.yaml:2: kanban.failure_limit must be a positive integer"),
    ],
)
def test_a_key_neither_program_knows_is_still_an_error(text, expected):
    with pytest.raises(ConfigError) as err:
        parse_config(text, "config.yaml")
    assert str(err.value).startswith(expected)


def test_a_section_of_another_program_is_kept_as_someone_elses():
    s = parse_config("my_plugin:\n  colour: red\nscratch:\n  idle_hours: 2\n")
    assert s.foreign_sections == (("my_plugin", 1),) and s.scratch.idle_hours == 2
