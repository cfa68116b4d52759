"""What a change to a card did, in the one wording the CLI prints and the board pane shows."""

from __future__ import annotations

from engine.kanban.tick_result import DispatchResult, Skip
from engine.kanban.transitions import TransitionResult
from engine.kanban.wording import assign_words, change_words, failure_reset_words, held_back_words
from engine.kanban.workers import StopReport
from engine.text import count_of


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
    refused = StopReport(42, host_local=False, refused="it runs on another host (b)")
    assert change_words("reclaim", _result(refused)).endswith(
        "; worker pid 42 not signalled: it runs on another host (b); that host stops it on its next tick; the card "
        "waits (awaiting_host_stop) until then, or until that host's lease lapses")
    assert change_words("archive", _result(refused, "archived")).endswith(
        "; worker pid 42 not signalled: it runs on another host (b); that host stops it on its next tick")
    recycled = StopReport(42, host_local=True, pid_recycled=True)
    assert change_words("reclaim", _result(recycled)).endswith(
        "; worker pid 42 now belongs to another process: not signalled")


def test_an_assignment_names_the_profile_or_nobody():
    assert assign_words("t_1", "writer") == "Assigned t_1 to writer"
    assert assign_words("t_1", None) == "Assigned t_1 to nobody"


def test_held_back_words_quote_the_profile_and_count_cards_in_the_singular_and_plural():
    def skip(task_id, profile):
        return Skip(task_id, "skipped_nonspawnable", profile=profile)

    one = DispatchResult(skipped=(skip("t_1", "worker"),))
    assert held_back_words(one) == "held back: 1 card assigned to 'worker', not a profile this machine can spawn"
    two = DispatchResult(skipped=(skip("t_1", None), skip("t_2", None)))
    assert held_back_words(two) == "held back: 2 cards assigned to a profile this machine cannot spawn"
    assert [count_of(n, "card") for n in (0, 1, 2)] == ["0 cards", "1 card", "2 cards"]


def test_a_failure_counter_at_zero_is_not_said_to_reset():
    assert failure_reset_words(0) == ""
    assert failure_reset_words(2) == "its failure counter (2) resets to 0"
