"""Process notifications as toasts, through the real pane with real sessions: one toast
per refresh at most (the demo's first refresh covered half an 80x24 screen), and a
watched session's repeated matches are held and grouped (they came back every 15-20 s).
Everything still lands in the notifications list. The clock is the one boundary faked
(the watch cooldown and the grouping window are 15 and 60 s)."""

from __future__ import annotations

from test_processes_app import FAST, PaneOnly, cleanup  # noqa: F401

from engine.config import Settings
from engine.processes import ProcessRegistry
from tests.support import wait_until_pilot
from tests.support.commands import until
from tests.support.kanban import FakeClock
from widgets.processes.processes_pane import ProcessesPane
from widgets.processes.toast_groups import TOAST_GROUP_SECONDS, TOAST_SETTLE_SECONDS


class Recording(PaneOnly):
    def __init__(self, home, settings) -> None:
        super().__init__(home, settings)
        self.titled: list[tuple[str, str]] = []

    def notify(self, message, **kw):
        self.titled.append((kw.get("title") or "", str(message)))
        return super().notify(message, **kw)


async def test_completions_waiting_at_start_are_one_toast_naming_each(home):
    reg = ProcessRegistry(home, Settings())
    done = [reg.spawn(f"echo run {i}; exit {i}", notify=True) for i in range(3)]
    for s in done:
        reg.wait(s.id, timeout=30)
    app = Recording(home, FAST)
    async with app.run_test(size=(80, 24)) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: len(pane.notifications) == 3)
        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert len(app.titled) == 1, app.titled
        title, body = app.titled[0]
        assert title.startswith("3 process notifications")
        assert all(s.id in body for s in done)


async def test_a_watched_session_s_repeated_matches_are_grouped_into_one_later_toast(home, tmp_path,
                                                                                   cleanup):  # noqa: F811
    gates = [tmp_path / f"gate-{i}" for i in range(3)]
    clock = FakeClock()
    app = Recording(home, FAST)
    async with app.run_test(size=(80, 24)) as pilot:
        pane: ProcessesPane = app.pane("processes")
        pane.clock = pane.center.clock = clock
        s = ProcessRegistry(home, Settings()).spawn(
            "echo 'WARN one';" + "".join(f"{until(g)} echo 'WARN {i}';" for i, g in enumerate(gates)) + "sleep 60",
            watch=["WARN"])

        def matches() -> int:
            return sum(1 for e in pane.notifications if e.kind == "watch_match")

        await wait_until_pilot(pilot, lambda: matches() == 1)
        assert len(app.titled) == 1 and "WARN one" in app.titled[0][1]
        for n, gate in enumerate(gates[:2], start=2):
            clock.advance(16)  # past the engine's 15 s cooldown: the match is delivered
            gate.touch()
            await wait_until_pilot(pilot, lambda n=n: matches() == n)
        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert len(app.titled) == 1, app.titled  # held: in the list, not toasted again
        clock.advance(TOAST_GROUP_SECONDS)
        await wait_until_pilot(pilot, lambda: len(app.titled) == 2)
        assert f"{s.id}: 2 more watch matches since" in app.titled[1][1]
        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert len(app.titled) == 2  # said once


async def test_an_event_soon_after_a_toast_waits_so_toasts_never_pile_up(home, tmp_path, cleanup):  # noqa: F811
    """The demo's start: a completion, then a watch match a refresh later, were two toasts
    stacked over an 80x24 screen. The second waits until the first has gone."""
    reg = ProcessRegistry(home, Settings())
    done = reg.spawn("echo built; exit 1", notify=True)
    reg.wait(done.id, timeout=30)
    gate = tmp_path / "gate"
    clock = FakeClock()
    app = Recording(home, FAST)
    async with app.run_test(size=(80, 24)) as pilot:
        pane: ProcessesPane = app.pane("processes")
        pane.clock = pane.center.clock = clock
        await wait_until_pilot(pilot, lambda: len(app.titled) == 1)
        assert app.titled[0][0] == "process completed"
        watched = reg.spawn(f"{until(gate)} echo 'WARN queue depth'; sleep 60", watch=["WARN"])
        await wait_until_pilot(pilot, lambda: watched.id in pane.row_ids)
        clock.advance(2)
        gate.touch()
        await wait_until_pilot(pilot, lambda: any(e.kind == "watch_match" for e in pane.notifications))
        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert len(app.titled) == 1  # in the list at once; its toast waits
        clock.advance(TOAST_SETTLE_SECONDS)
        await wait_until_pilot(pilot, lambda: len(app.titled) == 2)
        assert "WARN queue depth" in app.titled[1][1] and "more" not in app.titled[1][1]
