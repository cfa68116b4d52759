"""The processes pane and the command bar through Pilot, with real processes: yield with
ctrl+b (also remapped), redirect, kill through the confirm modal, completions shown once,
watch toasts, search/wrap/follow/copy, history, and an SVG snapshot of the pane."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from textual.app import App, ComposeResult

from engine import identity
from engine.config import Settings, UiSettings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry
from hermes_tui.app import HermesApp
from tests.support import screen_shown, wait_settled, wait_until, wait_until_pilot, wait_workers
from tests.support.commands import count_to_400
from widgets.common.command_bar import CommandBar
from widgets.common.confirm import ConfirmModal
from widgets.processes.processes_pane import ProcessesPane

WIDE = (160, 48)
FAST = replace(Settings(), ui=UiSettings(refresh_seconds=0.2))


def count_cmd(marker: Path, half: Path, rest: Path) -> str:
    """The command line typed for :func:`count_to_400` (gated at lines 200 and 300);
    each signal it gets is written to ``marker``."""
    traps = " ".join(f"trap 'echo {s} >> {marker}' {s};" for s in ("HUP", "INT", "TERM", "TSTP", "CONT", "USR1"))
    return f'sh -c "{traps} {count_to_400(half, rest).replace("$", chr(92) + "$")}"'


@pytest.fixture
def cleanup(home):
    yield
    reg = ProcessRegistry(home, Settings())
    for s in reg.list(include_finished=False):
        reg.kill(s.id, grace=0.2)


@pytest.fixture
def spy_signals(monkeypatch):
    sent: list = []
    real = identity.send_signal
    monkeypatch.setattr(identity, "send_signal", lambda *a, **k: sent.append(a) or real(*a, **k))
    return sent


def make_app(home, settings=FAST) -> HermesApp:
    app = HermesApp(home, settings, home_label="~/.hermes")
    app.toasts = []
    real_notify = app.notify

    def notify(message, **kw):
        app.toasts.append(str(message))
        return real_notify(message, **kw)

    app.notify = notify
    return app


async def submit(pilot, app, command: str) -> None:
    bar = app.query_one(CommandBar)
    if app.focused is not bar:
        await pilot.press("colon")
    bar.value = command
    await pilot.press("enter")


async def test_ctrl_b_yields_the_foreground_run_from_the_command_bar(home, tmp_path, cleanup, spy_signals):
    marker, half, rest = tmp_path / "signals", tmp_path / "half", tmp_path / "rest"
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        bar = app.query_one(CommandBar)
        await submit(pilot, app, count_cmd(marker, half, rest))
        # The bar is told through a message to the app: it says so within a moment.
        await wait_until_pilot(pilot, lambda: pane.foreground is not None and "running" in bar.border_title)
        fg = pane.foreground
        assert "^b" in bar.border_title
        assert fg.id not in pane.row_ids  # the foreground run is not a table row yet
        await wait_until_pilot(pilot, lambda: len(pane.output.lines) >= 200)
        assert app.focused is bar
        half.touch()  # lines come while it moves to the background
        await pilot.press("ctrl+b")  # with the command bar focused
        await wait_until_pilot(pilot, lambda: pane.foreground is None and "running" not in bar.border_title)
        rest.touch()
        assert any(f"moved to background as {fg.id}" in t for t in app.toasts)
        await wait_until_pilot(pilot, lambda: fg.id in pane.row_ids)
        await wait_until_pilot(pilot, lambda: pane.sessions[fg.id].finished and len(pane.output.lines) >= 400)
        await wait_workers(app, ["processes-foreground"])
        seen = pane.refresh_count  # two more refreshes: a late duplicate would have arrived
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert list(pane.output.lines) == [str(i) for i in range(1, 401)]  # once each, none lost
        done = ProcessRegistry(home, Settings()).get(fg.id)
        assert done.status == "exited" and done.exit_code == 0 and done.background and done.notify
        # notify-on-complete after the yield: the completion arrives once
        await wait_until_pilot(pilot, lambda: any(e.session_id == fg.id for e in pane.notifications))
    assert not marker.exists()
    assert spy_signals == []


async def test_submitting_while_one_runs_redirects(home, tmp_path, cleanup, spy_signals):
    marker, half, rest = tmp_path / "signals", tmp_path / "half", tmp_path / "rest"
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await submit(pilot, app, count_cmd(marker, half, rest))
        await wait_until_pilot(pilot, lambda: pane.foreground is not None and len(pane.output.lines) >= 100)
        first = pane.foreground
        real_sample = pane.take_snapshot

        def late_sample(*args, **kwargs):  # the sample that brings the first run's row lands after the second run started
            wait_until(lambda: pane.foreground is not None and pane.foreground.id != first.id)
            return real_sample(*args, **kwargs)

        pane.take_snapshot = late_sample
        await submit(pilot, app, "echo second; sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None and pane.foreground.id != first.id)
        second = pane.foreground
        half.touch()
        rest.touch()
        assert any("redirect" in t and first.id in t for t in app.toasts)
        await wait_until_pilot(pilot, lambda: first.id in pane.row_ids)
        assert pane.output.session_id == second.id
        await wait_until_pilot(pilot, lambda: "running" in app.query_one(CommandBar).border_title)
    reg = ProcessRegistry(home, Settings())
    done = reg.wait(first.id, timeout=30)
    assert done.exit_code == 0 and done.background and done.notify
    assert done.output_path.read_text().split() == [str(i) for i in range(1, 401)]
    assert not marker.exists()
    assert all(pid != first.pid for pid, *_ in spy_signals)


async def test_remapped_background_key(home, cleanup):
    settings = replace(FAST, keys=MappingProxyType({"processes.background": "ctrl+g"}))
    app = make_app(home, settings)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await submit(pilot, app, "sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None)
        await wait_until_pilot(pilot, lambda: "^g" in app.query_one(CommandBar).border_title)
        await pilot.press("ctrl+g")
        await wait_until_pilot(pilot, lambda: pane.foreground is None)
        assert any("moved to background" in t for t in app.toasts)


async def test_ctrl_b_with_nothing_running_says_so(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert any("nothing runs in the foreground" in t for t in app.toasts)


async def test_kill_asks_first_with_no_as_default(home, cleanup):
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn(["sleep", "30"], owner="test")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: s.id in pane.row_ids)
        pane.table.focus()
        await pilot.press("k")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        body = str(app.screen.body)
        assert "sleep 30" in body and str(s.pid) in body
        await pilot.press("enter")  # the focused default is No
        await wait_until_pilot(pilot, lambda: not isinstance(app.screen, ConfirmModal))
        await wait_workers(app, ["processes-kill"])  # none was started; any would be done
        assert identity.is_alive(s.pid, s.fingerprint)
        pane.table.focus()
        await pilot.press("k")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        await pilot.press("y")
        await wait_until_pilot(pilot, lambda: any("killed" in t for t in app.toasts))
        await wait_until_pilot(pilot, lambda: pane.sessions[s.id].status == "killed")
        assert not identity.is_alive(s.pid, s.fingerprint)


async def test_k_leaves_no_zombie_whichever_registry_of_the_process_spawned_the_session(home, cleanup):
    """The family: every child of the app's process (sessions spawned by the pane, the
    dispatcher's spawner, the demo's filler) is reaped once it ends, whichever of the
    process's registries spawned it. Before: the pane's registry reaped only its own
    children, and a session the demo's registry spawned stayed `[sh] <defunct>` until quit."""
    import os

    other = ProcessRegistry(home, Settings())  # as the demo's filler: another registry, same process
    s = other.spawn("sleep 1800", owner="test")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: s.id in pane.row_ids)
        pane.table.focus()
        await pilot.press("k")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        await pilot.press("y")
        await wait_until_pilot(pilot, lambda: pane.sessions[s.id].status == "killed")
        # Reaped: the wrapper's pid is gone from /proc, not a zombie child of this process.
        await wait_until_pilot(pilot, lambda: not os.path.exists(f"/proc/{s.pid}"))
    with pytest.raises(ChildProcessError):
        os.waitpid(s.pid, os.WNOHANG)


async def test_completions_while_no_app_was_open_show_once(home):
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn("echo done; exit 1", notify=True)
    reg.wait(s.id, timeout=10)
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: pane.notifications)
        assert [e.session_id for e in pane.notifications] == [s.id]
        assert any(s.id in t for t in app.toasts)
    again = PaneOnly(home, FAST)
    async with again.run_test(size=WIDE) as pilot:
        pane = again.pane("processes")
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= 2)
        assert pane.notifications == []


async def test_watch_match_appears_as_toast_and_in_the_list(home, cleanup, tmp_path):
    reg = ProcessRegistry(home, Settings())
    gate = tmp_path / "gate"
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= 1)
        s = reg.spawn(f"while [ ! -e '{gate}' ]; do sleep 0.01; done; echo 'server READY token=abc123secret'; "
                      "sleep 30", watch=["READY"])
        await wait_until_pilot(pilot, lambda: s.id in pane._rows)  # watched while it runs: then the line
        gate.touch()
        await wait_until_pilot(pilot, lambda: any(e.kind == "watch_match" for e in pane.notifications))
        event = next(e for e in pane.notifications if e.kind == "watch_match")
        assert event.session_id == s.id
        assert "abc123secret" not in event.text
        assert any("READY" in t for t in app.toasts)


async def test_output_view_search_wrap_follow_copy(home, cleanup):
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn("for i in $(seq 1 50); do echo line $i; done; echo 'needle here'; echo 'api_key=SECRETVALUE'")
    reg.wait(s.id, timeout=10)
    app = PaneOnly(home, FAST)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: len(pane.output.lines) >= 52)
        assert "SECRETVALUE" not in pane.output.text()
        pane.table.focus()
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*"needle", "enter")
        await pilot.pause()
        assert pane.output.search_term == "needle"
        assert pane.output.matches == (50,)
        assert not pane.output.follow  # jumping to a match stops following
        await pilot.press("f")
        assert pane.output.follow
        await pilot.press("w")
        assert pane.output.wrap and pane.output.log.wrap
        await pilot.press("c")
        assert copied and "needle here" in copied[0] and "SECRETVALUE" not in copied[0]


async def test_command_history_walks_with_up_and_down(home, cleanup):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        bar = app.query_one(CommandBar)
        for cmd in ("echo one", "echo two"):
            await submit(pilot, app, cmd)
            await wait_until_pilot(pilot, lambda: pane.foreground is None and bar.value == "")
            await wait_workers(app, ["processes-foreground"])
        await pilot.press("up")
        assert bar.value == "echo two"
        await pilot.press("up")
        assert bar.value == "echo one"
        await pilot.press("down", "down")
        assert bar.value == ""


# -- snapshot ----------------------------------------------------------------------------


def write_session(home: HomeLayout, sid: str, command: str, started: float, runtime: float, code: int | None,
                  output: str, owner: str = "cli") -> None:
    """A finished session folder in the on-disk format (fixed times, for a stable picture)."""
    d = home.processes_dir / sid
    d.mkdir(parents=True)
    meta = {"id": sid, "command": command, "argv": None, "cwd": "/work", "pid": 4242 + len(sid),
            "fingerprint": "00000000-0000-0000-0000-000000000000|1", "started_at": started,
            "owner": owner, "notify": False, "watch": [], "background": True}
    (d / "meta.json").write_text(json.dumps(meta))
    (d / "output.log").write_text(output)
    if code is not None:
        (d / "exit").write_text(f"{code}\n")
        import os

        os.utime(d / "exit", (started + runtime, started + runtime))


class PaneOnly(App):
    """The pane alone (no other pane's state in the picture or in the way)."""

    def __init__(self, home: HomeLayout, settings: Settings | None = None) -> None:
        super().__init__()
        self.home = home
        self.settings = settings or replace(Settings(), ui=UiSettings(refresh_seconds=3600))
        self.toasts: list[str] = []

    def compose(self) -> ComposeResult:
        yield ProcessesPane(home=self.home, settings=self.settings)

    def pane(self, _pane_id: str) -> ProcessesPane:
        return self.query_one(ProcessesPane)

    def notify(self, message, **kw):
        self.toasts.append(str(message))
        return super().notify(message, **kw)


def test_pane_snapshot(snap_compare, tmp_path):
    home = HomeLayout(tmp_path / "home").ensure()
    t0 = 1_700_000_000.0
    write_session(home, "proc_0a1b2c3d4e5f", "make test", t0, 75, 0, "collected 12 items\n12 passed\n")
    write_session(home, "proc_1b2c3d4e5f60", "npm run build", t0 + 10, 3, 2,
                  "> build\nerror: missing module 'left-pad'\n")
    write_session(home, "proc_2c3d4e5f6071", "sh -c 'curl -H \"Authorization: Bearer abcdef0123456789\" x'",
                  t0 + 20, 1, 137, "curl: (6) could not resolve host\n", owner="kanban:t_42")
    (home.processes_dir / "proc_2c3d4e5f6071" / "killed.json").write_text('{"signal": "SIGKILL", "at": 0}')

    async def loaded(pilot) -> None:  # the rows and the selected session's output, however slow the threads
        pane = pilot.app.pane("processes")
        await wait_until_pilot(pilot, lambda: len(pane.row_ids) == 3 and pane.output.session_id is not None)
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= 1 and len(pane.output.log.lines) > 0)
        detail = pane.query_one("#proc-detail")
        # The selected row in full takes two lines at this width: wait for the layout that gives them.
        await wait_until_pilot(pilot, lambda: detail.size.height == 2, what="the detail line laid out")
        await wait_settled(pilot)

    assert snap_compare(PaneOnly(home), terminal_size=(110, 24), run_before=loaded)


def test_output_view_memory_is_bounded_by_lines_and_size():
    from widgets.processes.output_view import OutputView

    view = OutputView(max_lines=5, tail_chars=30)
    view._keep([f"line {i}" for i in range(100)])
    assert list(view.lines)[-1] == "line 99"
    assert len(view.lines) <= 5 and sum(len(x) + 1 for x in view.lines) <= 30
    view._keep(["x" * 100])
    assert list(view.lines) == ["x" * 100]  # one over-long line is still kept whole


async def test_a_backgrounded_command_outlives_the_app_and_the_next_app_sees_its_exit(home, tmp_path, cleanup):
    gate = tmp_path / "go"
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await submit(pilot, app, f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done; echo finished; exit 4")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None and "started" in pane.output.lines)
        sid = pane.foreground.id
        await pilot.press("ctrl+b")
        await wait_until_pilot(pilot, lambda: pane.foreground is None)
    # the app has quit: the command still runs
    s = ProcessRegistry(home, Settings()).get(sid)
    assert s.status == "running" and identity.is_alive(s.pid, s.fingerprint)
    again = make_app(home)
    async with again.run_test(size=WIDE) as pilot:
        pane = again.pane("processes")
        await wait_until_pilot(pilot, lambda: sid in pane.row_ids and pane.sessions[sid].running)
        pane.table.focus()
        await wait_until_pilot(pilot, lambda: pane.output.session_id == sid and "started" in pane.output.lines)
        gate.touch()
        await wait_until_pilot(pilot, lambda: pane.sessions[sid].finished and "finished" in pane.output.lines)
        assert pane.sessions[sid].exit_code == 4
        # it was backgrounded, so it notifies on completion
        await wait_until_pilot(pilot, lambda: any(e.session_id == sid for e in pane.notifications))


async def test_editor_key_explains_what_it_needs_and_all_toggle(home, monkeypatch, cleanup):
    reg = ProcessRegistry(home, Settings())
    done = reg.spawn("echo hi")
    reg.wait(done.id, timeout=10)
    running = reg.spawn(["sleep", "30"])
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: {done.id, running.id} <= set(pane.row_ids))
        pane.table.focus()
        monkeypatch.delenv("VISUAL", raising=False)
        monkeypatch.delenv("EDITOR", raising=False)
        await pilot.press("e")
        assert any("set $EDITOR" in t for t in app.toasts)
        monkeypatch.setenv("EDITOR", "true")
        await pilot.press("e")  # headless: the app cannot suspend, and says so
        assert any("cannot open the editor" in t for t in app.toasts)
        await pilot.press("a")
        await wait_until_pilot(pilot, lambda: set(pane.row_ids) == {running.id})
        await pilot.press("a")
        await wait_until_pilot(pilot, lambda: set(pane.row_ids) == {done.id, running.id})
        assert pane.table.get_row_index(running.id) == 0  # running first


async def test_quitting_the_app_backgrounds_the_foreground_run(home, cleanup, spy_signals):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await submit(pilot, app, "sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None)
        sid = pane.foreground.id
    s = ProcessRegistry(home, Settings()).get(sid)
    assert s.status == "running" and s.background and s.notify
    assert spy_signals == []


async def test_quitting_moves_the_foreground_run_off_the_ui_thread_and_before_the_app_is_gone(home, cleanup):
    import threading

    app = make_app(home)
    moved_on: list[int] = []
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        real = pane.registry.move_to_background

        def move_to_background(session_id):
            moved_on.append(threading.get_ident())
            return real(session_id)

        pane.registry.move_to_background = move_to_background
        await submit(pilot, app, "sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None)
        sid = pane.foreground.id
    assert moved_on and moved_on[0] != threading.get_ident()  # the UI's thread never did file work for it
    assert ProcessRegistry(home, Settings()).get(sid).background  # done by the time the app has exited


@asynccontextmanager
async def pane_following(home, command: str):
    """The pane alone, once its output view follows the session ``command`` runs in."""
    s = ProcessRegistry(home, Settings()).spawn(command)
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: pane.output.session_id == s.id)
        yield app, pilot, pane


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_progress_bars_and_prompts_show_without_a_newline(home, cleanup, tmp_path):
    # The prompt is printed only once the view shows the progress bar's last state (a
    # gate file, not a sleep), so the two arrive in separate reads on any machine.
    gate = tmp_path / "gate"
    async with pane_following(home, "printf 'crlf line\\r\\n'; printf ' 10%%\\r 50%%\\r100%%'; "
                              f"while [ ! -e '{gate}' ]; do sleep 0.02; done; printf 'Continue? '; sleep 30"
                              ) as (_app, pilot, pane):
        await wait_until_pilot(pilot, lambda: "100%" in pane.output.lines)
        gate.touch()
        await wait_until_pilot(pilot, lambda: "Continue? " in pane.output.lines)
        assert list(pane.output.lines)[:2] == ["crlf line", "100%"]


async def test_a_command_that_cannot_start_says_why(home, monkeypatch, tmp_path):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        monkeypatch.setattr(pane, "_default_cwd", lambda: str(tmp_path / "gone"))
        await submit(pilot, app, "echo hi")
        await wait_until_pilot(pilot, lambda: any("does not exist" in t for t in app.toasts))
        assert pane.foreground is None


async def test_output_view_renders_colours_but_no_other_sequence(home, cleanup):
    """A process printing a clipboard write (OSC 52), a screen clear, a title, a bell
    and a C1 CSI: the view shows the text with colours, drops the sequences and shows
    stray controls as escapes; nothing but SGR styling reaches the terminal. The
    command in the table and the view's title is shown the same way."""
    async with pane_following(home, ": 'x\x1b]0;t\x07'; " r"printf 'a\033]52;c;aGk=\007b\033[2Jc\033[31mred"
                              r"\033[0m\007\302\233d\n'; sleep 30") as (app, pilot, _pane):
        await wait_until_pilot(pilot, lambda: r"abcred\x07\x9bd" in screen_text(app))
        shown = screen_text(app)
        assert r"x\x1b]0;t\x07" in shown  # the command's argv, in the table and the title
        assert not any(ch in shown for ch in "\x1b\x07\x9b")
        segments = [seg for strip in app.screen._compositor.render_strips() for seg in strip]
        red = [seg for seg in segments if seg.text == "red"]
        assert red and red[0].style is not None and red[0].style.color is not None


async def test_a_malformed_session_does_not_stop_the_pane(home, cleanup):
    """Truncated metadata, a huge pid, an id naming another folder: the pane lists every
    other session as usual (before: a wrong-typed field raised out of the refresh)."""
    reg = ProcessRegistry(home, Settings())
    good = reg.spawn(["sleep", "30"])
    for name, raw in {
        "proc_0000000000c1": '{"id": "proc_0000000000c1", "pid": 1',
        "proc_0000000000c2": json.dumps({"id": "proc_0000000000c2", "pid": 10**30, "cwd": "/"}),
        "proc_0000000000c3": json.dumps({"id": "proc_0000000000ff", "pid": 4242, "cwd": "/"}),
        "proc_0000000000c4": json.dumps({"id": "proc_0000000000c4", "pid": 4242, "started_at": "soon"}),
    }.items():
        (home.processes_dir / name).mkdir()
        (home.processes_dir / name / "meta.json").write_text(raw)
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: good.id in pane.row_ids)
        assert list(pane.row_ids) == [good.id]


async def test_the_pane_kills_what_is_left_of_a_session_whose_wrapper_was_killed(home, cleanup):
    """kill -9 of the wrapper: the row says lost, and k still stops the command (before:
    'already lost', and the command ran on)."""
    import os
    import signal

    reg = ProcessRegistry(home, Settings())
    s = reg.spawn("echo up; while :; do sleep 0.05; done")
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: s.id in pane.row_ids and "up" in pane.output.lines)
        command = [pid for pid in identity.group_members(s.pid) if pid != s.pid]
        assert command
        os.kill(s.pid, signal.SIGKILL)
        reg.wait(s.id, timeout=20)
        await wait_until_pilot(pilot, lambda: pane.sessions[s.id].status == "lost")
        app.action_focus_pane("processes")
        pane.table.focus()
        await pilot.press("k")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        assert "wrapper is gone" in str(app.screen.body)
        await pilot.press("y")
        await wait_until_pilot(pilot, lambda: any("killed" in t and "wrapper" in t for t in app.toasts))
        await wait_until_pilot(pilot, lambda: pane.sessions[s.id].status == "killed")
        assert not any(identity.is_alive(pid, identity.fingerprint(pid)) for pid in command)


async def test_the_pane_kills_what_an_ended_session_left_running(home, cleanup):
    """Issue 34 case 1, the pane: a command that double-forked ``sleep`` out of its group
    and exited 0. The row says ``exit 0``; ``k`` names what it left running, and stops it
    (before: 'already exit 0', and the sleep ran on). The session keeps its own exit."""
    from tests.support.trees import kill_all_of_home, of_session

    reg = ProcessRegistry(home, Settings())
    s = reg.spawn("(setsid sleep 100 &); exit 0")
    left = wait_until(lambda: of_session(s.id), what="the double-forked sleep")
    app = make_app(home)
    try:
        async with app.run_test(size=WIDE) as pilot:
            pane: ProcessesPane = app.pane("processes")
            await wait_until_pilot(pilot, lambda: s.id in pane.row_ids and pane.sessions[s.id].status == "exited")
            app.action_focus_pane("processes")
            pane.table.focus()
            pane.table.move_cursor(row=list(pane.row_ids).index(s.id))
            await pilot.press("k")
            await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
            body = str(app.screen.body)
            assert "ended (exit 0)" in body and "sleep" in body, body
            await pilot.press("y")
            await wait_until_pilot(pilot, lambda: any("stopped 1 process it left running" in t for t in app.toasts))
            assert of_session(s.id) == {}
            assert not any(identity.is_alive(pid, identity.fingerprint(pid)) for pid in left)
            assert pane.sessions[s.id].exit_text() == "exit 0"
    finally:
        kill_all_of_home(home)


async def test_restart_asks_first_then_runs_the_command_again_as_a_new_named_session(home, cleanup, tmp_path):
    reg = ProcessRegistry(home, Settings())
    gate = tmp_path / "gate"
    s = reg.spawn(["sh", "-c", f"echo up; while [ ! -e {gate} ]; do sleep 0.05; done"], owner="test", name="web")
    app = PaneOnly(home, FAST)
    async with app.run_test(size=WIDE) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await wait_until_pilot(pilot, lambda: s.id in pane.row_ids)
        assert pane.row(s.id)[0] == "web"  # the ID column shows the name
        pane.table.focus()
        await pilot.press("r")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        assert "Stops it first" in str(app.screen.body)
        await pilot.press("enter")  # No: nothing happens
        await wait_until_pilot(pilot, lambda: not isinstance(app.screen, ConfirmModal))
        await wait_workers(app, ["processes-kill"])
        assert identity.is_alive(s.pid, s.fingerprint)
        pane.table.focus()
        await pilot.press("r")
        await wait_until_pilot(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        await pilot.press("y")
        await wait_until_pilot(pilot, lambda: any("restarted as" in t for t in app.toasts))
        new_id = next(t for t in app.toasts if "restarted as" in t).split()[-1]
        await wait_until_pilot(pilot, lambda: new_id in pane.row_ids)
        assert not identity.is_alive(s.pid, s.fingerprint)
        assert pane.sessions[new_id].restarted_from == s.id
        assert reg.resolve_id("web") == new_id
    gate.touch()


async def test_a_foreground_change_that_arrives_after_the_command_bar_is_gone_is_dropped(home):
    """ctrl+b posts the change once the run is moved, from a thread: with `q` (or a test's
    end) meanwhile it arrived while the app was taking its widgets down, and the app
    stopped on NoMatches for the command bar (a paired run at load 14)."""
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.query_one(CommandBar).remove()
        app.post_message(ProcessesPane.ForegroundChanged(None, detail="last: exit 0"))
        await pilot.pause()
        assert app.return_code is None and app.is_running


@pytest.mark.parametrize("variable, name", [("TMUX", "tmux"), ("STY", "screen")])
async def test_inside_tmux_or_screen_ctrl_g_also_backgrounds_and_the_bar_and_help_say_so(
        home, cleanup, monkeypatch, variable, name):
    """tmux keeps ctrl+b (its prefix): inside tmux or screen ctrl+g backgrounds too, the
    command bar names ctrl+g, and `?` says why. Outside, ctrl+g does nothing."""
    from widgets.common.help_screen import HelpScreen

    monkeypatch.setenv(variable, "/tmp/tmux-1000/default,1,0")
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        pane: ProcessesPane = app.pane("processes")
        await submit(pilot, app, "sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None)
        bar = app.query_one(CommandBar)
        await wait_until_pilot(pilot, lambda: "running" in str(bar.border_title))
        assert "^g moves it to the background" in str(bar.border_title)
        await pilot.press("ctrl+g")
        await wait_until_pilot(pilot, lambda: pane.foreground is None)
        assert any("moved to background" in t for t in app.toasts)
        app.action_help()
        await wait_until_pilot(pilot, lambda: screen_shown(app, HelpScreen))
        (row,) = [r for r in app.screen.rows if r.binding_id == "processes.background"]
        assert row.keys == "^g, ^b"
        assert f"ctrl+b {'is' if name == 'tmux' else 'may be'} {name}'s" in row.description
    monkeypatch.delenv(variable)
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.pane("processes")
        await submit(pilot, app, "sleep 30")
        await wait_until_pilot(pilot, lambda: pane.foreground is not None)
        await pilot.press("ctrl+g")
        seen = pane.refresh_count
        await wait_until_pilot(pilot, lambda: pane.refresh_count >= seen + 2)
        assert pane.foreground is not None  # ctrl+g is no key of the app outside a multiplexer
        assert "^b moves it" in str(app.query_one(CommandBar).border_title)
