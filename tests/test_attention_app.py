"""The attention list in the app: the header's count, the ``!`` view (grouped, newest
first, readable at 80x24), Enter to the subject, dismissals kept across a restart,
notices sent once per home with ``watch`` open too, the OSC notice on a real pty."""

from __future__ import annotations

import json
import os
import signal
import time

from textual.app import App

from engine.attention.model import Item, Kind
from engine.config import load_config
from hermes_tui.app import HermesApp
from tests.support import run_cli, wait_until_pilot
from tests.test_attention_notify import (
    Lines,
    Receiver,
    curl_to,
    on_a_pty,
    quit_and_wait,
    read_until,
    start_watch,
    write_config,
)
from widgets.attention.attention_view import AttentionScreen
from widgets.board.board_pane import BoardPane
from widgets.processes.processes_pane import ProcessesPane


def cli(home, *args):
    done = run_cli("--home", str(home.root), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocked_card(home, title="Deploy", reason="needs ops") -> str:
    card = json.loads(cli(home, "kanban", "create", title, "--json"))["id"]
    cli(home, "kanban", "block", card, "--reason", reason)
    return card


def failed_session(home) -> str:
    sid = cli(home, "run", "--bg", "--", "sh", "-c", "exit 3").strip()
    run_cli("--home", str(home.root), "proc", "wait", sid)
    return sid


def app_of(home) -> HermesApp:
    return HermesApp(home, load_config(home.config_file), home_label="~/h")


def header(app) -> str:
    return str(app.query_one("#header").render())


async def test_the_header_counts_the_items_and_the_view_lists_them_grouped(home):
    write_config(home, bell=False, desktop=False, terminal="off")
    cards = [blocked_card(home, t) for t in ("one", "two")]
    sid = failed_session(home)
    app = app_of(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_pilot(pilot, lambda: "! 3" in header(app), what="! 3 in the header")
        await pilot.press("exclamation_mark")
        screen = app.screen
        assert isinstance(screen, AttentionScreen)
        assert [(i.kind, i.subject) for i in screen.items] == [
            (Kind.BLOCKED, cards[1]), (Kind.BLOCKED, cards[0]), (Kind.SESSION_FAILED, sid)]
        await pilot.press("escape")
        assert not isinstance(app.screen, AttentionScreen)
        from hermes_tui.keymap import help_rows

        row = next(r for r in help_rows(app) if r.binding_id == "app.attention")  # in ? and the palette
        assert (row.keys, row.action) == ("!", "attention")


async def test_enter_goes_to_the_session_and_to_the_card(home):
    write_config(home, bell=False, desktop=False, terminal="off")
    card = blocked_card(home)
    sid = failed_session(home)
    app = app_of(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_pilot(pilot, lambda: "! 2" in header(app), what="! 2 in the header")
        await pilot.press("exclamation_mark")
        screen = app.screen
        await wait_until_pilot(pilot, lambda: screen.highlighted is not None)
        while screen.highlighted.subject != sid:
            await pilot.press("down")
        await pilot.press("enter")
        processes = app.query_one(ProcessesPane)
        await wait_until_pilot(pilot, lambda: processes.selected is not None and processes.selected.id == sid,
                               what="the failed session selected")
        assert app.active_pane_id == "processes"
        await pilot.press("exclamation_mark")
        screen = app.screen
        while screen.highlighted.subject != card:
            await pilot.press("up")
        await pilot.press("enter")
        board = app.query_one(BoardPane)
        await wait_until_pilot(pilot, lambda: board.selected is not None and board.selected.id == card,
                               what="the blocked card selected")


async def test_d_dismisses_and_the_dismissal_survives_a_restart(home):
    write_config(home, bell=False, desktop=False, terminal="off")
    first, second = blocked_card(home, "one"), blocked_card(home, "two")
    app = app_of(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_pilot(pilot, lambda: "! 2" in header(app))
        await pilot.press("exclamation_mark")
        screen = app.screen
        assert screen.highlighted.subject == second
        await pilot.press("d")
        assert [i.subject for i in screen.items] == [first]
        await wait_until_pilot(pilot, lambda: "! 1" in header(app), what="! 1 once dismissed")
    again = app_of(home)
    async with again.run_test(size=(80, 24)) as pilot:
        await wait_until_pilot(pilot, lambda: "! 1" in header(again))
        assert [i.subject for i in again.attention.attention.items] == [first]
        await pilot.press("exclamation_mark")
        await pilot.press("D")
        await wait_until_pilot(pilot, lambda: "! " not in header(again), what="no count once all are dismissed")
    listed = json.loads(cli(home, "attention", "--json", "--all"))
    assert sorted(i["subject"] for i in listed["items"] if i["dismissed"]) == sorted([first, second])


class FailingReap:
    """A spawner whose reaping of finished children fails (an OSError from the kernel)."""

    def reap(self) -> None:
        raise OSError("no child processes here")


async def test_ticks_that_keep_failing_are_a_dispatch_failing_item(home):
    home.config_file.write_text("kanban:\n  dispatch_interval_seconds: 0.2\n"
                                "notify:\n  bell: false\n  desktop: false\n  terminal: 'off'\n")
    cli(home, "kanban", "create", "Deploy")
    app = app_of(home)
    async with app.run_test(size=(80, 24)) as pilot:
        app.dispatch_loop.spawner = FailingReap()

        def failing():
            return [i for i in app.attention.attention.items if i.kind is Kind.DISPATCH_FAILING]

        [item] = await wait_until_pilot(pilot, failing, what="a dispatch_failing item")
        assert "ticks in a row failed: no child processes here" in item.why
        app.dispatch_loop.spawner = None  # ticks succeed again: the item ends
        await wait_until_pilot(pilot, lambda: not failing(), what="the item ending")


async def test_the_app_and_watch_open_on_one_home_notify_a_blocked_card_once(home, children):
    receiver = Receiver()
    try:
        write_config(home, command=curl_to(receiver.url), poll_seconds=0.2, bell=False, desktop=False,
                     terminal="off")
        card = json.loads(cli(home, "kanban", "create", "Deploy", "--json"))["id"]
        watch = start_watch(home, children, "--json")
        out = Lines(watch)
        app = app_of(home)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until_pilot(pilot, lambda: app.attention.computations > 0)
            cli(home, "kanban", "block", card, "--reason", "needs ops")  # from another shell
            await wait_until_pilot(pilot, lambda: "! 1" in header(app), what="the app seeing the block")
            await wait_until_pilot(pilot, lambda: out.having(card), what="watch seeing the block")
            await wait_until_pilot(pilot, lambda: receiver.bodies, what="the webhook's POST")
            assert app.attention.notifier.wait_idle(timeout=60)
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=60) == 0
        assert len(receiver.bodies) == 1
        assert json.loads(receiver.bodies[0])["subject"] == card
    finally:
        receiver.close()


def test_the_app_on_a_real_terminal_writes_the_osc_notice_of_a_blocked_card(home):
    write_config(home, desktop=False, terminal="osc777")
    card = blocked_card(home)
    pid, fd = on_a_pty(home)
    got = bytearray()
    marker = f"\x1b]777;notify;hermes-tui: card blocked: {card};".encode()
    try:
        read_until(fd, got, marker, "the OSC 777 notice on the app's terminal")
        status = quit_and_wait(pid, fd, got)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    notice = bytes(got[got.find(marker):])
    assert notice[: notice.find(b"\x07")].decode().endswith("needs ops")
    assert b"\x07" in got[: got.find(marker)]  # the bell rang first


# -- snapshots ---------------------------------------------------------------------------

NOW = 1_800_000_000.0


def _items() -> tuple[Item, ...]:
    return (
        Item("blocked:t_1a2b3c4d:12", Kind.BLOCKED, "t_1a2b3c4d", NOW - 300,
             "Migrate the staging database: blocked by its worker: needs the DBA's approval for the new index",
             "answer what it needs, then unblock it (hermes-tui kanban unblock t_1a2b3c4d)"),
        Item("gave_up:t_5e6f7a8b:30", Kind.GAVE_UP, "t_5e6f7a8b", NOW - 900,
             "Port the importer: the breaker blocked it after 2 of 2 failed attempts; last failure: pid 4242 "
             "exited with code 1 (password=***)",
             "read its log and fix the cause, then unblock it (hermes-tui kanban unblock t_5e6f7a8b)"),
        Item("session_failed:proc_0123456789ab", Kind.SESSION_FAILED, "proc_0123456789ab", NOW - 60,
             "make test: exit 2 after 3m 10s",
             "read its output (hermes-tui proc log 01234567), then run it again or dismiss this"),
        Item("prune_due:lane-refactor:1799900000", Kind.PRUNE_DUE, "lane-refactor", NOW - 7200,
             "idle 1d 3h, 1.2 GiB; the next pass takes it",
             "look at the prune preview (p in the scratch pane, or hermes-tui prune --dry-run)"),
        Item("doctor:mode", Kind.DOCTOR, "mode", None, "the home /home/me/.hermes is 0755: open to other users",
             "chmod 700 /home/me/.hermes"),
    )


class PinnedScreen(AttentionScreen):
    clock = staticmethod(lambda: NOW)
    localtime = staticmethod(time.gmtime)


class ViewApp(App):
    def on_mount(self) -> None:
        self.push_screen(PinnedScreen(_items(), dismissed=2))


def test_the_view_snapshot_at_80x24(snap_compare):
    assert snap_compare(ViewApp(), terminal_size=(80, 24))


def test_the_view_snapshot_at_160x48(snap_compare):
    assert snap_compare(ViewApp(), terminal_size=(160, 48))


async def test_the_app_keys_an_idle_entry_as_the_cli_does_to_the_second(home):
    # An item's key carries the entry's newest mtime in whole seconds: a dismissal made in
    # the CLI must hold in the app. The app builds its items from the scratch pane's rows
    # (no second walk), the CLI from its own survey: mtimes on and just under a second's
    # edge must give the same keys both ways.
    from tests.support.scratch import NO_ARRIVAL_CONFIG

    home.config_file.write_text(NO_ARRIVAL_CONFIG + "notify:\n  bell: false\n  desktop: false\n"
                                "  terminal: \"off\"\n")
    scratch = home.ensure_dir(home.scratch_dir)
    base = (int(time.time()) - 3 * 86400) * 10**9
    for n, ns in enumerate((0, 1, 999_999_999, 500_000_000, 999_999)):
        entry = scratch / f"run-{n}"
        entry.mkdir()
        (entry / "f").write_text("x")
        for path in (entry / "f", entry):
            os.utime(path, ns=(base + n * 10**9 + ns, base + n * 10**9 + ns))
    expected = sorted(i["key"] for i in json.loads(cli(home, "attention", "--json"))["items"]
                      if i["kind"] == "prune_due")
    assert len(expected) == 5
    app = app_of(home)
    async with app.run_test(size=(160, 48)) as pilot:
        def keys():
            return sorted(i.key for i in app.attention.attention.items if i.kind is Kind.PRUNE_DUE)
        await wait_until_pilot(pilot, lambda: len(keys()) == 5, what="five prune_due items in the app")
        assert keys() == expected


async def test_a_computation_asked_for_as_the_app_quits_leaves_no_coroutine_behind(home):
    """The monitor's worker is cancelled before it starts when the app quits right after
    asking: no coroutine of it may be left never awaited (a RuntimeWarning seen in a
    paired round; a coroutine made before its worker ran)."""
    import gc
    import warnings

    app = app_of(home)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until_pilot(pilot, lambda: app.attention.computations >= 1, what="a first computation")
            await wait_until_pilot(pilot, lambda: not app.attention._running, what="it has ended")
            app.attention.request()  # asked for, and the app quits before its worker runs
            app.exit()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
