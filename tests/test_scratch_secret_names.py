"""A secret in a scratch entry's name is masked wherever the name is shown (issue 35.8).

The family: an entry's name is outside text, like a process's output (a task writes
``$TMPDIR/token=abc123...`` or names a run after its API key). Every surface that shows
a name, a path or a reason quoting one masks it with the same redaction as outputs
(``processes.redact``): the ``scratch`` listing (text and ``--json``), ``prune``
(the plan, ``--dry-run``/``--yes`` text and ``--json``), ``scratch restore``, the
Scratch pane (rows, detail line, the prune dialog, the restore notice), the Prune log
pane, and attention items (key, subject, words). The prune log file keeps the raw
name, as an output file keeps its raw bytes. Real entries, a real pass, the real app.
"""

from __future__ import annotations

import json

from engine.processes.redact import MASK
from tests.conftest import run_cli
from tests.support.scratch import log_text, make_entry, target_of

IDLE = "token=abc123secretvalue"
KEYED = "run-sk-proj-ABCDEFGHIJKLMNOPQRSTUV"
SECRETS = ["abc123secretvalue", "ABCDEFGHIJKLMNOPQRSTUV"]
CONFIG = "scratch:\n  arrival_hours: 0\n  quarantine_hours: 1\n"


def _assert_masked(where: str, text: str, *, expect_mask: bool = True) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}: {text!r}"
    if expect_mask:
        assert MASK in text, f"{where} shows no mask: {text!r}"


def _cli(home, *args: str) -> str:
    out = run_cli("--home", str(home.root), *args)
    assert out.returncode == 0, out.stderr
    _assert_masked(f"stderr of {args}", out.stderr, expect_mask=False)
    return out.stdout


def _entries(home) -> None:
    t = target_of(home)
    home.config_file.write_text(CONFIG)
    make_entry(t.scratch_dir, IDLE)
    make_entry(t.scratch_dir, KEYED)


def test_the_cli_masks_secrets_in_entry_names_text_and_json(home):
    _entries(home)
    for args in (("scratch",), ("scratch", "--json"), ("prune", "--dry-run"), ("prune", "--dry-run", "--json")):
        _assert_masked(" ".join(args), _cli(home, *args))
    doc = json.loads(_cli(home, "scratch", "--json"))
    assert sorted(e["name"] for e in doc["entries"]) == sorted(["run-sk-***", "token=***"])
    out = _cli(home, "prune", "--yes", "--json")
    _assert_masked("prune --yes --json", out)
    assert len(json.loads(out)["quarantined"]) == 2
    listing = _cli(home, "scratch")  # the quarantine names now
    _assert_masked("scratch (quarantine)", listing)
    _assert_masked("scratch --json (quarantine)", _cli(home, "scratch", "--json"))
    _assert_masked("scratch restore", _cli(home, "scratch", "restore", KEYED))
    _assert_masked("scratch restore --json", _cli(home, "scratch", "restore", IDLE, "--json"))
    assert all(s in log_text(home) for s in SECRETS)  # the log file keeps the raw names
    home.config_file.write_text(CONFIG + "processes:\n  redact: false\n")  # masked on every surface or none
    out = _cli(home, "scratch")
    assert IDLE in out and KEYED in out


def test_attention_items_mask_the_entry_name_in_key_subject_and_words(home):
    _entries(home)
    due = json.loads(_cli(home, "attention", "--json", "--kind", "prune_due"))
    items = due["items"] if isinstance(due, dict) else due
    assert len(items) == 2
    _assert_masked("attention prune_due", json.dumps(items))
    _cli(home, "prune", "--yes")
    expiring = json.loads(_cli(home, "attention", "--json", "--kind", "quarantine_expiring"))
    items = expiring["items"] if isinstance(expiring, dict) else expiring
    assert len(items) == 2
    for item in items:
        for field in ("key", "subject", "why", "action"):
            _assert_masked(f"attention quarantine_expiring {field}", item[field])
    _assert_masked("attention (text)", _cli(home, "attention"))


async def test_the_scratch_and_prune_log_panes_mask_entry_names(home):
    from engine.config import ScratchSettings, Settings
    from hermes_tui.app import HermesApp
    from tests.support import screen_shown, wait_workers
    from tests.support import wait_until_pilot as wait_for
    from tests.support.notes import capture_notes
    from widgets.prune_log.prune_log_pane import PruneLogPane
    from widgets.scratch.prune_modal import PruneModal
    from widgets.scratch.scratch_pane import ScratchPane

    _entries(home)
    app = HermesApp(home, Settings(scratch=ScratchSettings(arrival_hours=0.0, quarantine_hours=1.0)),
                    home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        notes = capture_notes(app)
        pane = app.query_one(ScratchPane)
        assert await wait_for(pilot, lambda: pane.last_survey is not None and pane.table.row_count == 2)
        await pilot.press("3")
        for key in (f"e:{IDLE}", f"e:{KEYED}"):
            _assert_masked("scratch row", " ".join(c.plain for c in pane.table.get_row(key)))
            pane.table.move_cursor(row=pane.table.get_row_index(key))
            await pilot.pause()
            _assert_masked("scratch detail line", str(pane.query_one("#scratch-detail").render()))
        await pilot.press("p")
        assert await wait_for(pilot, lambda: screen_shown(app, PruneModal))
        _assert_masked("prune dialog", str(app.screen.query_one(".body").render()))
        await pilot.click("#yes")
        assert await wait_for(pilot, lambda: not pane.pruning and any(k.startswith("q:") for k in pane.table.keys))
        assert await wait_for(pilot, lambda: sum(k.startswith("q:") for k in pane.table.keys) == 2)
        qkey = next(k for k in pane.table.keys if k.startswith("q:"))
        _assert_masked("quarantined row", " ".join(c.plain for c in pane.table.get_row(qkey)))
        pane.table.move_cursor(row=pane.table.get_row_index(qkey))
        await pilot.pause()
        _assert_masked("quarantined detail line", str(pane.query_one("#scratch-detail").render()))
        await pilot.press("u")
        await wait_workers(app, ["scratch-restore"])
        assert await wait_for(pilot, lambda: any(n.startswith("restored ") for n in notes))

        log = app.query_one(PruneLogPane)
        assert await wait_for(pilot, lambda: sum(r.action == "quarantined" for r in log.records) == 2)
        await pilot.press("4")
        for i in range(log.table.row_total):
            log.table.go_to(i)
            await pilot.pause()
            _assert_masked("prune log row", " ".join(c.plain for c in log.table.get_row(log.table.selected_key)))
            _assert_masked("prune log detail", str(log.query_one("#prune-log-detail").render()))
    _assert_masked("toasts", "\n".join(notes), expect_mask=False)
