"""Search, copy and the notifications list of the processes pane at 80x24, with real
sessions: the match count is "k of n" and stays current as output comes; a search does
not follow you to another session; `c` says the output was sent to the terminal's
clipboard (and that tmux may drop it); the notifications list starts at an event."""

from __future__ import annotations

import re

import pytest
from test_processes_app import FAST, PaneOnly, cleanup  # noqa: F401

from engine.config import Settings
from engine.processes import ProcessRegistry
from tests.support import wait_until_pilot
from tests.support.commands import until
from widgets.processes.processes_pane import ProcessesPane

SIZE = (80, 24)


async def shown(pilot, pane: ProcessesPane, sid: str) -> None:
    await wait_until_pilot(pilot, lambda: sid in pane.row_ids)
    pane.table.focus()
    pane.show_session(sid)
    await wait_until_pilot(pilot, lambda: pane.output.session_id == sid)


async def search(pilot, term: str) -> None:
    await pilot.press("slash")
    await pilot.pause()
    await pilot.press(*term, "enter")


async def test_the_match_count_is_k_of_n_and_stays_current_as_output_grows(home, tmp_path, cleanup):  # noqa: F811
    gate = tmp_path / "gate"
    s = ProcessRegistry(home, Settings()).spawn(
        f"echo 'needle 1'; echo other; echo 'needle 2'; {until(gate)} echo 'needle 3'; echo 'needle 4'; sleep 60")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=SIZE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await shown(pilot, pane, s.id)
        await wait_until_pilot(pilot, lambda: "needle 2" in pane.output.lines)
        await search(pilot, "needle")
        await wait_until_pilot(pilot, lambda: "/needle: 1 of 2" in pane.output.title_text().plain)
        gate.touch()
        await wait_until_pilot(pilot, lambda: "needle 4" in pane.output.lines)
        await wait_until_pilot(pilot, lambda: "/needle: 1 of 4" in pane.output.title_text().plain)
        assert pane.output.matches == (0, 2, 3, 4)
        await pilot.press("n")
        assert "/needle: 2 of 4" in pane.output.title_text().plain


def shown_title(pane: ProcessesPane) -> str:
    """The title line as drawn (its widget's content), not as it would be worked out now."""
    from textual.widgets import Static

    content = pane.output.query_one("#output-title", Static).content
    return getattr(content, "plain", str(content))


async def test_the_drawn_match_counter_walks_with_n_and_shift_n(home, cleanup):  # noqa: F811
    """The family: every step through the matches (n, N, Enter again) redraws the counter
    the user reads, not only the text it would have if it were drawn again."""
    s = ProcessRegistry(home, Settings()).spawn(
        "for i in 1 2 3 4 5; do echo \"line $i\"; echo other; done; sleep 60")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=SIZE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await shown(pilot, pane, s.id)
        await wait_until_pilot(pilot, lambda: "line 5" in pane.output.lines)
        await search(pilot, "line")
        await wait_until_pilot(pilot, lambda: "/line: 1 of 5" in shown_title(pane))
        await pilot.press("n")
        await wait_until_pilot(pilot, lambda: "/line: 2 of 5" in shown_title(pane))
        await pilot.press("n", "n")
        await wait_until_pilot(pilot, lambda: "/line: 4 of 5" in shown_title(pane))
        await pilot.press("N")
        await wait_until_pilot(pilot, lambda: "/line: 3 of 5" in shown_title(pane))


async def test_a_search_does_not_follow_you_to_another_session(home, cleanup):  # noqa: F811
    reg = ProcessRegistry(home, Settings())
    first, second = (reg.spawn(f"echo 'needle in {n}'; sleep 60") for n in ("first", "second"))
    app = PaneOnly(home, FAST)
    async with app.run_test(size=SIZE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await shown(pilot, pane, first.id)
        await wait_until_pilot(pilot, lambda: pane.output.lines)
        await search(pilot, "needle")
        await wait_until_pilot(pilot, lambda: "/needle" in pane.output.title_text().plain)
        await shown(pilot, pane, second.id)
        await wait_until_pilot(pilot, lambda: pane.output.lines)
        assert pane.output.search_term is None and pane.output.matches == ()
        assert "/needle" not in pane.output.title_text().plain


@pytest.mark.parametrize("tmux", [False, True])
async def test_copy_says_it_was_sent_to_the_terminal_and_that_tmux_may_drop_it(home, cleanup, monkeypatch,  # noqa: F811
                                                                              tmux):
    if tmux:
        monkeypatch.setenv("TMUX", "/tmp/tmux-1000/default,1,0")
    s = ProcessRegistry(home, Settings()).spawn("echo one; echo two; sleep 60")
    app = PaneOnly(home, FAST)
    app.copy_to_clipboard = lambda text: None  # the terminal's side: nothing to read back headless
    async with app.run_test(size=SIZE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await shown(pilot, pane, s.id)
        await wait_until_pilot(pilot, lambda: len(pane.output.lines) == 2)
        await pilot.press("c")
        await wait_until_pilot(pilot, lambda: any("clipboard" in t for t in app.toasts))
        said = next(t for t in app.toasts if "clipboard" in t)
        assert said.startswith("2 lines of output (secrets masked) sent to the terminal's clipboard")
        assert ("(tmux may need set-clipboard on)" in said) is tmux
        assert "copied" not in said  # it cannot know that


async def test_the_notifications_list_starts_at_an_event(home):
    reg = ProcessRegistry(home, Settings())
    long = "echo " + " ".join(f"word{i}" for i in range(40)) + "; exit 0"
    done = [reg.spawn(long, notify=True) for _ in range(3)]
    for s in done:
        reg.wait(s.id, timeout=30)
    app = PaneOnly(home, FAST)
    async with app.run_test(size=SIZE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: len(pane.notifications) == 3)
        log = pane.query_one("#proc-notifications")
        stamp = re.compile(r"^\d\d:\d\d:\d\d completion proc_")
        await wait_until_pilot(pilot, lambda: log.lines)  # drawn once the list has its size

        def top() -> str:
            y = int(log.scroll_y)
            return log.lines[y].text if 0 <= y < len(log.lines) else ""

        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert len(log.lines) > log.scrollable_content_region.height  # the events wrap: more than fits
        assert stamp.match(top()), top()
        assert done[-1].id in "".join(line.text for line in log.lines[int(log.scroll_y):])  # the newest shows
