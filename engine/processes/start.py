"""Starting a session: the wrapper waiting at its gate, and the records written before it goes.

:meth:`engine.processes.registry.ProcessRegistry.spawn` makes the session's folder and
name, then, in this order: the environment record (what ``proc restart`` runs again),
the wrapper started at its gate (:func:`start_gated`: nothing of the command runs yet),
the session's record (:func:`write_meta_record`: pid and fingerprint, whole or not at
all), and only then the gate opened (:func:`open_gate`). A spawn stopped between any
two leaves a folder that reads as never started, and nothing of it ran; a record that
cannot be written closes the gate instead (:func:`abort_gated`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from engine.processes import session as sess

TYPE_CHECKING = False  # as in the registry: a listing must not pay for typing or subprocess
if TYPE_CHECKING:
    import subprocess
    from typing import Any


def meta_key(st: os.stat_result) -> tuple[int, int, int]:
    """What must be unchanged for a cached reading of ``meta.json`` to still hold. The
    inode is in it: every rewrite renames a new file in, and two rewrites within one
    tick of the file system's clock keep the same mtime."""
    return (st.st_mtime_ns, st.st_ino, st.st_size)


def start_gated(d: Path, argv: list[str], workdir: str, environ: dict[str, str],
                 restart_args: list[str] | None = None) -> subprocess.Popen:
    """Start the wrapper, waiting at its gate (stdin): the command does not run yet."""
    import subprocess

    from engine.processes.supervisor import WRAPPER_SHELL, wrapper_argv

    folder = str(d)
    if restart_args is None:
        wrapper = wrapper_argv(f"{folder}/{sess.EXIT_FILE}", argv)
    else:
        from engine.processes.restart import RESTART_SCRIPT

        wrapper = [WRAPPER_SHELL, "-c", RESTART_SCRIPT, f"{folder}/{sess.EXIT_FILE}", *restart_args, *argv]
    out_fd = os.open(f"{folder}/{sess.OUTPUT_FILE}", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        return subprocess.Popen(
            wrapper,
            cwd=workdir,
            env=environ,
            stdin=subprocess.PIPE,
            stdout=out_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(out_fd)

def open_gate(popen: subprocess.Popen) -> None:
    """The session is recorded: let the command run."""
    from engine.processes.supervisor import GO

    assert popen.stdin is not None
    try:
        popen.stdin.write(GO)
        popen.stdin.close()
    except OSError:
        pass  # the wrapper is already gone (killed): the session reads as lost

def abort_gated(popen: subprocess.Popen) -> None:
    """Close the gate without "go": the wrapper exits and the command never runs."""
    assert popen.stdin is not None
    try:
        popen.stdin.close()
    except OSError:
        pass
    popen.wait()


def write_meta_record(d: Path, meta: dict[str, Any]) -> tuple[int, int, int]:
    """``meta.json`` whole or not at all, for readers (written aside, then renamed in);
    returns its :func:`meta_key`.

    Not fsynced: the record is what lets every instance verify and spare the session's
    live processes, and no process outlives the machine crash that could lose an
    unsynced write. A session left by such a crash reads as never started (no record)
    or, on a file system that leaves a torn file, as unreadable (then the pruner signals
    nobody: fail closed). The fsync was most of the cost of a spawn."""
    folder = str(d)
    tmp = f"{folder}/.{sess.META_FILE}.started"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            data = memoryview(json.dumps(meta).encode() + b"\n")
            while data:  # a short write is followed by one that raises (ENOSPC)
                data = data[os.write(fd, data):]
            key = meta_key(os.fstat(fd))
        finally:
            os.close(fd)
        os.rename(tmp, f"{folder}/{sess.META_FILE}")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return key


ENV_FILE = "env.json"


def write_env_record(d: Path, environ: Mapping[str, str]) -> None:
    """The command's whole environment, for `proc restart` (0600, like the folder's
    other files: the environment of one's own processes is readable in /proc anyway)."""
    import json

    fd = os.open(d / ENV_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
        json.dump(dict(environ), fh)


def read_env_record(d: Path) -> dict[str, str] | None:
    import json

    try:
        data = json.loads((d / ENV_FILE).read_text(encoding="utf-8", errors="surrogateescape"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return None
    return data
