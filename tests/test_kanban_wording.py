"""What a change to a card did, in the one wording the CLI prints and the board pane shows."""

from __future__ import annotations

from engine.kanban.transitions import TransitionResult
from engine.kanban.wording import assign_words, change_words
from engine.kanban.workers import StopReport


def _result(stop: StopReport | None = None, to: str = "ready") -> TransitionResult:
    return TransitionResult("t_1", "running", to, stop)


def test_a_change_says_its_verb_the_move_and_what_became_of_the_worker():
    assert change_words("move", _result()) == "Moved t_1  (running -> ready)"
    assert change_words("heartbeat", _result(to="running")) == "Heartbeat recorded for t_1"
    assert change_words("reclaim", _result(StopReport(None, host_local=True))) == "Reclaimed t_1  (running -> ready)"
    stopped = StopReport(42, host_local=True, attempted=True, stopped=True)
    assert change_words("archive", _result(stopped, "archived")) == \
        "Archived t_1  (running -> archived); worker pid 42 stopped"
    survived = StopReport(42, host_local=True, attempted=True, survivors=(42, 43))
    assert change_words("reclaim", _result(survived)).endswith("; worker pid 42 SURVIVED (42, 43)")
    refused = StopReport(42, host_local=False, refused="it runs on another host")
    assert change_words("reclaim", _result(refused)).endswith("; worker pid 42 not signalled: it runs on another host")
    recycled = StopReport(42, host_local=True, pid_recycled=True)
    assert change_words("reclaim", _result(recycled)).endswith(
        "; worker pid 42 now belongs to another process: not signalled")


def test_an_assignment_names_the_profile_or_nobody():
    assert assign_words("t_1", "writer") == "Assigned t_1 to writer"
    assert assign_words("t_1", None) == "Assigned t_1 to nobody"
