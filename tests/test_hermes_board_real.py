"""Opt-in: hermes-tui's actions on hermes-agent's board, carried out by the real
hermes-agent 0.19.0 CLI.

Set ``HERMES_AGENT_BIN`` to a real ``hermes`` executable to run it, for example::

    python -m venv /tmp/hermes-agent-venv && /tmp/hermes-agent-venv/bin/pip install hermes-agent==0.19.0
    HERMES_AGENT_BIN=/tmp/hermes-agent-venv/bin/hermes pytest tests/test_hermes_board_real.py

(tests/fixtures/make_hermes_home.sh builds the same venv.) Without it the test is
skipped: the fake ``hermes`` in tests/test_hermes_board.py covers the calls' shape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from engine.home import HomeLayout
from tests.conftest import run_cli
from tests.test_hermes_home import FIXTURE

REAL = os.environ.get("HERMES_AGENT_BIN", "")
pytestmark = pytest.mark.skipif(not (REAL and os.access(REAL, os.X_OK)),
                                reason="set HERMES_AGENT_BIN to a real hermes-agent 0.19.0 `hermes` to run")


@pytest.fixture
def home_with_real_hermes(tmp_path):
    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hermes").symlink_to(REAL)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin",
           "HERMES_AUTO_PRUNE": ""}
    return HomeLayout(root), env


def test_every_action_is_done_by_real_hermes_and_hermes_reads_it_back(home_with_real_hermes):
    home, env = home_with_real_hermes

    def kanban(*args):
        r = run_cli("--home", str(home.root), "kanban", *args, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    new = json.loads(kanban("create", "Real card", "--assignee", "writer", "--priority", "2", "--json"))["id"]
    kanban("comment", "1c45", "--", "-first")
    kanban("block", "1c45", "--reason", "needs a key")
    kanban("unblock", "1c45")
    kanban("assign", "5941", "editor")
    kanban("complete", "5941", "--summary", "done it")
    kanban("archive", "20f9")
    ours = {t["id"]: (t["status"], t["assignee"]) for t in json.loads(kanban("list", "--all", "--json"))["tasks"]}
    assert ours == {new: ("ready", "writer"), "t_1c459297": ("ready", "writer"),
                    "t_594173db": ("done", "editor"), "t_20f93ac7": ("archived", None)}
    details = json.loads(kanban("show", "1c45", "--json"))
    assert [c["body"] for c in details["comments"]] == ["-first", "BLOCKED: needs a key"]
    # hermes itself still works on the home and sees the same board.
    theirs = subprocess.run([REAL, "kanban", "list", "--json"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HERMES_HOME": str(home.root)})
    assert theirs.returncode == 0, theirs.stderr
    assert {t["id"] for t in json.loads(theirs.stdout)} >= {new, "t_1c459297", "t_594173db"}
