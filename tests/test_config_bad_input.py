"""Issue 12: every bad config.yaml is one line ``config.yaml:LINE: ...`` and exit 2,
never a traceback: tags, control bytes, deep nesting, huge numbers, huge files."""

from __future__ import annotations

import re

import pytest

from engine.config import MAX_CONFIG_BYTES, MAX_DEPTH, MAX_VALUES, ConfigError, load_config
from tests.conftest import run_cli

BAD = {
    "local tag": ("scratch:\n  idle_hours: !foo 3\n", "config.yaml:2: the YAML tag '!foo' is not allowed"),
    "python object": (
        "ui:\n  theme: !!python/object/apply:os.system ['true']\n",
        "config.yaml:2: the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed",
    ),
    "tag in someone else's section": ("terminal:\n  x: !!binary aGk=\n", "config.yaml:2: the YAML tag"),
    "NUL byte": ("scratch:\n  idle_hours: 3\x00\n", "config.yaml:2: contains the control character '\\x00'"),
    "escape byte": ("ui:\n  theme: \x1b[2Jnord\n", "config.yaml:2: contains the control character '\\x1b'"),
    "NUL in kanban.db": ('kanban:\n  db: "board\\0.db"\n', "config.yaml:2: kanban.db must not contain the control "
                         "character '\\x00'"),
    "newline in kanban.db": ('kanban:\n  db: "a\\nb.db"\n', "config.yaml:2: kanban.db must not contain"),
    "integer beyond range": ("processes:\n  tail_bytes: 99999999999999999999999\n",
                             "config.yaml:2: processes.tail_bytes must be at most 2147483647"),
    "number beyond float": ("scratch:\n  idle_hours: " + "9" * 400 + "\n",
                            "config.yaml:2: scratch.idle_hours must be at most 1000000000"),
    "deep flow nesting": ("terminal: " + "[" * 5000 + "]" * 5000 + "\n", "nesting depth"),
    "deep block nesting": ("".join(" " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)),
                           f"is nested more than {MAX_DEPTH} levels deep"),
    "alias bomb": ("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                   + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                             f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                             f"*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8)),
                   f"holds more than {MAX_VALUES} values"),
    "integer over 4300 digits": ("scratch:\n  idle_hours: " + "9" * 5000 + "\n",
                                 "config.yaml:2: a number too long to read (more than 4300 digits)"),
    "long integer in the kanban profiles": ("kanban:\n  profiles:\n    w: " + "9" * 5000 + "\n",
                                            "config.yaml:3: a number too long"),
    "huge list": ("terminal: [" + "1, " * (MAX_VALUES + 10) + "]\n", f"holds more than {MAX_VALUES} values"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_config_is_one_line_with_file_and_line(tmp_path, name):
    text, expected = BAD[name]
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    line = str(err.value).replace(str(tmp_path) + "/", "")
    assert "\n" not in line
    assert re.match(r"config\.yaml:\d+(:\d+)?: ", line) and expected in line, line


def test_a_file_over_the_size_cap_is_refused_before_parsing(tmp_path):
    path = tmp_path / "config.yaml"
    # Valid YAML that would take seconds to parse in pure Python: refused by its size.
    path.write_text("terminal: [" + "1, " * (MAX_CONFIG_BYTES // 3 + 10) + "]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config.yaml: is larger than 256 KiB"):
        load_config(path)


@pytest.mark.parametrize("name", ["python object", "NUL byte", "NUL in kanban.db", "integer beyond range",
                                  "deep flow nesting", "huge list"])
def test_cli_says_one_line_and_exits_2(tmp_path, name):
    text, expected = BAD[name]
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(text, encoding="utf-8")
    r = run_cli("--home", str(home), "ps")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr
    shown = lines[0].replace(str(home) + "/", "")
    assert re.match(r"hermes-tui: config\.yaml:\d+(:\d+)?: ", shown) and expected in shown, shown
