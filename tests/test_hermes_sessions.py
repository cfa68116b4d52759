"""Issue 11, "See its processes": hermes-agent's processes.json sessions in ``ps``,
``ps --json``, ``proc`` and the processes pane, on a home the real hermes-agent 0.19.0
wrote (tests/fixtures/hermes_home_0_19_0) with a live process registered in it.
Alive means pid and start ticks verified; a kill re-reads processes.json and signals
only a verified process; processes.json is never written."""

from __future__ import annotations

import json
import signal

import pytest

from engine import identity
from engine.config import Settings, load_config
from engine.processes import ProcessLookupFailed, ProcessRegistry
from tests import test_hermes_home as hermes_home_tests
from tests.conftest import run_cli
from tests.support import screen_shown
from tests.test_hermes_home import FIXTURE, register_with_hermes

hermes_home = hermes_home_tests.hermes_home  # the fixture: a copy of the real home, a live registered process

HERMES_ID = json.loads((FIXTURE / "processes.json").read_text())[0]["session_id"]


def cli(home, *argv):
    result = run_cli("--home", str(home.root), *argv, env={"HERMES_AUTO_PRUNE": ""}, timeout=60)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result


def ps_json(home, *flags):
    result = cli(home, "ps", "--json", *flags)
    assert result.returncode == 0, result.stderr
    return {s["id"]: s for s in json.loads(result.stdout)}


def test_ps_lists_a_live_hermes_session_with_its_fields(hermes_home):
    home, proc, entry = hermes_home
    listed = ps_json(home)[HERMES_ID]
    assert listed["pid"] == proc.pid and listed["command"] == "sleep 600" and listed["cwd"] == str(entry)
    assert listed["alive"] is True and listed["status"] == "running"
    assert listed["source"] == "hermes-agent" and listed["owner"] == "hermes-agent"
    assert listed["output_available"] is False and listed["output_path"] is None
    started = json.loads((home.root / "processes.json").read_text())[0]["started_at"]
    assert listed["started_at"] == started
    table = cli(home, "ps")
    assert table.returncode == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith(HERMES_ID))
    assert "running" in row and str(proc.pid) in row and "hermes-agent" in row and "sleep 600" in row


def test_a_reused_pid_is_not_alive_and_shows_only_with_all(hermes_home):
    """The start ticks differ from the live process's: that pid is someone else now."""
    home, proc, entry = hermes_home
    register_with_hermes(home.root, proc.pid, entry, start_ticks=1)
    assert HERMES_ID not in ps_json(home)
    listed = ps_json(home, "--all")[HERMES_ID]
    assert listed["alive"] is False and listed["status"] != "running"


def test_an_entry_without_a_start_time_is_not_shown_alive(hermes_home):
    home, proc, entry = hermes_home
    _without_start_time(home.root)
    assert ps_json(home, "--all")[HERMES_ID]["alive"] is False


def _without_start_time(root):
    entries = json.loads((root / "processes.json").read_text())
    del entries[0]["host_start_time"]
    (root / "processes.json").write_text(json.dumps(entries))


@pytest.mark.parametrize("action", ["log", "poll", "wait"])
def test_log_poll_and_wait_say_output_not_available(hermes_home, action):
    home, proc, _entry = hermes_home
    result = cli(home, "proc", action, HERMES_ID[:9])
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert HERMES_ID in result.stderr
    assert ("cannot wait" if action == "wait" else "output not available") in result.stderr
    assert proc.poll() is None


def test_cli_kill_signals_the_verified_hermes_process_and_writes_nothing_of_hermes(hermes_home):
    home, proc, _entry = hermes_home
    before = (home.root / "processes.json").read_bytes()
    result = cli(home, "proc", "kill", HERMES_ID)
    assert result.returncode == 0, result.stderr
    assert f"SIGTERM {proc.pid}" in result.stdout
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert (home.root / "processes.json").read_bytes() == before


@pytest.mark.parametrize("why", ["reused pid", "no start time", "unreadable processes.json"])
def test_cli_kill_refuses_an_unverified_hermes_process_in_one_line(hermes_home, why):
    home, proc, entry = hermes_home
    reg = ProcessRegistry(home, Settings())
    listed = reg.get(HERMES_ID)  # looked up while still verified...
    if why == "reused pid":  # ...then the entry changes before the signal
        register_with_hermes(home.root, proc.pid, entry, start_ticks=1)
    elif why == "no start time":
        _without_start_time(home.root)
    else:
        (home.root / "processes.json").write_text("[{\"pid\": ")
    if why == "unreadable processes.json":  # the session cannot even be found now
        with pytest.raises(ProcessLookupFailed, match="processes.json cannot be read"):
            reg.kill(listed.id, grace=0.1)
    else:
        report = reg.kill(listed.id, grace=0.1)
        assert not report.ok and not report.signals, report
    assert proc.poll() is None
    result = cli(home, "proc", "kill", HERMES_ID)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "not signalled" in result.stderr or "not searched" in result.stderr
    assert proc.poll() is None


def test_an_unreadable_processes_json_lists_ours_and_says_why(hermes_home):
    home, proc, _entry = hermes_home
    (home.root / "processes.json").write_text("{\"not\": \"a list\"}")
    reg = ProcessRegistry(home, Settings())
    ours = reg.spawn(["true"])
    reg.wait(ours.id)
    result = cli(home, "ps", "--all", "--json")
    assert result.returncode == 0
    assert [s["id"] for s in json.loads(result.stdout)] == [ours.id]
    assert "processes.json cannot be read" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_own_sessions_are_listed_beside_hermes_sessions(hermes_home):
    home, _proc, _entry = hermes_home
    reg = ProcessRegistry(home, Settings())
    ours = reg.spawn(["true"])
    reg.wait(ours.id)
    listed = ps_json(home, "--all")
    assert listed[ours.id]["source"] == "hermes-tui" and listed[ours.id]["output_available"] is True
    assert listed[HERMES_ID]["source"] == "hermes-agent"


# -- the processes pane -----------------------------------------------------------------------


async def test_the_pane_lists_a_hermes_session_and_kills_it_only_after_yes(hermes_home):
    from hermes_tui.app import HermesApp
    from tests.support import wait_until_pilot as wait_until
    from tests.support import wait_workers
    from widgets.common.confirm import ConfirmModal
    from widgets.processes.processes_pane import NO_OUTPUT_NOTE, ProcessesPane

    home, proc, _entry = hermes_home
    before = (home.root / "processes.json").read_bytes()
    app = HermesApp(home, load_config(home.config_file))
    toasts: list[str] = []
    real_notify = app.notify
    app.notify = lambda message, **kw: toasts.append(str(message)) or real_notify(message, **kw)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: bool(app.query("#pane-tabs")))
        await pilot.press("2")
        pane: ProcessesPane = app.pane("processes")
        await wait_until(pilot, lambda: HERMES_ID in pane.row_ids)
        assert pane.row(HERMES_ID)[2] == str(proc.pid) and pane.row(HERMES_ID)[1] == "running"
        assert "hermes-agent" in pane.row(HERMES_ID)
        pane.table.focus()
        pane.show_session(HERMES_ID)
        await wait_until(pilot, lambda: pane.output.session_id == HERMES_ID)
        assert "output not available" in pane.output.state
        assert NO_OUTPUT_NOTE in "\n".join(str(line) for line in pane.output.log.lines)
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        assert "hermes-agent started it" in str(app.screen.body) and str(proc.pid) in str(app.screen.body)
        await pilot.press("enter")  # the focused default is No
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmModal))
        await wait_workers(app, ["processes-kill"])  # none was started; any would be done
        assert proc.poll() is None
        pane.table.focus()
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmModal))
        await pilot.pause()
        await pilot.press("y")
        await wait_until(pilot, lambda: any(HERMES_ID in t and "killed" in t for t in toasts))
        await wait_until(pilot, lambda: HERMES_ID not in pane.row_ids or pane.row(HERMES_ID)[1] != "running")
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert (home.root / "processes.json").read_bytes() == before
    assert identity.read_stat(proc.pid) is None


def test_a_prefix_naming_ours_and_a_hermes_session_is_ambiguous(hermes_home, monkeypatch):
    """Both kinds of id look alike (proc_ + 12 hex): a prefix matching one of each is
    refused, never resolved to either; full ids still name each."""
    import engine.processes.registry as registry_mod

    home, _proc, _entry = hermes_home
    ours_id = HERMES_ID[:13] + "ffff"
    monkeypatch.setattr(registry_mod, "new_session_id", lambda: ours_id)
    reg = ProcessRegistry(home, Settings())
    reg.wait(reg.spawn(["true"]).id)
    with pytest.raises(ProcessLookupFailed, match="ambiguous"):
        reg.get(HERMES_ID[:10])
    assert reg.get(ours_id).owner == "cli"
    assert reg.get(HERMES_ID).owner == "hermes-agent"
    assert reg.get(HERMES_ID[:15]).owner == "hermes-agent"


async def test_a_hermes_process_killed_outside_shows_lost_its_runtime_stopped_and_no_running_title(hermes_home):
    """Killed by someone else, hermes-agent's session is `lost` (processes.json still
    lists it): its RUNTIME stops (`?`: no end was recorded) and the output title, which
    said `running`, says it is not running."""
    from tests.support import wait_until_pilot as wait_until
    from widgets.processes.processes_pane import STATUS_COLUMN, ProcessesPane

    home, proc, _entry = hermes_home
    from hermes_tui.app import HermesApp

    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        pane: ProcessesPane = app.pane("processes")
        await wait_until(pilot, lambda: HERMES_ID in pane.row_ids)
        pane.show_session(HERMES_ID)
        await wait_until(pilot, lambda: pane.output.session_id == HERMES_ID)
        assert pane.output.state.startswith("running")
        proc.kill()
        proc.wait(timeout=30)
        await wait_until(pilot, lambda: pane.row(HERMES_ID)[STATUS_COLUMN] == "lost")
        assert pane.row(HERMES_ID)[3] == "?"  # RUNTIME
        await wait_until(pilot, lambda: not pane.output.state.startswith("running"))
        assert pane.output.state.startswith("not running")
    table = cli(home, "ps", "--all")
    row = next(line for line in table.stdout.splitlines() if line.startswith(HERMES_ID))
    assert row.split()[1:5] == ["-", "lost", str(proc.pid), "?"]
