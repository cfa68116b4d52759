"""A tick on a big board (issue 22): the ready cards are sorted out (held back with
their reasons, or picked) off the event loop that ticks, with the same results and
words, and only the picked cards' titles and bodies are read. On the SQLite board and
on a PostgreSQL board, as tests/test_kanban_dispatch.py runs them."""

from __future__ import annotations

import threading

from engine.kanban import dispatcher as dispatch
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.wording import held_back_words
from engine.kanban.workers import NullSpawner
from tests.support.kanban import kanban_settings
from tests.test_kanban_dispatch import world  # noqa: F401 (a fixture)


async def test_a_big_boards_ready_cards_are_sorted_out_off_the_event_loop(world, monkeypatch):  # noqa: F811
    """The app's dispatcher spent 0.4 s of its event loop per tick noting why each of
    100,000 ready cards was held back (here: more cards than the threshold, made small)."""
    monkeypatch.setattr(dispatch, "CLASSIFY_IN_THREAD", 2)
    where: list[threading.Thread] = []
    classify = dispatch.Dispatcher._classify

    def watched(self, *args):
        where.append(threading.current_thread())
        return classify(self, *args)

    monkeypatch.setattr(dispatch.Dispatcher, "_classify", watched)
    home, clock, make = world
    settings = kanban_settings({"a": {"command": "true", "max_in_progress": 1}})
    board, disp, _ = await make(settings, NullSpawner())
    try:
        first = await tr.create_task(board, NewTask("first", assignee="a", priority=5, body="the body"))
        second = await tr.create_task(board, NewTask("second", assignee="a"))
        nobody = await tr.create_task(board, NewTask("nobody's"))
        result = await disp.tick()
        assert where and threading.main_thread() not in where
        assert [(s.task_id, s.assignee) for s in result.spawned] == [(first.id, "a")]
        assert {s.task_id: s.reason for s in result.skipped} == {second.id: "per_profile_capped",
                                                                 nobody.id: "skipped_unassigned"}
        result = await disp.tick()
        words = held_back_words(result).removeprefix("held back: ").split("; ")  # in the cards' order
        assert sorted(words) == ["1 card unassigned, and no default assignee is set",
                                 "1 card waiting: 1 of 1 running, the profile's cap (a)"]
    finally:
        await board.close()
