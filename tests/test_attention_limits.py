"""The notifier's limits: its numbers bounded (a poll of 1e-7 s busy-looped a core),
its command's output and processes bounded, its state files read defensively, and every
field of an item that comes from outside escaped (issue 35: 2, 3, 4, 6, 9)."""

from __future__ import annotations

import pytest

from tests.support import run_cli


def write_notify(home, **notify) -> None:
    import json

    home.config_file.write_text("notify:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in notify.items()))


def one_line(done, code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert "Traceback" not in err and "internal error" not in err, err
    return err.splitlines()[-1]


# -- 35.9: floors and ceilings, exit 2 naming the range ----------------------------------------

@pytest.mark.parametrize("interval", ["1e-7", "0", "0.09", "86401", "nan", "inf", "-1"])
def test_watch_interval_out_of_range_is_refused_naming_the_range(home, interval):
    err = one_line(run_cli("--home", str(home.root), "watch", "--interval", interval), 2)
    assert "--interval: must be a number of seconds from 0.1 to 86400" in err


@pytest.mark.parametrize(("key", "value", "words"), [
    ("poll_seconds", 0.000001, "from 0.1 to 86400"),
    ("poll_seconds", 1e9, "from 0.1 to 86400"),
    ("command_timeout_seconds", 1e9, "from 0.1 to 3600"),
    ("command_timeout_seconds", 0.01, "from 0.1 to 3600"),
    ("command_timeout_seconds", 10**400, "from 0.1 to 3600"),
], ids=["poll-1e-6", "poll-1e9", "timeout-1e9", "timeout-0.01", "timeout-400-digits"])
def test_notify_numbers_out_of_range_are_refused_by_watch_and_attention(home, key, value, words):
    """The family: every notify.* duration the notifier sleeps or waits on has a floor
    (a busy loop) and a ceiling (a quit that waits days)."""
    write_notify(home, **{key: value})
    for argv in (["watch"], ["attention"]):
        err = one_line(run_cli("--home", str(home.root), *argv), 2)
        assert f"notify.{key}" in err or key in err, err
        assert f"must be a number of seconds {words}" in err


def test_in_range_numbers_are_taken(home):
    write_notify(home, poll_seconds=0.1, command_timeout_seconds=3600)
    assert run_cli("--home", str(home.root), "attention").returncode == 0


# -- 35.6: every field of an item that comes from outside is escaped ----------------------------

HOSTILE = ["\x1b]2;pwned\x07", "line1\nline2", "bell\x07", "\x9bc1", "lone\udcff"]


def test_every_text_field_of_every_item_is_escaped_whoever_made_it():
    """The family: an item's key, subject, why and action reach terminals, notify.command
    (stdin and HERMES_ATTENTION_KEY) and webhooks. Whatever a source put in (an entry
    name, a card id of another program's board, a host id), no control character,
    newline or lone surrogate is left, and an escaped field stays as it is."""
    from engine.attention.model import Item, Kind

    for bad in HOSTILE:
        for kind in Kind:
            item = Item(f"{kind.value}:{bad}:1", kind, bad, None, f"why {bad}", f"do {bad}")
            for field in (item.key, item.subject, item.why, item.action):
                assert field.isprintable(), (kind, field)
                field.encode("utf-8")  # no lone surrogate
            again = Item(item.key, kind, item.subject, None, item.why, item.action)
            assert again == item  # escaping twice changes nothing: keys stay stable


def test_watch_through_a_pipe_and_notify_command_get_no_raw_control_from_entry_names(home, children, tmp_path):
    """prune_due and quarantine items of entries named with ESC, BEL, a newline and a
    non-UTF-8 byte: `watch` (plain and --json) into a pipe, `attention --json`, and
    notify.command's stdin and HERMES_ATTENTION_KEY carry them escaped, one line each."""
    import json
    import os
    import sys

    from tests.support import wait_until
    from tests.support.scratch import make_entry

    out = tmp_path / "got"
    out.mkdir()
    home.config_file.write_text(
        "scratch:\n  arrival_hours: 0\n  auto_prune: false\n"
        "notify:\n  kinds: [prune_due]\n  desktop: false\n  bell: false\n  poll_seconds: 0.2\n"
        f"  command: 'cat >> {out}/stdin; printf \"%s\\n\" \"$HERMES_ATTENTION_KEY\" >> {out}/keys'\n")
    names = ["esc\x1b]2;x\x07", "new\nline", "bel\x07", b"bad\xff\xfe", "token=ghp_" + "a" * 36]
    for name in names:
        make_entry(home.scratch_dir, name)
    listed = run_cli("--home", str(home.root), "attention", "--json", "--kind", "prune_due")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert len(items) == len(names)
    env = dict(os.environ, HERMES_AUTO_PRUNE="0")
    env.pop("HERMES_HOME", None)
    for name in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"):
        env.pop(name, None)
    plain, as_json = tmp_path / "plain.out", tmp_path / "json.out"
    watches = []
    for dest, extra in ((plain, []), (as_json, ["--json"])):
        with open(dest, "wb") as fh:  # a file, as `watch | tee` gives it: not a terminal
            watches.append(children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "watch", *extra],
                                    stdout=fh, env=env))
    wait_until(lambda: (out / "keys").exists() and len((out / "keys").read_bytes().splitlines()) == len(names),
               what="a command run per item")
    wait_until(lambda: all(len(p.read_bytes().splitlines()) >= len(names) for p in (plain, as_json)),
               what="both watches printing every item")
    for w in watches:
        w.terminate()
        assert w.wait(timeout=60) == 0
    for path in (plain, as_json, out / "stdin", out / "keys"):
        data = path.read_bytes()
        text = data.decode("utf-8")  # valid UTF-8: no lone surrogate, no raw 0xff
        assert not [c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f], (path, text)
        assert "ghp_" + "a" * 36 not in text  # the secret in a name is masked too
        assert len(data.splitlines()) == len(names), (path, text)  # a newline never splits an item
    keys = set((out / "keys").read_text().splitlines())
    assert keys == {i["key"] for i in items}
    assert keys == {json.loads(line)["key"] for line in (out / "stdin").read_text().splitlines()}
    for line in (out / "stdin").read_text().splitlines():
        json.loads(line)["subject"].encode("utf-8")  # the JSON holds no \udcff that decodes to a surrogate


# -- 35.2 and 35.3: notify.command's output is a bounded tail, its whole session stops ------------

def _notifier(home, command: str, timeout: float, lines: list[str]):
    import dataclasses

    from engine.attention.notify import Notifier
    from engine.config import NotifySettings, Settings

    settings = dataclasses.replace(Settings(), notify=NotifySettings(
        desktop=False, bell=False, terminal="off", command=command, command_timeout_seconds=timeout))
    return Notifier(home, settings, environ={"PATH": "/usr/bin:/bin"}, on_failure=lines.append)


def _blocked(n: int):
    from engine.attention.collect import Attention
    from engine.attention.model import Item, Kind

    return Attention((Item(f"blocked:t_{n}:1", Kind.BLOCKED, f"t_{n}", 1.0, "blocked", "unblock"),), (),
                     frozenset({Kind.BLOCKED}))


def test_a_command_that_writes_without_end_keeps_only_a_bounded_tail(home, tmp_path):
    """`yes` on stdout and stderr until a gate file is made: the notifier reads it all as
    it comes and keeps at most OUTPUT_TAIL_BYTES of each (was: all of it, 3 GB in 1.5 s).
    Asserted on the bytes kept and read, not on time; the gate is made only once more
    than 20 MiB have gone through, so the bound is what held it."""
    from engine.attention import notify
    from tests.support import wait_until

    counted, gate = tmp_path / "counted", tmp_path / "gate"
    # The shell writes a 1 MiB block to each stream a round and notes the round in a file.
    block = tmp_path / "block"
    block.write_bytes(b"y\n" * (512 * 1024))
    command = (f"i=0; while [ ! -e '{gate}' ]; do cat '{block}'; cat '{block}' >&2; i=$((i+1)); "
               f"echo $i > '{counted}'; done; echo the-last-line >&2; exit 3")
    runs = []
    real = notify.run_bounded

    def spy(*args, **kwargs):
        runs.append(real(*args, **kwargs))
        return runs[-1]

    notify.run_bounded = spy
    try:
        lines: list[str] = []
        n = _notifier(home, command, 3600, lines)
        n.offer(_blocked(1))
        wait_until(lambda: counted.exists() and counted.read_text().strip().isdigit()
                   and int(counted.read_text()) >= 20, timeout=300, what="20 MiB written by the command")
        gate.touch()
        assert n.wait_idle(timeout=300)
    finally:
        notify.run_bounded = real
    run = runs[0]
    assert run.returncode == 3 and not run.timed_out
    assert len(run.stdout) <= notify.OUTPUT_TAIL_BYTES and len(run.stderr) <= notify.OUTPUT_TAIL_BYTES
    assert run.stderr.endswith(b"the-last-line\n")  # the tail is the end of what it wrote
    assert lines == ["notify.command exited 3 for blocked:t_1:1: the-last-line"]


def test_a_command_stopped_at_its_timeout_or_that_leaves_processes_leaves_none(home, tmp_path):
    """The family: whatever notify.command starts in its session is stopped when its run
    ends: `sleep 302 & exit 0` (its shell gone at once, a child holding its output) and
    a command still running at the timeout with a child of its own. Each child's pid is
    written by the child itself; after the run none of them lives."""
    from engine import identity

    lines: list[str] = []
    pids = tmp_path / "pids"
    left = f"sh -c 'echo $$ >> {pids}; exec sleep 302' & "
    n = _notifier(home, left + "exit 0", 30, lines)
    n.offer(_blocked(1))
    assert n.wait_idle(timeout=120)
    n = _notifier(home, left + f"while [ $(wc -l < {pids}) -lt 2 ]; do sleep 0.01; done; exec sleep 303", 1, lines)
    n.offer(_blocked(2))
    assert n.wait_idle(timeout=120)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    for pid in started:
        stat = identity.read_stat(pid)
        assert stat is None or stat.is_zombie or b"sleep" not in stat.comm, (pid, stat)
    assert lines[0] == "notify.command for blocked:t_1:1 stopped 1 process it left running"
    assert lines[1] == "notify.command timed out after 1s for blocked:t_2:1; stopped 1 process it left running"


# -- 35.4: the attention state files, read defensively -------------------------------------------

@pytest.mark.parametrize("content", [
    b'{"version": 1, "keys": {"blocked:t_1:1": 1' + b"0" * 400 + b"}}",
    b'{"version": 1, "keys": {"blocked:t_1:1": "soon"}}',
    b"[" * 100000,
    b'{"version": 1, "keys": {}, "pad": "' + b"x" * (17 * 1024 * 1024) + b'"}',
], ids=["400-digits", "a-string", "deep-nesting", "17-MiB"])
@pytest.mark.parametrize("name", ["attention-notified.json", "attention-dismissed.json"])
def test_a_bad_state_file_is_one_warning_and_set_aside_in_attention_dismiss_and_watch(home, children, tmp_path,
                                                                                        name, content):
    """The family: whatever is in a state file (a number no float holds, a value that
    is not a time, nesting, a size past 16 MiB), watch, attention and dismiss go on:
    one warning naming the file, the file renamed to .bad, read as empty; no run after
    says anything more (was: internal error: OverflowError)."""
    import os
    import signal
    import sys

    from engine.attention import state
    from tests.support import wait_until

    write_notify(home, command="cat >/dev/null", desktop=False, bell=False, terminal="off")
    path = state.ensure_state_dir(home) / name
    path.write_bytes(content)
    err = tmp_path / "watch.err"
    env = dict(os.environ, HERMES_AUTO_PRUNE="0")
    env.pop("HERMES_HOME", None)
    with open(err, "wb") as fh:
        w = children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "watch", "--interval", "0.1"],
                     stderr=fh, env=env)
    wait_until(lambda: b"Watching" in err.read_bytes() and not path.exists(), what="watch setting the file aside")
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=60) == 0
    text = err.read_text()
    warnings = [line for line in text.splitlines() if "warning" in line]
    assert len(warnings) == 1 and name in warnings[0] and "set aside" in warnings[0], text
    assert "internal error" not in text and "Traceback" not in text
    assert path.with_name(name + ".bad").read_bytes() == content
    path.write_bytes(content)
    for argv in (["attention"], ["attention", "dismiss", "--all"], ["attention"]):
        done = run_cli("--home", str(home.root), *argv)
        assert done.returncode == 0, done.stderr
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert not path.exists() or name == "attention-notified.json"
