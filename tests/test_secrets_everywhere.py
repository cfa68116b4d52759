"""One set of secrets, every surface that shows a worker's or a process's text (issue 20).

A real worker prints the secrets and fails; an operator blocks a card and completes
another with the same secrets in the reason and summary. Every place that shows them
(``kanban show`` text and ``--json``, ``kanban list``, ``kanban tail``, the board's
card, its details dialog with the worker log's tail, a board toast, the processes
pane's masking) shows them masked, as the processes pane does. The worker's log on disk
keeps the raw bytes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from engine.config import load_config
from engine.processes.redact import MASK, redact, redact_data
from hermes_tui.app import HermesApp
from tests.conftest import run_cli
from tests.support import screen_shown, wait_until, wait_until_pilot
from tests.support.notes import capture_notes
from widgets.board.board_modals import CardDetailsScreen
from widgets.board.board_pane import BoardPane

# What a worker prints, one per line; what must never be shown (and is in the raw log).
SECRET_LINES = [
    "password=hunter2hunter2",
    "token ghp_0123456789abcdefghijABCDEFGHIJ",
    '"password": "q9z\\"t4ilX"',
    "cache at redis://:p4ssRedis@cache.internal:6379/0",
    "PASSWORD = s3cret phrase",
    "curl -u admin:adm1npw https://example.com",  # issue 35.8
    "Cookie: session=c00k1eval; theme=dark",
]
SECRETS = ["hunter2hunter2", "0123456789abcdefghijABCDEFGHIJ", "t4ilX", "p4ssRedis", "s3cret phrase", "adm1npw",
           "c00k1eval"]
ONE_LINE = " ".join(SECRET_LINES)


def _kanban(home, *args):
    out = run_cli("--home", str(home.root), "kanban", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _assert_masked(where: str, text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}: {text!r}"
    assert MASK in text, f"{where} shows no mask at all: {text!r}"


def _tail(home) -> str:
    env = dict(os.environ)
    env.pop("HERMES_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "tail",
                             "--lines", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    seen = ""
    try:
        deadline = time.monotonic() + 60
        while " completed " not in seen:
            assert time.monotonic() < deadline, seen
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return seen


async def test_one_set_of_secrets_is_masked_on_every_surface(home, tmp_path):
    script = tmp_path / "leaky-worker.sh"
    script.write_text("".join(f"printf '%s\\n' {json.dumps(line)}\n".replace("$", "\\$") for line in SECRET_LINES)
                      + "exit 3\n")
    home.config_file.write_text(f"kanban:\n  dispatch: false\n  profiles:\n    w: 'sh {script}'\n")
    failing = json.loads(_kanban(home, "create", "leaky", "--assignee", "w", "--max-retries", "1",
                                 "--json"))["id"]
    blocked = json.loads(_kanban(home, "create", "waits", "--json"))["id"]
    done = json.loads(_kanban(home, "create", "finished", "--json"))["id"]
    def failed() -> bool:  # a tick spawns the worker, a later one sees it exit
        _kanban(home, "dispatch")
        return "Worker's last output" in (json.loads(_kanban(home, "show", failing, "--json"))
                                          ["last_failure_error"] or "")

    wait_until(failed, timeout=60, what="the worker failing")
    log = (home.kanban_logs_dir / f"{failing}.log").read_text()
    assert all(s in log for s in SECRETS)  # the raw bytes stay on disk
    _kanban(home, "block", blocked, "--reason", ONE_LINE)
    _kanban(home, "complete", done, "--summary", ONE_LINE)

    surfaces = {}
    for card in (failing, blocked, done):
        surfaces[f"kanban show {card}"] = _kanban(home, "show", card)
        surfaces[f"kanban show {card} --json"] = _kanban(home, "show", card, "--json")
    surfaces["kanban list --json"] = _kanban(home, "list", "--json")
    # A launch's token names the launch, not a secret (issue 34 "Words"): shown as it is.
    claimed = [e for e in json.loads(surfaces[f"kanban show {failing} --json"])["events"] if e["kind"] == "claimed"]
    assert claimed and all(e["payload"]["launch_token"] not in ("", MASK) for e in claimed), claimed
    surfaces["kanban tail"] = _tail(home)
    surfaces["the processes pane's masking"] = redact("\n".join(SECRET_LINES))
    surfaces["a --json payload"] = json.dumps(redact_data({"password": 'q9z"t4ilX', "out": SECRET_LINES}))

    app = HermesApp(home, load_config(home.config_file), home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BoardPane)
        await wait_until_pilot(pilot, lambda: failing in pane.cards and done in pane.cards)
        for card in (failing, done):
            t = pane.cards[card].task
            surfaces[f"the board's card {card}"] = " ".join(str(v) for v in (t.title, t.body, t.last_failure_error,
                                                                             t.result))
        notes = capture_notes(app)
        pane.notify(f"could not archive: {ONE_LINE}", markup=False)
        surfaces["a board toast"] = "\n".join(notes)
        cards = pane.query_one(f"#cards-{pane.cards[failing].task.status}")
        cards.focus()
        cards.highlighted = cards.get_option_index(failing)
        await pilot.pause()
        await pilot.press("enter")
        await wait_until_pilot(pilot, lambda: screen_shown(app, CardDetailsScreen))
        body = app.screen.query_one("#details-body")
        await wait_until_pilot(pilot, lambda: "Worker log" in str(body.render()))
        surfaces["the details dialog"] = str(body.render())
    for where, text in surfaces.items():
        _assert_masked(where, text)
    assert "redis://:***@cache.internal" in surfaces["the details dialog"]
