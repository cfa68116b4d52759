"""Issue 34 "Words": with ``kanban.database: postgresql://...`` the server's board is the
home's ``default`` board: ``kanban boards`` lists it (it said "No boards yet") and
``--board default`` names it (it failed, exit 2). Real server, real CLI."""

from __future__ import annotations

import json

from tests.support.cli import run_cli


def test_a_server_board_is_listed_as_default_and_board_default_names_it(home, pg_url):
    home.config_file.write_text(f"kanban:\n  database: {pg_url}\n")
    made = run_cli("--home", str(home.root), "kanban", "create", "on the server", "--json")
    assert made.returncode == 0, made.stderr
    card = json.loads(made.stdout)["id"]
    listed = run_cli("--home", str(home.root), "kanban", "boards")
    assert listed.returncode == 0 and "No boards yet" not in listed.stdout, listed.stdout
    line = [x for x in listed.stdout.splitlines() if x.startswith("* default")][0]
    assert "ready=1" in line, listed.stdout
    as_json = json.loads(run_cli("--home", str(home.root), "kanban", "boards", "--json").stdout)
    assert as_json["current"] == "default" and as_json["boards"][0]["counts"] == {"ready": 1}
    assert "@" not in as_json["boards"][0]["path"] or ":" not in as_json["boards"][0]["path"].split("@")[0][13:]
    named = run_cli("--home", str(home.root), "kanban", "--board", "default", "list", "--json")
    assert named.returncode == 0, named.stderr
    assert [t["id"] for t in json.loads(named.stdout)["tasks"]] == [card]
