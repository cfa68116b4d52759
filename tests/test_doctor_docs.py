"""`doctor`'s words and docs: every field of `doctor --json` (and of its `shared_board`)
is in docs/cli.md, and hermes-agent's many config sections are counted and wrapped, not
one line of ~70 names."""

from __future__ import annotations

import json
import re

from engine.hermes.config_keys import HERMES_SECTIONS
from tests.conftest import REPO, run_cli


def documented_fields() -> set[str]:
    text = (REPO / "docs" / "cli.md").read_text()
    section = text.split("## `doctor [--json]`", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", section))


def test_every_doctor_json_field_is_documented(home):
    home.config_file.write_text("kanban:\n  database: postgresql://nobody@127.0.0.1:1/nowhere\n")
    report = json.loads(run_cli("--home", str(home.root), "doctor", "--json").stdout)
    fields = documented_fields()
    assert set(report) <= fields, set(report) - fields
    assert set(report["shared_board"]) <= fields, set(report["shared_board"]) - fields


def test_hermes_sections_are_counted_and_wrapped(home):
    names = sorted(HERMES_SECTIONS)
    assert len(names) > 40
    home.config_file.write_text("".join(f"{name}: {{}}\n" for name in names))
    out = run_cli("--home", str(home.root), "doctor").stdout
    head = re.search(r"hermes-agent's sections, left to it \((\d+)\):\n", out)
    assert head is not None, out
    part = out[head.end():].split("\nscratch", 1)[0]
    lines = part.splitlines()
    assert len(lines) > 1 and max(len(line) for line in lines) <= 100, lines
    listed = re.findall(r"[A-Za-z0-9_.-]+", part)
    assert len(listed) == int(head.group(1)) > 40  # every one named, in the count
    assert listed == [n for n in names if n in listed]  # config order, none invented
