"""No line of a file the app reads reaches the terminal raw, however forged (issue 20).

``logs/scratch-prune.log`` is written by hermes-tui and by hermes-agent, and anyone who
can write it can forge a line; so can whoever writes hermes's ``processes.json`` or a
``config.yaml``. A title sequence (``ESC]2;…BEL``) or a screen clear (``ESC[2J``) in one
is shown as visible escapes in the pane, its detail line and the CLI on a terminal; a
JSON document escapes it by JSON's rules.
"""

from __future__ import annotations

import json

from engine.config import ScratchSettings, Settings
from engine.scratch.audit import LogTail, parse_record
from hermes_tui.app import HermesApp
from tests.support import wait_until_pilot
from tests.support.cli import run_on_pty
from tests.test_hermes_home import FIXTURE
from widgets.prune_log.prune_log_pane import PruneLogPane

TITLE = "\x1b]2;pwned\x07"
CLEAR = "\x1b[2J"
RAW = ("\x1b", "\x07")


def _on_a_terminal(*argv: str) -> tuple[int, str]:
    return run_on_pty(*argv, env={"HERMES_AUTO_PRUNE": "0"})


def _forge_prune_log(home) -> None:
    home.ensure_dir(home.logs_dir)
    with open(home.prune_log, "w", encoding="utf-8") as fh:
        fh.write(f"2026-10-01 12:00:00,000 scratch prune: removed '/s/{TITLE}x' {CLEAR}(5 bytes)\n")
        fh.write(f"{CLEAR}{TITLE} a line of no known shape\n")


def test_every_field_of_a_forged_record_is_escaped():
    rec = parse_record(f"2026-10-01 12:00:00,000 scratch prune: kept '/s/{TITLE}' {CLEAR}because")
    odd = parse_record(f"{CLEAR}no shape{TITLE}")
    for text in (rec.time, rec.action, rec.path, rec.detail, odd.path, odd.detail):
        assert not any(c in text for c in RAW), text
    assert "\\x1b]2;pwned\\x07" in rec.path and "\\x1b[2J" in rec.detail and "\\x1b[2J" in odd.detail


async def test_a_forged_prune_log_line_is_shown_escaped_in_the_pane_and_its_detail_line(home):
    _forge_prune_log(home)
    assert len(LogTail(home.prune_log).start()) == 2
    app = HermesApp(home, Settings(scratch=ScratchSettings(auto_prune=False)), home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PruneLogPane)
        await wait_until_pilot(pilot, lambda: len(pane.records) == 2)
        await pilot.press("4")
        table = pane.table
        cells = [c.plain for i in range(table.row_count) for c in table.get_row_at(i)]
        detail = pane.query_one("#prune-log-detail")
        for row in range(table.row_count):
            table.move_cursor(row=row)
            await pilot.pause()
            cells.append(str(detail.render()))
        for text in cells:
            assert not any(c in text for c in RAW), repr(text)
        assert any("\\x1b]2;pwned\\x07" in c for c in cells) and any("\\x1b[2J" in c for c in cells)


def test_a_forged_processes_json_command_is_escaped_by_ps_on_a_terminal_and_in_json(tmp_path):
    import shutil

    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    entries = json.loads((root / "processes.json").read_text())
    entries[0]["command"] = f"sleep 600 {TITLE}{CLEAR}"
    (root / "processes.json").write_text(json.dumps(entries))
    rc, out = _on_a_terminal("--home", str(root), "ps", "--all")
    assert rc == 0, out
    assert "\x1b]2;" not in out and "\x1b[2J" not in out and "\\x1b]2;pwned\\x07" in out
    rc, out = _on_a_terminal("--home", str(root), "ps", "--all", "--json")
    assert rc == 0 and "\x1b]2;" not in out and "\\u001b]2;pwned\\u0007" in out


def test_config_names_doctor_shows_are_escaped_on_a_terminal(home):
    home.config_file.write_text('"odd\\e]2;pwned\\a\\e[2J":\n  x: 1\n')
    rc, out = _on_a_terminal("--home", str(home.root), "doctor")
    assert "\x1b]2;" not in out and "\x1b[2J" not in out and "\\x1b]2;pwned\\x07" in out, out
