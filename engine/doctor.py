"""``hermes-tui doctor``: a read-only health report of a home. Creates nothing."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from engine.config import ConfigError, Settings, load_config
from engine.fsutil import tree_size
from engine.home import HomeLayout
from engine.identity import pidfd_available, proc_readable

GIB = 1024**3

# cache/ sub-folders some pruner in this product looks after.
PRUNED_CACHE_DIRS = ("scratch", "scratch-quarantine")


@dataclass(frozen=True)
class LargeDir:
    path: str
    size_bytes: int


@dataclass
class DoctorReport:
    home: str
    home_exists: bool
    config_file: str
    config_ok: bool
    config_error: str | None
    scratch_dir: str
    scratch_bytes: int
    quarantine_dir: str
    quarantine_bytes: int
    tmpdir: str | None
    tmpdir_user_set: bool
    large_cache_dirs: list[LargeDir] = field(default_factory=list)
    pidfd_available: bool = False
    proc_readable: bool = False

    @property
    def ok(self) -> bool:
        return self.config_ok

    def to_json(self) -> dict:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def tmpdir_is_users(environ: dict[str, str] | None = None) -> bool:
    """TMPDIR was set by the user, not by us (our spawns set HERMES_SCRATCH_DIR = TMPDIR)."""
    env = os.environ if environ is None else environ
    tmp = env.get("TMPDIR")
    if not tmp:
        return False
    return env.get("HERMES_SCRATCH_DIR") != tmp


def large_unpruned_cache_dirs(home: HomeLayout, threshold: int = GIB) -> list[LargeDir]:
    found: list[LargeDir] = []
    try:
        children = sorted(os.scandir(home.cache_dir), key=lambda e: e.name)
    except OSError:
        return found
    for entry in children:
        if entry.name in PRUNED_CACHE_DIRS:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        size = tree_size(entry.path, stop_above=threshold)
        if size > threshold:
            found.append(LargeDir(entry.path, size))
    return found


def run_doctor(home: HomeLayout, environ: dict[str, str] | None = None) -> tuple[DoctorReport, Settings | None]:
    env = os.environ if environ is None else environ
    settings: Settings | None = None
    error: str | None = None
    try:
        settings = load_config(home.config_file)
    except ConfigError as exc:
        error = str(exc)
    report = DoctorReport(
        home=str(home.root),
        home_exists=home.root.is_dir(),
        config_file=str(home.config_file),
        config_ok=error is None,
        config_error=error,
        scratch_dir=str(home.scratch_dir),
        scratch_bytes=tree_size(home.scratch_dir),
        quarantine_dir=str(home.quarantine_dir),
        quarantine_bytes=tree_size(home.quarantine_dir),
        tmpdir=env.get("TMPDIR"),
        tmpdir_user_set=tmpdir_is_users(env),
        large_cache_dirs=large_unpruned_cache_dirs(home),
        pidfd_available=pidfd_available(),
        proc_readable=proc_readable(),
    )
    return report, settings
