"""Finding a test's processes by their environment, independently of the code under
test (engine.processes.tree): every command a session runs carries ``HERMES_HOME`` and
``HERMES_PROCESS_ID`` in ``/proc/<pid>/environ``, whatever group or session it moved to."""

from __future__ import annotations

import os
import signal


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def _name(pid: int) -> str | None:
    """The process's name, None when it is gone or a zombie (it has exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    close = raw.rfind(b")")
    if raw[close + 2 : close + 3] in (b"Z", b"X"):
        return None
    return raw[raw.find(b"(") + 1 : close].decode(errors="replace")


def processes_with(entry: str) -> dict[int, str]:
    """Live processes whose environment holds ``entry`` (``NAME=value``): pid -> name."""
    wanted = entry.encode()
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid() and wanted in _environ(int(name)):
            comm = _name(int(name))
            if comm is not None:
                found[int(name)] = comm
    return found


def of_session(session_id: str) -> dict[int, str]:
    return processes_with(f"HERMES_PROCESS_ID={session_id}")


def of_home(home) -> dict[int, str]:
    return processes_with(f"HERMES_HOME={home.root}")


def kill_all_of_home(home) -> None:
    """SIGKILL every process of the home's sessions (a red test must not leave them running)."""
    for pid in of_home(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
