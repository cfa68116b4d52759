"""Worker policy: exit classification, the card log copy and rotation, last words."""

from __future__ import annotations

from engine.kanban.models import RunOutcome
from engine.kanban.workers import (
    RUN_HEADER_PREFIX,
    WorkerExit,
    append_log_line,
    classify_exit,
    copy_new_output,
    is_host_local,
    last_words,
    stop_worker,
    with_last_words,
)


def test_exit_classification():
    assert classify_exit(5, WorkerExit(code=3), False).error == "pid 5 exited with code 3"
    assert classify_exit(5, WorkerExit(code=143, signal="SIGTERM"), False).error == "pid 5 killed by signal SIGTERM"
    rl = classify_exit(5, WorkerExit(code=75), False)
    assert (rl.outcome, rl.counts_as_failure) == ("rate_limited", False)
    pv = classify_exit(5, WorkerExit(code=0), False)
    assert (pv.outcome, pv.counts_as_failure) == ("protocol_violation", False)
    assert classify_exit(5, WorkerExit(code=0), True).outcome == "completed"
    lost = classify_exit(5, None, True)  # no record: never invented, never "completed"
    assert (lost.outcome, lost.error) == ("crashed", "pid 5 not alive (no exit recorded)")
    assert lost.outcome is RunOutcome.CRASHED  # an enum, stored and printed as its old text
    # Ended at its gate (the wrapper's not_started mark): not a failure, whatever its code.
    never = classify_exit(5, WorkerExit(code=125, started=False), False)
    assert (never.outcome, never.counts_as_failure) == ("not_started", False)


def test_run_outcomes_keep_the_values_the_board_stores():
    assert {o.name: o.value for o in RunOutcome} == {
        "COMPLETED": "completed", "BLOCKED": "blocked", "REVIEW": "review", "CRASHED": "crashed",
        "PROTOCOL_VIOLATION": "protocol_violation", "RATE_LIMITED": "rate_limited", "TIMED_OUT": "timed_out",
        "RECLAIMED": "reclaimed", "SPAWN_FAILED": "spawn_failed", "ARCHIVED": "archived", "HOST_LOST": "host_lost",
        "KILLED": "killed",
        "NOT_STARTED": "not_started"}


def test_copy_by_offset_rotates_and_restarts_after_a_shrink(tmp_path):
    src, dest = tmp_path / "output.log", tmp_path / "t_1.log"
    src.write_bytes(b"a" * 600)
    offset = copy_new_output(src, dest, 0, limit=1000)
    assert offset == 600 and dest.read_bytes() == b"a" * 600
    assert copy_new_output(src, dest, offset, limit=1000) == 600  # nothing new: nothing copied
    with open(src, "ab") as fh:
        fh.write(b"b" * 600)
    offset = copy_new_output(src, dest, offset, limit=1000)
    assert offset == 1200
    assert (tmp_path / "t_1.log.1").read_bytes() == b"a" * 600  # one backup
    assert dest.read_bytes() == b"b" * 600
    src.write_bytes(b"new")  # replaced by a shorter file: read again from 0
    assert copy_new_output(src, dest, offset, limit=1000) == 3
    assert dest.read_bytes().endswith(b"new")
    assert copy_new_output(tmp_path / "missing", dest, 7) == 7
    assert dest.stat().st_mode & 0o777 == 0o600


def test_last_words_are_this_runs_tail_without_blank_lines(tmp_path):
    log = tmp_path / "t.log"
    append_log_line(log, f"{RUN_HEADER_PREFIX}1 ===")
    log.write_text(log.read_text() + "old run said this\n")
    append_log_line(log, f"{RUN_HEADER_PREFIX}2 ===")
    with open(log, "a") as fh:
        fh.write("\n\nfirst line\n   \nsecond line\n")
    assert last_words(log) == "first line second line"  # only run 2, blank lines dropped
    with open(log, "a") as fh:
        fh.write(("y" * 99 + "\n") * 50 + "the end\n")
    words = last_words(log)
    assert len(words) == 400 and words.endswith("y the end")
    assert last_words(tmp_path / "missing.log") == ""
    assert with_last_words("boom", "") == "boom"
    assert with_last_words("boom", "bye") == "boom Worker's last output: 'bye'"


def test_foreign_host_or_missing_pid_is_never_signalled():
    assert not is_host_local("some-other-host:123")
    report = stop_worker(1, "whatever|1", "some-other-host:123", 0.1)
    assert not report.attempted and report.refused
    assert stop_worker(None, None, None, 0.1).stopped
