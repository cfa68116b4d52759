"""The index of finished sessions (processes/.finished-index.json): ``ps`` reads it
instead of every folder, but never trusts it over the folders: a changed folder, a
removed one, a torn or foreign index all fall back to the folders, and the index is
rebuilt. Sessions are real; their end is aged with os.utime so they count as settled."""

from __future__ import annotations

import json
import os
import shutil
import time

from engine.config import Settings
from engine.processes import ProcessRegistry
from engine.processes import session as sess
from engine.processes.finished_index import INDEX_FILE
from tests.conftest import run_cli


def finished_sessions(home, n: int) -> list[str]:
    reg = ProcessRegistry(home, Settings())
    ids = []
    for i in range(n):
        s = reg.spawn(["sh", "-c", f"exit {i % 3}"])
        reg.wait(s.id)
        ids.append(s.id)
    long_ago = time.time() - 3600  # well past the settling time: no kill can still be completing
    for sid in ids:
        os.utime(home.processes_dir / sid / sess.EXIT_FILE, (long_ago, long_ago))
    return ids


def ps_all(home) -> list[dict]:
    result = run_cli("--home", str(home.root), "ps", "--all", "--json", env={"HERMES_AUTO_PRUNE": "0"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def without_runtime(rows):
    return [{k: v for k, v in row.items() if k != "runtime_seconds"} for row in rows]


def test_a_listing_writes_the_index_and_the_next_reads_the_same(home):
    ids = finished_sessions(home, 5)
    index = home.processes_dir / INDEX_FILE
    first = ps_all(home)
    assert sorted(json.loads(index.read_text())["sessions"]) == sorted(ids)
    assert without_runtime(ps_all(home)) == without_runtime(first)
    assert [row["exit_code"] for row in first] == [i % 3 for i in range(5)]


def test_a_changed_folder_is_read_again_not_taken_from_the_index(home):
    ids = finished_sessions(home, 3)
    ps_all(home)
    exit_file = home.processes_dir / ids[1] / sess.EXIT_FILE
    exit_file.write_text("7\n")  # its stat key no longer matches the index
    long_ago = time.time() - 1800
    os.utime(exit_file, (long_ago, long_ago))  # settled again, so it is indexed again
    by_id = {row["id"]: row for row in ps_all(home)}
    assert by_id[ids[1]]["exit_code"] == 7
    assert json.loads((home.processes_dir / INDEX_FILE).read_text())["sessions"][ids[1]]["session"]["exit_code"] == 7


def test_a_removed_folder_is_not_listed_from_the_index(home):
    ids = finished_sessions(home, 3)
    ps_all(home)
    shutil.rmtree(home.processes_dir / ids[0])
    assert [row["id"] for row in ps_all(home)] == ids[1:]
    assert ids[0] not in json.loads((home.processes_dir / INDEX_FILE).read_text())["sessions"]


def test_an_index_that_lies_about_a_session_is_not_believed(home):
    """Another writer's index whose key does not match the folder (here: a forged exit
    code under a wrong key) is ignored for that session."""
    ids = finished_sessions(home, 2)
    ps_all(home)
    index = home.processes_dir / INDEX_FILE
    data = json.loads(index.read_text())
    data["sessions"][ids[0]]["session"]["exit_code"] = 99
    data["sessions"][ids[0]]["key"][0] += 1
    index.write_text(json.dumps(data))
    assert {row["id"]: row["exit_code"] for row in ps_all(home)}[ids[0]] == 0


def test_a_torn_or_foreign_index_is_ignored_and_rebuilt(home):
    ids = finished_sessions(home, 3)
    expected = without_runtime(ps_all(home))
    index = home.processes_dir / INDEX_FILE
    for junk in (b"", b"{\"version\": 1, \"sessions\": {", b"[1, 2]", b"\xff\xfe", b"{\"version\": 99}"):
        index.write_bytes(junk)
        assert without_runtime(ps_all(home)) == expected
        assert sorted(json.loads(index.read_text())["sessions"]) == sorted(ids)


def test_sessions_without_an_exit_record_are_not_indexed(home, children):
    """A running session, and a lost one (its wrapper killed: no exit record; a later
    kill may still add a record), are always read from their folders."""
    import signal

    reg = ProcessRegistry(home, Settings())
    running = reg.spawn(["sleep", "600"])
    lost = reg.spawn(["sleep", "600"])
    finished_sessions(home, 1)
    os.kill(lost.pid, signal.SIGKILL)
    reg.wait(lost.id, timeout=30)
    try:
        statuses = {row["id"]: row["status"] for row in ps_all(home)}
        assert statuses[running.id] == "running" and statuses[lost.id] == "lost"
        indexed = json.loads((home.processes_dir / INDEX_FILE).read_text())["sessions"]
        assert running.id not in indexed and lost.id not in indexed and len(indexed) == 1
    finally:
        for s in (running, lost):
            reg.kill(s.id, grace=0.2)


def test_no_index_is_written_in_a_guest_home(home):
    """A home with hermes-agent's files: listing writes nothing there."""
    (home.root / "SOUL.md").write_text("hermes lives here\n")
    finished_sessions(home, 2)
    before = sorted(os.listdir(home.processes_dir))
    assert len(ps_all(home)) == 2
    assert sorted(os.listdir(home.processes_dir)) == before


def test_a_session_read_from_the_index_has_the_same_status_as_from_its_folder(home, tmp_path):
    """The index stores the status as text; read back it must be the SessionStatus
    itself (code compares with `is`): a killed session stays 'killed (SIGTERM)', not
    'exit 143 (SIGTERM)'."""
    from tests.support import wait_until

    reg = ProcessRegistry(home, Settings())
    ready = tmp_path / "ready"
    s = reg.spawn(["sh", "-c", f"touch {ready}; exec sleep 30"])
    wait_until(ready.exists, what="the command to run")  # a TERM before it runs would find only the wrapper
    assert reg.kill(s.id, grace=5).outcome == "killed"
    from_folder = reg.get(s.id)
    assert from_folder.status is sess.SessionStatus.KILLED and from_folder.exit_text() == "killed (SIGTERM)"
    ProcessRegistry(home, Settings()).list()  # writes the index
    assert s.id in json.loads((home.processes_dir / INDEX_FILE).read_text())["sessions"]
    [from_index] = ProcessRegistry(home, Settings()).list()  # reads it
    assert from_index.status is sess.SessionStatus.KILLED
    assert from_index.exit_text() == "killed (SIGTERM)"
    assert from_index == from_folder


# What `ps --json` must not load on a home whose sessions all come from the index: each
# costs every listing start-up time (typing, subprocess, shutil a few ms each; the regex
# patterns of the masking ~3 ms; identity and hermes-agent's reader their dataclasses).
NOT_FOR_A_LISTING = (
    "typing", "subprocess", "shutil", "sqlite3", "yaml", "uuid", "tempfile", "textual",
    "engine.identity", "engine.fsutil", "engine.doctor", "engine.processes.supervisor",
    "engine.processes.hermes_sessions", "engine.hermes.processes", "engine.processes.kill_report",
)


def test_ps_json_of_indexed_sessions_loads_only_what_a_listing_needs(home):
    import subprocess
    import sys

    finished_sessions(home, 3)
    ps_all(home)  # builds the index
    code = (
        "import sys\n"
        "from hermes_tui.cli import main\n"
        f"code = main(['--home', {str(home.root)!r}, 'ps', '--all', '--json'])\n"
        "import engine.processes.redact as redact\n"
        "print(repr((code, sorted(sys.modules), len(redact._compiled))), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "HERMES_AUTO_PRUNE": "0"})
    code, modules, patterns = eval(out.stderr.strip().splitlines()[-1])
    assert code == 0 and len(json.loads(out.stdout)) == 3
    assert [m for m in NOT_FOR_A_LISTING if m in modules] == []
    assert patterns == 0  # `sh -c 'exit N'` holds nothing a masking pattern could match


def test_ps_of_running_sessions_builds_none_of_the_indexed_finished_ones(home, monkeypatch):
    """A listing without --all drops every finished session: the index only says which
    ids it still holds, and none of them is made into a ProcessSession (300 of them were
    a visible part of `ps --json`)."""
    from engine.processes import finished_index

    ids = finished_sessions(home, 4)
    ProcessRegistry(home, Settings()).list()  # writes the index
    built: list[str] = []
    real = finished_index._session_of
    monkeypatch.setattr(finished_index, "_session_of", lambda d, rec: built.append(d.name) or real(d, rec))
    reg = ProcessRegistry(home, Settings())
    assert reg.list(include_finished=False) == [] and built == []
    assert reg.list_with_hermes(include_finished=False).sessions == () and built == []
    # Asked for afterwards, on the same registry, each is built from the index as before.
    fresh = {s.id: s for s in ProcessRegistry(home, Settings()).list()}
    assert reg.get(ids[2]) == fresh[ids[2]] and built[-1] == ids[2]
    assert reg.list() == [fresh[sid] for sid in ids]


def test_a_session_changed_after_a_listing_of_running_ones_is_read_from_its_folder(home):
    ids = finished_sessions(home, 2)
    ProcessRegistry(home, Settings()).list()  # writes the index
    reg = ProcessRegistry(home, Settings())
    assert reg.list(include_finished=False) == []
    exit_file = home.processes_dir / ids[0] / sess.EXIT_FILE
    exit_file.write_text("7\n")  # its stat key no longer matches the index
    os.utime(exit_file, (time.time() - 1800,) * 2)
    assert reg.get(ids[0]).exit_code == 7
    assert [s.exit_code for s in reg.list()] == [7, 1]
