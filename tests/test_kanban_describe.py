"""A card's description (``describe_task``): the one text ``kanban show`` prints and the
details dialog styles."""

from __future__ import annotations

import time

from engine.kanban.describe import Part, describe_task, payload_text, plain_text
from engine.kanban.models import Comment, Event, Run, Task, TaskDetails
from widgets.board.board_modals import render_details

NOW = 1_800_000_000.0


def _task(**kw) -> Task:
    base = dict(id="t_00000001", title="Call the billing API", body="", assignee="coder", status="blocked",
                priority=2, created_at=NOW - 7200)
    base.update(kw)
    return Task(**base)


def _run(run_id: int, outcome: str | None, **kw) -> Run:
    base = dict(id=run_id, task_id="t_00000001", profile="coder", status="ended" if outcome else "running",
                claim_lock="host:1", worker_pid=4711, worker_started_at="b|1", session_id=None, output_path=None,
                log_offset=0, started_at=NOW - 600, ended_at=NOW - 60 if outcome else None, outcome=outcome,
                error=None, summary=None)
    base.update(kw)
    return Run(**base)


def _details(task: Task, runs=(), events=(), comments=(), parents=(), children=()) -> TaskDetails:
    return TaskDetails(task, tuple(parents), tuple(children), tuple(runs), tuple(events), tuple(comments))


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def test_fields_sections_and_the_parts_a_ui_styles():
    task = _task(consecutive_failures=2, max_retries=3, body="Use the sandbox.\nNever prod.",
                 last_failure_error="pid 4711 exited with code 1", worker_pid=4711, claim_lock="host:1",
                 claim_expires=NOW + 60, max_runtime_seconds=90.0)
    runs = [_run(1, "crashed", error="pid 4711 killed by signal SIGKILL"), _run(2, None)]
    events = [Event(1, task.id, None, "created", {"status": "ready", "by": "cli", "note": ""}, NOW - 7200)]
    lines = describe_task(_details(task, runs, events, parents=["t_0000000a"]), NOW)
    text = plain_text(lines).splitlines()
    assert text[:9] == [
        "t_00000001  Call the billing API",
        "  status      blocked",
        "  assignee    coder",
        "  priority    2",
        f"  created     {_when(NOW - 7200)} (2h ago)",
        "  failures    2 of 3",
        f"  worker      pid 4711  claim host:1  expires {_when(NOW + 60)}",
        "  max runtime 90s",
        "  parents     t_0000000a",
    ]
    assert text[9:16] == ["", "Last failure", "  pid 4711 exited with code 1", "", "Body", "  Use the sandbox.",
                          "  Never prod."]
    assert text[16:20] == ["", "Runs (2)", f"  #1    coder      {_when(NOW - 600)}  crashed  pid 4711  pid 4711 "
                                           "killed by signal SIGKILL", f"  #2    coder      {_when(NOW - 600)}  open  pid 4711"]
    assert text[20:] == ["", "Events (1)", f"  {_when(NOW - 7200)}  created  by=cli status=ready"]
    parts = {text: part for line in lines for text, part in line}
    assert parts["Last failure"] is Part.TITLE and parts["  pid 4711 exited with code 1"] is Part.ERROR
    assert parts["  pid 4711 killed by signal SIGKILL"] is Part.NOTE and parts["  failures    "] is Part.LABEL
    assert parts["crashed"] is Part.BAD and parts["open"] is Part.GOOD and parts["created"] is Part.NAME
    assert "Worker log" not in plain_text(lines)  # only when a log tail is given


def test_an_empty_card_says_so_and_comments_name_their_author():
    comment = Comment(1, "t_00000001", "default", "started on it", NOW - 30)
    text = plain_text(describe_task(_details(_task(), comments=[comment]), NOW))
    assert "\nBody\n  (empty)\n" in text and "\nRuns (0)\n  none yet\n" in text
    assert f"\nComments (1)\n  {_when(NOW - 30)}  default: started on it\n" in text
    assert text.endswith("\nEvents (0)\n  none yet")
    assert "last failure" not in text.lower() and "worker " not in text


def test_events_read_with_a_limit_say_they_are_the_last_ones_and_the_log_tail_is_a_section():
    events = [Event(i, "t_00000001", None, "heartbeat", {}, NOW - i) for i in range(3)]
    details = _details(_task(), events=events)
    assert "Events (3)" in plain_text(describe_task(details, NOW, event_limit=20))
    assert "Events (last 3)" in plain_text(describe_task(details, NOW, event_limit=3))
    with_log = plain_text(describe_task(details, NOW, log_tail=["connecting", "HTTP 403"]))
    assert with_log.endswith("\nWorker log (tail)\n  connecting\n  HTTP 403")
    assert plain_text(describe_task(details, NOW, log_tail=[])).endswith("\nWorker log (tail)\n  (no output yet)")


def test_outside_text_stays_text_and_payloads_drop_empty_values():
    task = _task(title="[bold]x", body="[red]body[/red]", last_failure_error="[/] [link=x]")
    text = plain_text(describe_task(_details(task), NOW))
    assert "[bold]x" in text and "[red]body[/red]" in text and "[/] [link=x]" in text
    assert payload_text({"b": 1, "a": "x", "c": None, "d": [], "e": ""}) == "a=x b=1"


def test_the_dialog_styles_the_same_description():
    task = _task(last_failure_error="boom", body="[red]body[/red]")
    details = _details(task, runs=[_run(1, "completed", summary="done")])
    shown = render_details(details, ["a log line"], NOW)
    assert shown.plain == plain_text(describe_task(details, NOW, log_tail=["a log line"])) + "\n"
    styles = {shown.plain[span.start:span.end]: str(span.style) for span in shown.spans}
    assert styles["  boom"] == "red" and styles["completed"] == "green" and styles["  done"] == "dim"


def test_the_board_shows_escape_sequences_in_a_cards_text_never_acts_on_them():
    """A title, body, error or log line holding ESC/BEL reaches the terminal as visible
    escapes: on the card, in the board's detail line and in the details dialog."""
    from widgets.board.board_pane import CardView, shown_task

    evil = "evil \x1b[31mRED\x07"
    task = _task(title=evil, body="line 1\n\x1b]0;title\x07", last_failure_error=evil, assignee="c\x1bx")
    card = CardView(shown_task(task), None).prompt(NOW)
    dialog = render_details(_details(task), [evil], NOW)
    for shown in (card.plain, dialog.plain):
        assert "\x1b" not in shown and "\x07" not in shown
        assert "evil \\x1b[31mRED\\x07" in shown
    assert "line 1\n" in dialog.plain  # the body keeps its lines
