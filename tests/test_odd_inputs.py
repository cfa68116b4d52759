"""Every odd input is one line (issue 20): a clear error and the right exit code, never
an internal error, a traceback or a hang."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


def _one_line(out, code: int) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize(("args", "words"), [
    ([b"a\xff\xfe"], "TITLE is not UTF-8 text (byte 0xff"),
    (["ok", "--body", b"\xc3"], "--body is not UTF-8 text (byte 0xc3"),
    (["ok", "--assignee", b"w\xff"], "--assignee is not UTF-8 text (byte 0xff"),
    ([""], "the TITLE is empty"),
    (["   "], "the TITLE is empty"),
])
def test_kanban_create_with_a_bad_argument_is_a_usage_error_and_creates_nothing(home, args, words):
    err = _one_line(run_cli("--home", str(home.root), "kanban", "create", *args), 2)
    assert words in err
    assert "No cards." in run_cli("--home", str(home.root), "kanban", "list").stdout
