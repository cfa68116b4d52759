"""Issue 24, tokens and cost on hermes-tui's own board: a worker reports its run's usage
with ``kanban usage ID --input-tokens N --output-tokens N --cost-usd X``, fenced by its
run id like ``complete``; ``show`` and ``list`` show it per run, per card and for the
board, and a run without a report is "not linked", never zero. On the SQLite file and on
PostgreSQL (board_env)."""

from __future__ import annotations

import json
import sys

from tests.support import wait_until
from tests.test_kanban_cli import board_env, create, kanban  # noqa: F401  (board_env: a fixture)

WORKER = (f"{sys.executable} -m hermes_tui kanban usage \"$HERMES_KANBAN_TASK\" --input-tokens 1200 "
          "--output-tokens 340 --cost-usd 0.0125 && "
          f"{sys.executable} -m hermes_tui kanban complete \"$HERMES_KANBAN_TASK\" --summary fine")


def shown(home, card) -> dict:
    r = kanban(home, "show", card, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_worker_reports_its_runs_usage_and_it_is_shown_per_run_card_and_board(home, board_env):  # noqa: F811
    home.config_file.write_text(f"kanban:\n  profiles:\n    w: '{WORKER}'\n")
    card = create(home, "worked", "--assignee", "w")
    idle = create(home, "never run")
    r = kanban(home, "usage", idle, "--input-tokens", "1", "--output-tokens", "1")
    assert r.returncode == 1 and f"{idle} has no run to record usage for" in r.stderr, r.stderr
    assert kanban(home, "dispatch").returncode == 0
    wait_until(lambda: shown(home, card)["status"] == "done", what="the worker to finish")
    data = shown(home, card)
    run_id = data["runs"][-1]["id"]
    assert data["usage"]["input_tokens"] == 1200 and data["usage"]["output_tokens"] == 340
    assert data["usage"]["cost_usd"] == 0.0125 and data["usage"]["unlinked_runs"] == 0
    assert [(u["run_id"], u["linked"]) for u in data["usage"]["runs"]] == [(run_id, True)]
    text = kanban(home, "show", card).stdout
    assert "Usage\n  1,200 in / 340 out tokens, $0.0125" in text
    # The run has ended: its worker's report for it is refused now, like a late complete.
    late = kanban(home, "usage", card, "--input-tokens", "9", "--output-tokens", "9",
                  env={"HERMES_KANBAN_TASK": card, "HERMES_KANBAN_RUN_ID": str(run_id)})
    assert late.returncode == 1 and f"run {run_id} is not the current run of {card}" in late.stderr
    assert shown(home, card)["usage"]["input_tokens"] == 1200
    board = json.loads(kanban(home, "list", "--json").stdout)["usage"]
    assert (board["input_tokens"], board["output_tokens"], board["linked_runs"], board["unlinked_runs"]) == \
        (1200, 340, 1, 0)
    assert shown(home, idle)["usage"] == {"input_tokens": None, "output_tokens": None, "cost_usd": None,
                                          "linked_runs": 0, "unlinked_runs": 0, "runs": []}


def test_a_run_without_a_report_is_not_linked_never_zero(home, board_env):  # noqa: F811
    home.config_file.write_text(f"kanban:\n  profiles:\n    w: '{sys.executable} -m hermes_tui kanban complete "
                                "\"$HERMES_KANBAN_TASK\"'\n")
    card = create(home, "quiet", "--assignee", "w")
    assert kanban(home, "dispatch").returncode == 0
    wait_until(lambda: shown(home, card)["status"] == "done", what="the worker to finish")
    usage = shown(home, card)["usage"]
    assert usage["input_tokens"] is None and usage["unlinked_runs"] == 1
    assert usage["runs"][0]["why"] == "its worker reported no usage"
    assert "Usage\n  usage not linked (1 run(s): its worker reported no usage)" in kanban(home, "show", card).stdout
    # A person may record it afterwards, for the card's latest run.
    r = kanban(home, "usage", card, "--input-tokens", "5", "--output-tokens", "6", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["usage"]["input_tokens"] == 5


def test_bad_usage_numbers_are_one_usage_line(home):
    for args in (["--input-tokens", "-1", "--output-tokens", "1"], ["--input-tokens", "x", "--output-tokens", "1"],
                 ["--input-tokens", "1", "--output-tokens", "1", "--cost-usd", "nan"]):
        r = kanban(home, "usage", "t_abcd", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
