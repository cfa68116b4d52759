"""The board's rules a person meets, and their words, in the engine: where a card may
move next, what a stop will do to its worker (judged on real processes), and the
confirm dialogs and refusals the board pane shows as they are."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from engine.identity import UNVERIFIED, fingerprint
from engine.kanban.models import Task
from engine.kanban.transitions import MOVE_COLUMNS, MOVES, StopPlan, next_move, stop_plan
from engine.kanban.wording import (
    archive_confirm,
    cannot_move_words,
    move_running_confirm,
    reclaim_confirm,
    refused_words,
    run_named,
    stop_plan_words,
    unblock_confirm,
)
from engine.kanban.workers import claim_lock_here


def _task(status: str = "running", **fields) -> Task:
    return dataclasses.replace(Task("t_1", "Port the importer", "", "coder", status, 0, 0.0), **fields)


@pytest.fixture
def child():
    """A real process of ours (its own session), ended after the test."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


# -- where a card may move --------------------------------------------------------------------


def test_a_move_steps_to_the_nearest_allowed_column_and_stops_at_the_ends():
    assert next_move("todo", 1) == "ready"
    assert next_move("todo", -1) is None
    assert next_move("ready", 1) == "review"  # running is the dispatcher's, skipped
    assert next_move("running", 1) == "review"
    assert next_move("running", -1) is None  # back to ready is a reclaim, not a move
    assert next_move("review", -1) == "ready"
    assert next_move("blocked", 1) == "done" and next_move("blocked", -1) == "ready"
    assert next_move("done", 1) is None and next_move("done", -1) is None
    assert next_move("archived", -1) is None and next_move("triage", 1) is None  # not a column here


def test_every_move_a_step_finds_is_an_allowed_one():
    for status in MOVE_COLUMNS:
        for step in (1, -1):
            target = next_move(status, step)
            assert target is None or target in MOVES[status]


def test_a_card_that_cannot_move_says_where_it_may_go():
    assert cannot_move_words(_task("running"), -1) == "t_1 cannot move left from running (allowed: review, blocked, done)"
    assert cannot_move_words(_task("done"), 1) == "t_1 cannot move right from done (allowed: none)"


# -- what a stop will do to a worker -------------------------------------------------------------


def test_a_verified_worker_of_this_host_is_signalled(child):
    task = _task(worker_pid=child.pid, worker_started_at=fingerprint(child.pid), claim_lock=claim_lock_here())
    assert stop_plan(task) is StopPlan.SIGNAL
    assert stop_plan_words(task, StopPlan.SIGNAL, 2.5) == (
        f"Its worker pid {child.pid} (identity verified) gets SIGTERM to its process group, then "
        "SIGKILL after 2.5s if still alive.")


def test_an_unverified_a_recycled_and_an_exited_worker_are_never_signalled(child):
    here = claim_lock_here()
    unverified = _task(worker_pid=child.pid, worker_started_at=UNVERIFIED, claim_lock=here)
    assert stop_plan(unverified) is StopPlan.UNVERIFIED
    boot, _bar, ticks = fingerprint(child.pid).partition("|")
    recycled = _task(worker_pid=child.pid, worker_started_at=f"{boot}|{int(ticks) + 1}", claim_lock=here)
    assert stop_plan(recycled) is StopPlan.RECYCLED
    ended = subprocess.Popen(["true"])
    ended_fp = fingerprint(ended.pid)
    ended.wait()
    assert stop_plan(_task(worker_pid=ended.pid, worker_started_at=ended_fp, claim_lock=here)) is StopPlan.EXITED
    assert "NOT signalled" in stop_plan_words(unverified, StopPlan.UNVERIFIED, 2)
    assert stop_plan_words(recycled, StopPlan.RECYCLED, 2) == f"Pid {child.pid} now belongs to another process: " \
                                                              "it is NOT signalled."


def test_no_worker_and_another_hosts_worker_are_left_alone(child):
    assert stop_plan(_task()) is StopPlan.NO_WORKER
    elsewhere = _task(worker_pid=child.pid, worker_started_at=fingerprint(child.pid), claim_lock="elsewhere-host:12")
    assert stop_plan(elsewhere) is StopPlan.OTHER_HOST
    assert stop_plan_words(elsewhere, StopPlan.OTHER_HOST, 2) == (
        f"Its worker pid {child.pid} runs on another host (elsewhere-host:12): nothing is signalled from here; "
        "that host's dispatcher stops it on its next tick.")


# -- the dialogs and refusals -----------------------------------------------------------------------


def test_moving_a_running_card_says_the_dispatcher_stops_the_worker_later():
    words = move_running_confirm(_task(current_run_id=7, worker_pid=42), "done", 30)
    assert (words.title, words.yes) == ("Move t_1 to done?", "Move to done")
    assert words.body.startswith('t_1 "Port the importer" is running (run 7, worker pid 42).\n\n')
    assert "alive 30s after that, the dispatcher stops it" in words.body


def test_a_reclaim_names_the_run_the_counter_and_the_plan():
    task = _task(current_run_id=7, worker_pid=42, consecutive_failures=2, claim_lock="elsewhere-host:12")
    words = reclaim_confirm(task, StopPlan.OTHER_HOST, 2)
    assert (words.title, words.yes) == ("Reclaim t_1?", "Reclaim")
    assert words.body == ('t_1 "Port the importer" (run 7, worker pid 42) goes back to ready and its failure '
                          "counter (2) resets to 0.\n\nIts worker pid 42 runs on another host (elsewhere-host:12): "
                          "nothing is signalled from here; that host's dispatcher stops it on its next tick. The card "
                          "waits (awaiting_host_stop) until that host has stopped it or its lease lapsed: it is not "
                          "started again beside it.")
    hermes = reclaim_confirm(task, StopPlan.OTHER_HOST, 2, by_hermes=True)
    assert "`hermes kanban reclaim`" in hermes.body and "signals nothing" in hermes.body
    assert run_named(_task()) == "run -, worker pid -"


def test_an_archive_tells_a_running_cards_worker_plan_and_nothing_for_another():
    running = archive_confirm(_task(worker_pid=42, current_run_id=3), StopPlan.EXITED, 2)
    assert running.title == "Archive t_1?" and running.body.endswith(
        "\n\nIts run 3, worker pid 42. Its worker pid 42 has already exited: nothing is signalled.")
    done = archive_confirm(_task("done"), StopPlan.NO_WORKER, 2)
    assert done.body == "t_1 \"Port the importer\" moves from done to archived (hidden unless 'show archived')."


def test_an_unblock_says_the_counter_and_the_last_failure():
    words = unblock_confirm(_task("blocked", consecutive_failures=3, last_failure_error="exit 1"))
    assert (words.title, words.yes) == ("Unblock t_1?", "Unblock")
    assert ", and its failure counter (3) resets to 0, so the dispatcher" in words.body
    assert words.body.endswith("\n\nLast failure: exit 1")
    assert "counter" not in unblock_confirm(_task("blocked")).body


def test_a_verb_refused_for_the_cards_status_says_why_in_one_line():
    assert refused_words("reclaim", _task("ready")) == "t_1 is ready: only a running card can be reclaimed"
    assert refused_words("reclaim", _task("running")) is None
    assert refused_words("unblock", _task("done")) == "t_1 is done, not blocked"
    assert refused_words("unblock", _task("blocked")) is None
    assert refused_words("archive", _task("archived")) == "t_1 is already archived"
    assert refused_words("archive", _task("running")) is None
