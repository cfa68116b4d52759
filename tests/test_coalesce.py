"""Coalesced: one run at a time, once more when asked meanwhile, and a run cancelled
before it began (a worker cancelled while queued) does not stop every later request."""

from __future__ import annotations

import asyncio

from engine.coalesce import Coalesced


class _Handle:
    """What a starter returns: a Textual Worker's ``is_finished``, nothing else."""

    def __init__(self) -> None:
        self.is_finished = False


async def test_requests_during_a_run_make_one_more_run_after_it():
    gate, runs = asyncio.Event(), []

    async def job() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            await gate.wait()

    tasks = []
    c = Coalesced(lambda fn: tasks.append(asyncio.ensure_future(fn())), job)
    c.request()
    await asyncio.sleep(0)
    c.request()
    c.request()  # two asks meanwhile: one more run
    gate.set()
    await asyncio.gather(*tasks)
    assert runs == [0, 1] and len(tasks) == 1 and not c.running


async def test_a_run_cancelled_before_it_began_does_not_block_the_next_request():
    handles: list[_Handle] = []
    started: list[object] = []

    def never_runs(fn) -> _Handle:  # the worker is cancelled while queued: fn is never called
        started.append(fn)
        handles.append(_Handle())
        return handles[-1]

    c = Coalesced(never_runs, lambda: asyncio.sleep(0))
    c.request()
    c.request()  # the first is still queued: remembered, not started twice
    assert len(started) == 1
    handles[0].is_finished = True  # cancelled before it began
    c.request()
    assert len(started) == 2 and c.running  # started again instead of waiting for ever
