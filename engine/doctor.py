"""``hermes-tui doctor``: a read-only health report of a home. Creates nothing.

Besides the config and the scratch sizes it says whose home this is: a home with
hermes-agent's files is a guest home (hermes-tui starts no automatic prune there and
changes no modes), and the config sections that belong to someone else are listed.
A home readable or writable by others is reported, never fixed silently.
"""

from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.config import ConfigError, Settings, load_config
from engine.fsutil import tree_size
from engine.hermes.config_keys import HERMES_AGENT_VERSION, HERMES_SECTIONS
from engine.hermes.guest import home_owner
from engine.home import HomeLayout
from engine.identity import HAVE_PIDFD, proc_readable

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
    config_exists: bool = False
    # Signs that the home is someone else's (hermes-agent's files); empty: our own home.
    guest_signs: list[str] = field(default_factory=list)
    # Top-level config sections hermes-tui does not use, and hermes's kanban keys it leaves alone.
    hermes_sections: list[str] = field(default_factory=list)
    other_sections: list[str] = field(default_factory=list)
    hermes_keys: list[str] = field(default_factory=list)
    hermes_agent_version_known: str = HERMES_AGENT_VERSION
    home_mode: str | None = None  # octal, e.g. "0755"
    home_open_to_others: bool = False
    # A PostgreSQL board (kanban.database, $HERMES_KANBAN_DATABASE_URL): its check, else None.
    shared_board: dict | None = None
    # The sessions' folders (their output, on disk: a cut output counts only what it holds).
    processes_dir: str = ""
    processes_bytes: int = 0
    # Desktop notifications of new attention items (notify.desktop): possible here, and why not.
    desktop_notices: bool = False
    desktop_notices_why: str = ""

    @property
    def ok(self) -> bool:
        """False (exit 2) for bad input: the config, or a board URL that cannot be used."""
        return self.config_ok and not (self.shared_board or {}).get("bad_url")

    @property
    def is_guest(self) -> bool:
        return bool(self.guest_signs)

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


def home_mode_of(root: Path) -> int | None:
    """The permission bits of the home (following a symlinked home), None if absent."""
    try:
        return stat.S_IMODE(os.stat(root).st_mode)
    except OSError:
        return None


def run_doctor(home: HomeLayout, environ: dict[str, str] | None = None) -> tuple[DoctorReport, Settings | None]:
    env = os.environ if environ is None else environ
    settings: Settings | None = None
    error: str | None = None
    try:
        settings = load_config(home.config_file)
    except ConfigError as exc:
        error = str(exc)
    mode = home_mode_of(home.root)
    foreign = [name for name, _line in settings.foreign_sections] if settings else []
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
        pidfd_available=HAVE_PIDFD,
        proc_readable=proc_readable(),
        config_exists=home.config_file.is_file(),
        guest_signs=list(home_owner(home.root, settings).signs) if home.root.is_dir() else [],
        hermes_sections=[n for n in foreign if n in HERMES_SECTIONS],
        other_sections=[n for n in foreign if n not in HERMES_SECTIONS],
        hermes_keys=list(settings.hermes_keys) if settings else [],
        home_mode=None if mode is None else f"{mode:04o}",
        home_open_to_others=mode is not None and bool(mode & 0o077),
        shared_board=_shared_board(home, settings, env),
        processes_dir=str(home.processes_dir),
        processes_bytes=tree_size(home.processes_dir, on_disk=True),
    )
    from engine.attention.notify import desktop_status

    report.desktop_notices, report.desktop_notices_why = desktop_status(env)
    return report, settings


def _shared_board(home: HomeLayout, settings: Settings | None, env) -> dict | None:
    """The PostgreSQL board's check, when this home uses one (a file board: None)."""
    from engine.kanban import board_location
    from engine.kanban.backends.postgres.url import BadDatabaseUrl, DatabaseUrl

    if settings is None:
        return None
    try:
        where = board_location(home, settings, environ=env)
    except BadDatabaseUrl as exc:
        return {"url": None, "reachable": False, "state": f"the board database URL {exc}", "usable": False,
                "bad_url": True, "host_id": None, "lease_expires_in": None, "lease_boot_id": None,
                "this_boot_id": None}  # the fields of every other answer
    if not isinstance(where, DatabaseUrl):
        return None
    from engine.kanban.backends.postgres.check import check_shared_board
    from engine.kanban.workers import hostname

    return check_shared_board(where, hostname()).to_json()


# -- what doctor warns about, as records (the attention list shows them) ------------------


@dataclass(frozen=True)
class HomeWarning:
    """One thing ``doctor`` warns about: ``check`` names it (stable), ``text`` says it,
    ``action`` says what answers it."""

    check: str
    text: str
    action: str


def home_warnings(home: HomeLayout, settings: Settings | None = None) -> list[HomeWarning]:
    """doctor's warnings that are cheap to look at again and again (no walk of the
    scratch folder): a home open to others, a big cache folder no pruner covers, an
    unreadable /proc. Reads only."""
    found: list[HomeWarning] = []
    mode = home_mode_of(home.root)
    if mode is not None and mode & 0o077:
        found.append(HomeWarning("mode", f"the home {home.root} is {mode:04o}: open to other users",
                                 f"chmod 700 {home.root}"))
    for d in large_unpruned_cache_dirs(home):
        from engine.text import human_bytes

        found.append(HomeWarning(f"cache:{Path(d.path).name}",
                                 f"{d.path} holds {human_bytes(d.size_bytes)} and no pruner covers it",
                                 "clear it, or move what it holds under cache/scratch"))
    if not proc_readable():
        found.append(HomeWarning("proc", "/proc is not readable: no process is ever signalled, "
                                 "entries with processes are kept", "run where /proc is mounted and readable"))
    return found
