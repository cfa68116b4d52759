"""Helpers for the scratch tests: real entries with real (aged) mtimes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout
from engine.scratch.target import PruneOptions, PruneTarget
from tests.support.waiting import wait_until

HOUR = 3600.0


def age_tree(path: Path, hours: float) -> None:
    """Set atime/mtime of ``path`` and everything below it to ``hours`` ago (bottom-up,
    so setting a file does not freshen its directory afterwards)."""
    when = time.time() - hours * HOUR
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        os.utime(path, (when, when), follow_symlinks=False)
        return
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
        os.utime(dirpath, (when, when))


def make_entry(scratch: Path, name: str | bytes, files: dict[str, str] | None = None, hours: float = 30) -> Path:
    """A directory entry with ``files`` (relative path -> text), all aged ``hours``."""
    scratch.mkdir(parents=True, exist_ok=True)
    entry = Path(os.fsdecode(os.path.join(os.fsencode(scratch), os.fsencode(name))))
    entry.mkdir()
    for rel, text in (files or {"a/b/c/work.txt": "work"}).items():
        p = entry / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    age_tree(entry, hours)
    return entry


def touch_now(path: Path) -> None:
    os.utime(path, None)


def target_of(home: HomeLayout) -> PruneTarget:
    t = PruneTarget.of(home)
    home.ensure_dir(t.scratch_dir)
    return t


def options(quarantine_hours: float = 0.0, idle_hours: float = 24.0, grace: float = 3.0, registered=None,
            arrival_hours: float = 0.0, **kw) -> PruneOptions:
    """The prune's options for a test. ``arrival_hours`` defaults to 0 (arrivals do not
    count): ``make_entry`` ages mtimes, but no test can age an inode's ctime, so every
    entry it makes has just *arrived*. The arrival tests pass ``arrival_hours=None``."""
    return PruneOptions(idle_hours=idle_hours, quarantine_hours=quarantine_hours, kill_grace_seconds=grace,
                        registered=registered, arrival_hours=arrival_hours, **kw)


# config.yaml for a CLI test whose aged entries must look idle (see ``options``).
NO_ARRIVAL_CONFIG = "scratch:\n  arrival_hours: 0\n"


def log_text(home: HomeLayout) -> str:
    p = home.prune_log
    return p.read_text(encoding="utf-8") if p.exists() else ""


def default_settings() -> Settings:
    return Settings()


def prune_on_pty(home: HomeLayout, answer: bytes, *args: str, at_prompt=None) -> tuple[int, str]:
    """Run ``hermes-tui prune`` on a real pseudo-terminal and type ``answer`` at its
    question; ``at_prompt()`` runs first, while the plan is on screen (what a person
    could do between reading the plan and answering)."""
    from tests.support.cli import run_on_pty

    return run_on_pty("--home", str(home.root), "prune", *args, prompt=b"[y/N]", answer=answer, at_prompt=at_prompt)


def in_cwd(pid: int, path: Path) -> bool:
    """``pid`` works in ``path`` (also when the kernel already marks it deleted)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd") in (str(path), f"{path} (deleted)")
    except OSError:
        return False


def start_in(children, argv, cwd: Path):
    """A real child working in ``cwd``, returned once it has exec'd (not python any more)."""
    from engine import identity

    p = children(argv, cwd=cwd)
    assert wait_until(lambda: in_cwd(p.pid, cwd) and identity.read_stat(p.pid).comm != b"python3")
    return p


def exited(p, timeout: float = 10.0) -> bool:
    try:
        p.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False
