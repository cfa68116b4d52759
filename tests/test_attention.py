"""The attention list: items computed from the home's real board, sessions, scratch
folder and prune log; dismissals kept across processes; the CLI's output.

Everything is real (the CLI in subprocesses, real workers and exits, real folders aged
with os.utime); the disk's fullness is the one boundary given as numbers."""

from __future__ import annotations

import json
import os
import time

import pytest

from engine.attention import state
from engine.attention.board import board_items, read_board
from engine.attention.collect import collect
from engine.attention.model import Item, Kind, grouped, kind_of_key, newest_first
from engine.attention.sources import GROUP_HELD_AT, DispatchWatch, disk_items, pass_items, read_log_tail
from engine.config import ConfigError, Settings, parse_config
from engine.kanban import transitions as tr
from engine.kanban.models import NewTask
from engine.kanban.registry_spawner import RegistrySpawner
from engine.kanban.tick_result import DispatchResult, Skip
from tests.support import run_cli, wait_until
from tests.support.kanban import FakeClock, dispatcher, kanban_settings, kill_all_workers
from tests.support.kanban import wait_for_exit as wait_exit


def cli(home, *args, **kw):
    return run_cli("--home", str(home.root), *args, **kw)


def items_json(home, *args) -> list[dict]:
    done = cli(home, "attention", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["items"]


def new_card(home, title="Fix login") -> str:
    done = cli(home, "kanban", "create", title, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


# -- the board ----------------------------------------------------------------------------


def test_a_blocked_card_is_an_item_with_its_reason_masked_ends_when_unblocked_and_comes_back_new(home):
    card = new_card(home)
    assert cli(home, "kanban", "block", card, "--reason",
               "needs the token sk-ant-abcdefghijklmnopqrstuvwxyz0123 from ops\x1b[31m").returncode == 0
    [item] = items_json(home)
    assert (item["kind"], item["subject"], item["pane"]) == ("blocked", card, "board")
    assert item["key"].startswith(f"blocked:{card}:")
    assert "sk-***" in item["why"] and "abcdefghij" not in item["why"]
    assert "\x1b" not in item["why"] and "\\x1b" in item["why"]  # outside text: escaped, never raw
    assert f"hermes-tui kanban unblock {card}" in item["action"]
    assert item["since"] == pytest.approx(time.time(), abs=120)
    assert cli(home, "kanban", "unblock", card).returncode == 0
    assert items_json(home) == []  # the cause went: so did the item
    assert cli(home, "kanban", "block", card, "--reason", "again").returncode == 0
    [again] = items_json(home)
    assert again["key"] != item["key"]  # a new occurrence is a new item


def test_a_card_in_review_is_an_item_with_its_summary(home):
    card = new_card(home, "Write the docs")
    assert cli(home, "kanban", "review", card, "--summary", "please read chapter 2").returncode == 0
    [item] = items_json(home, "--kind", "review")
    assert item["kind"] == "review" and "please read chapter 2" in item["why"]
    assert items_json(home, "--kind", "blocked") == []


async def test_the_breaker_blocking_a_card_is_a_gave_up_item_with_its_last_failure_masked(home, open_test_board,
                                                                                           board_backend):
    clock = FakeClock()
    settings = kanban_settings({"w": 'echo "connecting with password=hunter2hunter2"; exit 3'},
                               crash_grace_seconds=0, failure_limit=2)
    board = await open_test_board(clock, board_backend)  # the SQLite board, and a PostgreSQL one
    spawner = RegistrySpawner(home, settings)
    disp = dispatcher(board, home, settings, spawner)
    try:
        t = await tr.create_task(board, NewTask("fragile", assignee="w"))
        for _ in range(2):
            result = await disp.tick()
            wait_exit(spawner, result.spawned[0].session_id)
            clock.advance(1)
        assert (await disp.tick()).auto_blocked == (t.id,)
        items = board_items(await read_board(board, clock()), clock())
    finally:
        kill_all_workers(spawner)
    [item] = items
    assert item.kind is Kind.GAVE_UP and item.subject == t.id
    assert "after 2 of 2 failed attempts" in item.why
    assert "password=***" in item.why and "hunter2" not in item.why


async def test_a_running_card_whose_claim_ran_out_is_a_stale_claim(home, open_test_board, board_backend):
    clock = FakeClock()
    settings = kanban_settings({"w": "sleep 600"})
    board = await open_test_board(clock, board_backend)
    spawner = RegistrySpawner(home, settings)
    disp = dispatcher(board, home, settings, spawner)
    try:
        t = await tr.create_task(board, NewTask("slow", assignee="w"))
        await disp.tick()
        assert board_items(await read_board(board, clock()), clock()) == []
        clock.advance(settings.kanban.claim_ttl_seconds + 120)  # no dispatcher ticked meanwhile
        [item] = board_items(await read_board(board, clock()), clock())
    finally:
        kill_all_workers(spawner)
    assert item.kind is Kind.STALE_CLAIM and item.subject == t.id
    assert "claim ran out 2m ago" in item.why


# -- the app's dispatcher -----------------------------------------------------------------


def test_a_card_held_back_three_ticks_in_a_row_is_an_item_with_the_reason_in_words():
    watch = DispatchWatch()
    skip = Skip("t_1", "per_profile_capped", running=2, limit=2, profile="w")
    for n in range(2):
        watch.tick_done(DispatchResult(skipped=(skip,)), 100.0 + n)
        assert watch.items() == []
    version = watch.version
    watch.tick_done(DispatchResult(skipped=(skip,)), 102.0)
    [item] = watch.items()
    assert watch.version != version
    assert item.kind is Kind.HELD_BACK and item.since == 100.0
    assert "held back 3 ticks in a row: waiting: 2 of 2 running, the profile's cap (w)" in item.why
    watch.tick_done(DispatchResult(), 103.0)
    assert watch.items() == []
    watch.tick_failed("database is locked", 104.0)
    assert watch.items() == []
    watch.tick_failed("database is locked", 105.0)
    [failing] = watch.items()
    assert failing.kind is Kind.DISPATCH_FAILING and "2 ticks in a row failed: database is locked" in failing.why


def test_the_same_tick_given_again_is_counted_without_walking_its_held_cards():
    """The dispatcher gives an unchanged board's tick again (the same result): each held
    card is held one tick more, and only the cards about to reach three ticks are looked
    at, not every held card (a big board holds back 100,000)."""

    class Counted(tuple):
        walks = 0

        def __iter__(self):
            Counted.walks += 1
            return super().__iter__()

    skips = Counted(Skip(f"t_{n}", "skipped_unassigned") for n in range(1000))
    result = DispatchResult(skipped=skips)
    watch = DispatchWatch()
    watch.tick_done(result, 100.0)
    walked = Counted.walks
    watch.tick_done(result, 101.0)
    assert watch.items() == []
    version = watch.version
    watch.tick_done(result, 102.0)  # the third tick in a row: the cards are an item
    [item] = watch.items()  # one for the 1,000, not 1,000
    assert watch.version != version and item.subject == "t_0" and item.since == 100.0
    assert item.why == ("1000 cards held back up to 3 ticks in a row (t_0 and 999 more): "
                        "unassigned, and no default assignee is set")
    version = watch.version
    looks: list[int] = []
    real_ticks = watch.held_ticks
    watch.held_ticks = lambda since: looks.append(since) or real_ticks(since)
    watch.tick_done(result, 103.0)
    assert watch.version == version and "up to 4 ticks in a row" in watch.items()[0].why
    assert Counted.walks == walked, "a tick given again walked its held cards"
    assert len(looks) < 10, "the items of a tick given again looked at every held card"
    del watch.held_ticks
    few = DispatchResult(skipped=tuple(Skip(f"t_{n}", "skipped_unassigned") for n in range(GROUP_HELD_AT)))
    for now in (104.0, 105.0):
        watch.tick_done(few, now)
    assert [i.subject for i in watch.items()] == [f"t_{n}" for n in range(GROUP_HELD_AT)]  # still held: 6 ticks
    assert "held back 6 ticks in a row: unassigned" in watch.items()[0].why


# -- process sessions ---------------------------------------------------------------------


def test_a_failed_session_is_an_item_until_the_same_command_runs_again(home):
    done = cli(home, "run", "--bg", "--", "sh", "-c", "exit 3")
    sid = done.stdout.strip()
    assert cli(home, "proc", "wait", sid).returncode in (0, 3)
    [item] = items_json(home)
    assert (item["kind"], item["subject"], item["key"]) == ("session_failed", sid, f"session_failed:{sid}")
    assert "exit 3" in item["why"]
    ok = cli(home, "run", "--bg", "--", "true").stdout.strip()
    cli(home, "proc", "wait", ok)
    assert [i["kind"] for i in items_json(home)] == ["session_failed"]  # another command: still there
    again = cli(home, "run", "--bg", "--", "sh", "-c", "exit 3").stdout.strip()
    cli(home, "proc", "wait", again)
    assert [i["subject"] for i in items_json(home)] == [again]  # started again: the old one ended


def test_a_killed_session_is_an_item(home):
    sid = cli(home, "run", "--bg", "--", "sleep", "600").stdout.strip()
    assert cli(home, "proc", "kill", sid).returncode == 0
    [item] = wait_until(lambda: items_json(home), what="the killed session's item")
    assert item["subject"] == sid and "killed" in item["why"]


# -- scratch ------------------------------------------------------------------------------


def _aged(path, hours):
    then = time.time() - hours * 3600
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            os.utime(os.path.join(root, name), (then, then))
    os.utime(path, (then, then))


def test_an_idle_entry_is_due_for_prune_with_its_size_and_a_write_ends_it(home):
    from tests.support.scratch import NO_ARRIVAL_CONFIG

    home.config_file.write_text(NO_ARRIVAL_CONFIG)  # the entry made here has just arrived (its ctime)
    entry = home.ensure_dir(home.scratch_dir) / "run-42"
    entry.mkdir()
    (entry / "big.bin").write_bytes(b"x" * 300_000)
    _aged(entry, 30)
    [item] = items_json(home, "--kind", "prune_due")
    assert item["subject"] == "run-42" and "293.0 KiB" in item["why"] and "idle 1d 6h" in item["why"]
    assert item["pane"] == "scratch"
    (entry / "new.txt").write_text("still in use")
    assert items_json(home, "--kind", "prune_due") == []


def test_a_quarantined_entry_expiring_soon_is_an_item(home):
    from engine.scratch.quarantine import stamp

    q = home.ensure_dir(home.quarantine_dir)
    (q / f"build-7.{stamp(time.time() - 10 * 3600)}").mkdir()  # 12 h of quarantine: 2 h left
    (q / f"fresh.{stamp(time.time())}").mkdir()
    [item] = items_json(home, "--kind", "quarantine_expiring")
    assert item["subject"].startswith("build-7.") and "deleted in 1h 59m" in item["why"]


def test_a_failed_pass_is_an_item_until_a_pass_starts_again(home):
    from engine.scratch.audit import open_audit
    from engine.scratch.target import PruneTarget

    target = PruneTarget.of(home)
    home.ensure_dir(home.scratch_dir)
    target.stamp_file.touch()
    old = time.time() - 60
    os.utime(target.stamp_file, (old, old))
    with open_audit(home.prune_log, home.ensure_dir) as audit:
        audit.pass_failed("cannot read /proc")
    [item] = pass_items(read_log_tail(home.prune_log), os.stat(target.stamp_file).st_mtime)
    assert item.kind is Kind.PASS_FAILED and "cannot read /proc" in item.why
    assert [i["kind"] for i in items_json(home)] == ["pass_failed"]
    target.stamp_file.touch()  # a later pass started
    assert items_json(home) == []


def test_the_scratch_disk_nearly_full_is_an_item():
    assert disk_items("/s", 0.90, 10 * 1024**3) == []
    [item] = disk_items("/s", 0.97, 3 * 1024**3)
    assert item.kind is Kind.DISK_NEARLY_FULL and item.why == "the scratch disk is 97% full (3.0 GiB free)"


def test_a_home_open_to_others_is_a_doctor_item(home):
    os.chmod(home.root, 0o755)
    [item] = items_json(home, "--kind", "doctor")
    assert item["key"] == "doctor:mode" and "0755" in item["why"] and item["pane"] == "home"


# -- dismissals ---------------------------------------------------------------------------


def test_a_dismissal_survives_a_restart_and_a_new_occurrence_is_shown_again(home):
    card = new_card(home)
    cli(home, "kanban", "block", card, "--reason", "first")
    [item] = items_json(home)
    done = cli(home, "attention", "dismiss", item["key"])
    assert done.returncode == 0 and "Dismissed 1 item" in done.stdout, done.stderr
    assert items_json(home) == []  # another process: still dismissed
    shown = items_json(home, "--all")
    assert [(i["key"], i["dismissed"]) for i in shown] == [(item["key"], True)]
    assert json.loads((home.own_dir / state.DISMISSED_FILE).read_text())["keys"].keys() == {item["key"]}
    cli(home, "kanban", "unblock", card)
    cli(home, "kanban", "block", card, "--reason", "second")
    [again] = items_json(home)
    assert again["key"] != item["key"] and "second" in again["why"]


def test_dismiss_refuses_a_key_that_is_not_one_and_one_no_item_has(home):
    bad = cli(home, "attention", "dismiss", "hello")
    assert bad.returncode == 2 and "'hello' is not an attention key" in bad.stderr
    gone = cli(home, "attention", "dismiss", "blocked:t_0:1")
    assert gone.returncode == 1 and "no current item has the key 'blocked:t_0:1'" in gone.stderr
    kind = cli(home, "attention", "--kind", "nope")
    assert kind.returncode == 2 and "unknown kind 'nope'" in kind.stderr
    assert not (home.own_dir / state.DISMISSED_FILE).exists()


def test_dismiss_all_dismisses_every_item_shown(home):
    for title in ("a", "b"):
        cli(home, "kanban", "block", new_card(home, title), "--reason", "why")
    assert len(items_json(home)) == 2
    assert cli(home, "attention", "dismiss", "--all", "--kind", "blocked").returncode == 0
    assert items_json(home) == []


def test_listing_a_guest_home_writes_nothing(home):
    (home.root / "SOUL.md").write_text("hermes-agent's")
    before = sorted(p.relative_to(home.root) for p in home.root.rglob("*"))
    assert cli(home, "attention").returncode == 0
    assert cli(home, "attention", "--json").returncode == 0
    assert sorted(p.relative_to(home.root) for p in home.root.rglob("*")) == before


def test_the_human_listing_groups_by_kind_and_names_each_key(home):
    card = new_card(home)
    cli(home, "kanban", "block", card, "--reason", "needs ops")
    sid = cli(home, "run", "--bg", "--", "sh", "-c", "exit 3").stdout.strip()
    cli(home, "proc", "wait", sid)
    out = cli(home, "attention").stdout
    assert "Blocked cards (1)" in out and "Sessions that failed (1)" in out
    assert f"key blocked:{card}:" in out and f"key session_failed:{sid}" in out
    assert cli(home, "attention", "dismiss", "--all").returncode == 0
    assert "Nothing needs you. (2 dismissed; --all shows them)" in cli(home, "attention").stdout


# -- the model ----------------------------------------------------------------------------


def test_items_are_newest_first_and_grouped_in_the_view_s_order():
    a = Item("blocked:t_a:1", Kind.BLOCKED, "t_a", 10.0, "", "")
    b = Item("blocked:t_b:2", Kind.BLOCKED, "t_b", 20.0, "", "")
    c = Item("doctor:mode", Kind.DOCTOR, "mode", None, "", "")
    d = Item("session_failed:p", Kind.SESSION_FAILED, "p", 30.0, "", "")
    assert newest_first([a, c, b, d]) == [d, b, a, c]
    assert [(k, [i.subject for i in g]) for k, g in grouped([a, c, b, d])] == [
        (Kind.BLOCKED, ["t_b", "t_a"]), (Kind.SESSION_FAILED, ["p"]), (Kind.DOCTOR, ["mode"])]
    assert kind_of_key("gave_up:t_1:3") is Kind.GAVE_UP and kind_of_key("nope:1") is None


def test_collect_on_an_empty_home_creates_nothing(tmp_path):
    from engine.home import HomeLayout

    home = HomeLayout(tmp_path / "h")
    found = collect(home, Settings())
    assert found.items == () and not (tmp_path / "h").exists()


# -- config -------------------------------------------------------------------------------


def test_the_notify_section_has_defaults_and_one_line_errors():
    n = Settings().notify
    assert (n.bell, n.terminal, n.desktop, n.command, n.rate_limit_seconds) == (True, "auto", True, None, 30.0)
    assert n.kinds == ("blocked", "gave_up", "session_failed", "host_lost")
    s = parse_config("notify:\n  kinds: [blocked, review]\n  terminal: osc777\n  command: curl -d @- x\n")
    assert s.notify.kinds == ("blocked", "review") and s.notify.terminal == "osc777"
    with pytest.raises(ConfigError, match=r"config.yaml:3: notify.kinds must list attention kinds \(blocked, .*\), "
                       r"got 'blockd'$"):
        parse_config("notify:\n  bell: false\n  kinds: [blockd]\n")
    with pytest.raises(ConfigError, match=r"config.yaml:2: notify.terminal must be one of auto, osc9, osc777"):
        parse_config("notify:\n  terminal: loud\n")


def test_a_lost_host_is_one_item_counting_its_requeued_cards():
    from engine.attention.board import BoardFacts
    from engine.kanban.models import Event

    events = tuple(Event(10 + n, f"t_{n}", 3, "host_lost", {"host": "build-2", "error": "host_lost"}, 500.0 + n)
                   for n in range(3))
    [item] = board_items(BoardFacts((), {}, events), 600.0)
    assert (item.kind, item.subject, item.key, item.since) == (Kind.HOST_LOST, "build-2", "host_lost:build-2:10", 500.0)
    assert "3 running cards taken back and requeued" in item.why


def test_a_watch_that_matched_is_an_item(home):
    from engine.config import load_config
    from engine.processes.notify import NotificationCenter
    from engine.processes.registry import ProcessRegistry

    sid = cli(home, "run", "--bg", "--watch", "ERROR", "--", "sh", "-c",
              "echo 'ERROR disk one'; exec sleep 600").stdout.strip()
    registry = ProcessRegistry(home, load_config(home.config_file))
    center = NotificationCenter(registry)  # what the app's processes pane runs
    try:
        wait_until(lambda: center.poll(), what="the match")
        center.close()  # saves the session's watch.json
        [item] = items_json(home, "--kind", "watch_matched")
        assert (item["subject"], item["key"]) == (sid, f"watch_matched:{sid}:1")
        assert "its watch ('ERROR') matched 1 time" in item["why"]
    finally:
        registry.kill(sid, grace=0.5)
