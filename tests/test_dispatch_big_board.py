"""A tick on a big board (issue 22): the ready cards are sorted out (held back with
their reasons, or picked) off the event loop that ticks, with the same results and
words, and only the picked cards' titles and bodies are read. On the SQLite board and
on a PostgreSQL board, as tests/test_kanban_dispatch.py runs them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from engine.kanban import dispatcher as dispatch
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.wording import held_back_words
from engine.kanban.workers import NullSpawner
from tests.support.kanban import kanban_settings, kill_all_workers, wait_for_exit
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


# -- a quiet board is not read again (issue 22) --------------------------------------------------


class _Reads:
    """Counts the board's reads a tick makes (the calls themselves are the real ones)."""

    def __init__(self, board, monkeypatch, after_first=None) -> None:
        self.count = 0
        self._after_first = after_first
        for name in ("fetch", "fetch_many"):
            real = getattr(board, name)

            async def counted(*args, _real=real, **kwargs):
                self.count += 1
                rows = await _real(*args, **kwargs)
                if self._after_first is not None:
                    then, self._after_first = self._after_first, None
                    await asyncio.to_thread(then)
                return rows

            monkeypatch.setattr(board, name, counted)

    def since(self) -> int:
        count, self.count = self.count, 0
        return count


def _assign_from_another_process(home, task_id: str, profile: str) -> None:
    """A change committed by another connection: the CLI, as a person would run it."""
    done = subprocess.run([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "assign",
                           task_id, profile], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


async def test_a_board_that_only_holds_cards_back_is_not_read_again_until_it_changes(world, monkeypatch):  # noqa: F811
    """A 100,000-card board whose cards wait for an assignee was read whole every tick
    (1.7 s of the board's thread each, on an idle app). Now a tick that changed nothing
    is given again while the board's data version stands; a server board, which has no
    version, is read every tick as before."""
    home, clock, make = world
    settings = kanban_settings({"a": "true"})
    board, _disp, spawner = await make(settings, NullSpawner())
    quiet = dispatch.QuietTick()
    disp = dispatch.Dispatcher(board, home=home, settings=settings, spawner=spawner, quiet=quiet)
    try:
        waiting = await tr.create_task(board, NewTask("waits for an assignee"))
        odd = await tr.create_task(board, NewTask("not a profile here", assignee="ghost"))
        reads = _Reads(board, monkeypatch)
        first = await disp.tick()  # also notes the nonspawnable card once (a write)
        held = {s.task_id: s.reason for s in first.skipped}
        assert held == {waiting.id: "skipped_unassigned", odd.id: "skipped_nonspawnable"}
        assert reads.since() > 0
        second = await disp.tick()  # its own note moved the version: read once more
        assert reads.since() > 0
        third = await disp.tick()
        fourth = await disp.tick()
        server_board = await board.data_version() is None
        if server_board:
            assert reads.since() > 0
        else:
            assert reads.since() == 0, "an unchanged board was read again"
        assert second.skipped == third.skipped == fourth.skipped
        assert held_back_words(fourth) == held_back_words(first)
        await tr.assign(board, waiting.id, "a")  # this connection's own change
        assert [s.task_id for s in (await disp.tick()).spawned] == [waiting.id]
    finally:
        await board.close()


async def test_a_change_another_process_commits_during_a_quiet_tick_is_seen_by_the_next(world, monkeypatch):  # noqa: F811
    """The version a quiet tick keeps is the one read before its reads: a card assigned
    by the CLI just after the tick read the board (so this tick held it back) is spawned
    by the next tick, not held back for good."""
    home, clock, make = world
    settings = kanban_settings({"a": "true"})
    board, _disp, spawner = await make(settings, NullSpawner())
    if await board.data_version() is None:
        pytest.skip("a server board has no data version: every tick reads it")
    quiet = dispatch.QuietTick()
    disp = dispatch.Dispatcher(board, home=home, settings=settings, spawner=spawner, quiet=quiet)
    try:
        card = await tr.create_task(board, NewTask("waits for an assignee"))
        _Reads(board, monkeypatch, after_first=lambda: _assign_from_another_process(home, card.id, "a"))
        during = await disp.tick()
        assert [s.reason for s in during.skipped] == ["skipped_unassigned"]  # read before the change
        assert [s.task_id for s in (await disp.tick()).spawned] == [card.id]
    finally:
        await board.close()


async def test_a_held_back_cooldown_that_runs_out_is_spawned_without_a_board_change(world):  # noqa: F811
    """A rate-limit cooldown ends with time, not with a change of the board: the kept
    tick stands only until the earliest cooldown of the cards it held back."""
    home, clock, make = world
    settings = kanban_settings({"w": "exit 75"}, crash_grace_seconds=0, rate_limit_cooldown_seconds=300)
    board, _disp, spawner = await make(settings)
    quiet = dispatch.QuietTick()
    disp = dispatch.Dispatcher(board, home=home, settings=settings, spawner=spawner, quiet=quiet)
    try:
        t = await tr.create_task(board, NewTask("busy api", assignee="w"))
        first = await disp.tick()
        wait_for_exit(spawner, first.spawned[0].session_id)
        assert (await disp.tick()).rate_limited == (t.id,)
        for _ in range(3):
            clock.advance(60)
            assert [s.reason for s in (await disp.tick()).skipped] == ["rate_limit_cooldown"]
        clock.advance(121)  # 301 s after the run ended
        assert [s.task_id for s in (await disp.tick()).spawned] == [t.id]
    finally:
        kill_all_workers(spawner)
        await board.close()


async def test_other_settings_read_the_board_again(world, monkeypatch):  # noqa: F811
    """The held-back reasons depend on the settings (the profiles, the default assignee):
    a tick with other settings does not take a tick of the old ones for its own."""
    home, clock, make = world
    before = kanban_settings({"a": "true"})
    board, _disp, spawner = await make(before, NullSpawner())
    quiet = dispatch.QuietTick()
    try:
        card = await tr.create_task(board, NewTask("waits for an assignee"))
        tick = dispatch.Dispatcher(board, home=home, settings=before, spawner=spawner, quiet=quiet).tick
        assert [s.reason for s in (await tick()).skipped] == ["skipped_unassigned"]
        assert [s.reason for s in (await tick()).skipped] == ["skipped_unassigned"]
        after = kanban_settings({"a": "true"}, default_assignee="a")
        result = await dispatch.Dispatcher(board, home=home, settings=after, spawner=spawner, quiet=quiet).tick()
        assert [s.task_id for s in result.spawned] == [card.id]
    finally:
        await board.close()
