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
