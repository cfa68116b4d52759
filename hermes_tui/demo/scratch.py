"""The scratch part of the demo home, built with real engine operations.

- ``finished-run``: idle for three days, with a stray ``sleep`` working inside; a
  real prune pass runs over it, so the prune log starts with a real TERM and a
  real quarantine (the entry can be restored with ``u``);
- ``lane-refactor-auth``: idle for two days (what the next prune would take);
- ``lane-build-cache``: active, its only recent write four levels deep;
- ``parked-experiment``: idle but kept by a ``.scratch-keep`` marker;
- ``lane-long-compile``: idle, kept because a live registered process (a real
  background session of this home) works inside it.

Times are set with ``os.utime``; nothing is canned.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from engine.config import load_config
from engine.home import HomeLayout

HOUR = 3600.0
_sessions: dict[str, str] = {}  # home root -> demo session id


def _age(path: Path, hours: float) -> None:
    when = time.time() - hours * HOUR
    for dirpath, _dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
        os.utime(dirpath, (when, when))


def _entry(scratch: Path, name: str, files: dict[str, str], hours: float) -> Path:
    entry = scratch / name
    for rel, text in files.items():
        p = entry / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    _age(entry, hours)
    return entry


SCRATCH_CONFIG = """\
scratch:
  # The demo's entries are made just now and aged with os.utime, which cannot age
  # their arrival (the inode change time): by default they would all have "arrived".
  arrival_hours: 0
"""


def append_config(home: HomeLayout) -> None:
    """Add the scratch section to the demo config (once)."""
    text = home.config_file.read_text(encoding="utf-8") if home.config_file.exists() else ""
    if "\nscratch:" not in "\n" + text:
        home.config_file.write_text((text.rstrip("\n") + "\n" if text else "") + SCRATCH_CONFIG, encoding="utf-8")


def build(home: HomeLayout) -> None:
    from engine.scratch.execute import prune_pass
    from engine.scratch.result import PassFailed
    from engine.scratch.target import PruneOptions, PruneTarget

    settings = load_config(home.config_file)
    target = PruneTarget.of(home)
    scratch = home.ensure_dir(target.scratch_dir)

    # 1. A finished run with a stray process inside, then a real pass over it.
    finished = _entry(scratch, "finished-run", {
        "report.json": '{"tests": 412, "failed": 0}\n',
        "artifacts/coverage.xml": "<coverage/>\n" * 200,
    }, hours=72)
    stray = subprocess.Popen(["sleep", "600"], cwd=finished, start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _entry(scratch, "parked-experiment", {
        ".scratch-keep": "keeping this until the paper is out\n",
        "notebook.ipynb": "{}\n",
        "data/sample.csv": "a,b\n1,2\n" * 500,
    }, hours=120)
    busy = _entry(scratch, "lane-long-compile", {"build/main.o": "\0" * 4096}, hours=30)
    _start_registered_process(home, settings, busy)
    options = replace(PruneOptions.from_settings(home, settings), kill_grace_seconds=1.0)
    try:
        prune_pass(target, options)
    except PassFailed as exc:  # the app reports the error itself ("RuntimeError: ...")
        raise exc.error from None
    try:
        stray.wait(timeout=5)
    except subprocess.TimeoutExpired:
        stray.kill()
        stray.wait()

    # 2. Entries the next pass would judge.
    _entry(scratch, "lane-refactor-auth", {
        "repo/src/auth.py": "def login():\n    ...\n" * 40,
        "repo/README.md": "# auth refactor\n",
    }, hours=50)
    active = _entry(scratch, "lane-build-cache", {
        "cache/v1/objects/ab/cdef.bin": "x" * 8000,
        "cache/v1/index": "idx\n",
    }, hours=60)
    deep = active / "cache" / "v1" / "objects" / "ab" / "cdef.bin"
    recent = time.time() - 3 * HOUR
    os.utime(deep, (recent, recent))  # the only recent write, four levels down
    _age_dirs_only(active, 60)
    # The hourly automatic pass must not tidy the showcase away on start-up.
    target.stamp_file.touch()


def _age_dirs_only(path: Path, hours: float) -> None:
    when = time.time() - hours * HOUR
    for dirpath, _dirnames, _filenames in os.walk(path, topdown=False):
        os.utime(dirpath, (when, when))


def _start_registered_process(home: HomeLayout, settings, cwd: Path) -> str:
    from engine.processes import ProcessRegistry

    session = ProcessRegistry(home, settings).spawn(["sleep", "1800"], cwd=cwd, owner="demo")
    _sessions[str(home.root)] = session.id
    return session.id


def cleanup(home: HomeLayout) -> None:
    session_id = _sessions.pop(str(home.root), None)
    if session_id is None:
        return
    from engine.processes import ProcessRegistry

    ProcessRegistry(home, load_config(home.config_file)).kill(session_id, grace=1.0)
