"""The supervising wrapper, run for real: a signal that reaches it before its command
started ends it there, recorded, and the command never runs."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from engine.processes.supervisor import GO, wrapper_argv
from tests.support.waiting import wait_until


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _waits_at_gate(pid: int) -> bool:
    # blocked reading its stdin pipe: the traps are set, the gate not yet passed
    return "pipe" in Path(f"/proc/{pid}/wchan").read_text() and _state(pid) == "S"


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    record, marker = tmp_path / "exit", tmp_path / "ran"
    argv = wrapper_argv(record, ["/bin/sh", "-c", f'echo ran > "{marker}"'])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    wait_until(lambda: _waits_at_gate(proc.pid), what="the wrapper waiting at its gate")
    return proc, record, marker


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_signal_at_the_gate_ends_the_wrapper_recorded_without_running_the_command(tmp_path, sig, code):
    proc, record, marker = _start(tmp_path)
    os.kill(proc.pid, sig)
    assert proc.wait(timeout=60) == code
    proc.stdin.close()
    assert record.read_text() == f"{code}\n"
    assert not marker.exists()


def test_a_signal_pending_when_go_is_already_written_still_stops_the_command(tmp_path):
    # The kill lands after the spawner wrote "go" but before the wrapper read it: stop
    # the wrapper at its gate, write "go", signal, let it go on.
    proc, record, marker = _start(tmp_path)
    os.kill(proc.pid, signal.SIGSTOP)
    wait_until(lambda: _state(proc.pid) == "T", what="the wrapper stopped")
    proc.stdin.write(GO)
    proc.stdin.flush()
    os.kill(proc.pid, signal.SIGTERM)
    os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(timeout=60) == 143
    proc.stdin.close()
    assert record.read_text() == "143\n"
    assert not marker.exists()


def test_go_runs_the_command_and_records_its_exit(tmp_path):
    proc, record, marker = _start(tmp_path)
    proc.stdin.write(GO)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert record.read_text() == "0\n"
    assert marker.read_text() == "ran\n"


def test_a_closed_gate_ends_the_wrapper_unrecorded(tmp_path):
    proc, record, marker = _start(tmp_path)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 125
    assert not record.exists() and not marker.exists()
