"""The home: where one agent workspace lives, and the paths inside it.

Resolution order is fixed by the architecture: ``--home DIR`` > ``$HERMES_HOME`` >
``~/.hermes``. Directories are created on demand with the home's permission policy:
mode 0700 unless ``HERMES_HOME_MODE`` (an octal string) says otherwise. Only directories
hermes-tui creates get that mode: an existing directory (or one reached through a
symlink) keeps its own, and nothing is chmod-ed when ``<home>/.managed`` exists.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODE = 0o700
MANAGED_MARKER = ".managed"


class HomeError(Exception):
    """The home cannot be used (bad HERMES_HOME_MODE, unwritable path, ...)."""


def resolve_home(cli_home: str | os.PathLike[str] | None = None, environ: dict[str, str] | None = None) -> Path:
    """Pick the home directory: the CLI flag wins, then HERMES_HOME, then ~/.hermes."""
    env = os.environ if environ is None else environ
    if cli_home:
        raw = os.fspath(cli_home)
    elif env.get("HERMES_HOME"):
        raw = env["HERMES_HOME"]
    else:
        raw = os.path.join(os.path.expanduser("~"), ".hermes")
    return Path(os.path.abspath(os.path.expanduser(raw)))


def home_mode(environ: dict[str, str] | None = None) -> int:
    """The mode for directories we create, from HERMES_HOME_MODE (octal) or 0700."""
    env = os.environ if environ is None else environ
    raw = env.get("HERMES_HOME_MODE", "").strip()
    if not raw:
        return DEFAULT_MODE
    try:
        mode = int(raw, 8)
    except ValueError:
        raise HomeError(f"HERMES_HOME_MODE must be an octal mode such as 0700, got {raw!r}") from None
    if not 0 <= mode <= 0o7777:
        raise HomeError(f"HERMES_HOME_MODE must be an octal mode such as 0700, got {raw!r}")
    return mode


def check_home_path(root: Path) -> None:
    """Refuse a home that can never be one, before anything reads inside it: the path
    (or one of its parents) is a file. A home that does not exist yet is fine."""
    p = Path(root)
    for candidate in [p, *p.parents]:
        try:
            st = os.stat(candidate)
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue  # a parent higher up is the file: found on a later turn
        except OSError as exc:
            raise HomeError(f"{root} cannot be used: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            return
        if candidate == p:
            raise HomeError(f"{root} is a file, not a directory (a home must be a directory)")
        raise HomeError(f"{root} cannot be created: {candidate} is a file, not a directory")


@dataclass(frozen=True)
class HomeLayout:
    """Every path of a home, in one place. Nothing is created until ``ensure_*`` is called."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"

    @property
    def managed_marker(self) -> Path:
        return self.root / MANAGED_MARKER

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def scratch_dir(self) -> Path:
        return self.cache_dir / "scratch"

    @property
    def quarantine_dir(self) -> Path:
        return self.cache_dir / "scratch-quarantine"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def prune_log(self) -> Path:
        return self.logs_dir / "scratch-prune.log"

    @property
    def kanban_logs_dir(self) -> Path:
        return self.logs_dir / "kanban"

    @property
    def processes_dir(self) -> Path:
        return self.root / "processes"

    @property
    def own_dir(self) -> Path:
        """hermes-tui's own folder in the home: files hermes-agent never opens."""
        return self.root / "hermes-tui"

    @property
    def kanban_db(self) -> Path:
        """hermes-tui's own board (``<home>/hermes-tui/board.db``)."""
        return self.own_dir / "board.db"

    @property
    def shared_kanban_db(self) -> Path:
        """``<home>/kanban.db``: hermes-agent's board, or an older hermes-tui's (moved to
        :attr:`kanban_db` on first use)."""
        return self.root / "kanban.db"

    @property
    def hermes_kanban_root(self) -> Path:
        """Where hermes-agent keeps its boards, as hermes finds it (hermes_cli/kanban_db.py
        ``kanban_home()``): ``$HERMES_KANBAN_HOME`` when set, else the root of a profile's
        home (``<root>/profiles/<name>`` -> ``<root>``, when ``<root>/kanban.db`` is there:
        hermes shares one board across profiles), else the home. Read at each call (a
        stat at most)."""
        given = os.environ.get("HERMES_KANBAN_HOME", "").strip()
        if given:
            return Path(os.path.abspath(Path(given).expanduser()))
        if self.root.parent.name == "profiles" and (self.root.parent.parent / "kanban.db").is_file():
            return self.root.parent.parent
        return self.root

    @property
    def hermes_kanban_db(self) -> Path:
        """hermes-agent's ``default`` board: ``kanban.db`` in :attr:`hermes_kanban_root`."""
        return self.hermes_kanban_root / "kanban.db"

    @property
    def hermes_kanban_logs_dir(self) -> Path:
        """Where hermes-agent keeps its workers' logs (``kanban/logs/<id>.log``)."""
        return self.hermes_kanban_root / "kanban" / "logs"

    @property
    def is_managed(self) -> bool:
        return self.managed_marker.exists()

    # -- creation -------------------------------------------------------------------

    def ensure_dir(self, path: Path, environ: dict[str, str] | None = None) -> Path:
        """Create ``path`` (and its parents up to the root) with the home's policy.

        Only a directory this call creates gets the home's mode (mkdir's mode is cut by
        the umask, so it is set again). A directory that already existed keeps its mode,
        whoever made it, and so does anything reached through a symlink (a shared 1777
        or 2775 scratch keeps its sticky and setgid bits): ``doctor`` reports a home that
        is too open instead of fixing it silently. Directories outside the home are
        created but never chmod-ed, and a managed home is never chmod-ed at all.
        """
        mode = home_mode(environ)
        chain = self._chain_to_root(path)
        may_chmod = chain[-1] == self.root and not self.is_managed
        # The leaf first: its parents almost always exist (a worker's or a session's folder),
        # and then it is the only directory this call can make. Otherwise, root to leaf.
        try:
            path.mkdir(mode=mode)
        except (FileNotFoundError, FileExistsError, NotADirectoryError):
            pass  # the walk below says what it is, with its own errors
        except OSError as exc:
            raise HomeError(f"cannot create {path}: {exc.strerror or exc}") from None
        else:
            if may_chmod:
                self._set_mode(path, mode)
            return path
        for d in reversed(chain):
            if self._make_dir(d, mode) and may_chmod:
                self._set_mode(d, mode)
        return path

    @staticmethod
    def _set_mode(d: Path, mode: int) -> None:
        """The home's mode on a directory this call just made (so not a symlink)."""
        try:
            if (os.lstat(d).st_mode & 0o7777) != mode:
                os.chmod(d, mode)
        except OSError as exc:
            raise HomeError(f"cannot set mode {mode:o} on {d}: {exc.strerror or exc}") from None

    def _chain_to_root(self, path: Path) -> list[Path]:
        """``path`` and its parents up to the home's root (or the filesystem root)."""
        chain: list[Path] = []
        p = path
        while True:
            chain.append(p)
            if p == self.root or p.parent == p:
                return chain
            p = p.parent

    @staticmethod
    def _make_dir(d: Path, mode: int) -> bool:
        """mkdir ``d``; True only when this call created it (an existing directory, or a
        symlink to one, is left exactly as it is)."""
        try:
            d.mkdir(mode=mode)
            return True
        except FileNotFoundError:  # the home's parents are missing: make them (never chmod-ed)
            try:
                d.parent.mkdir(parents=True, exist_ok=True)
                d.mkdir(mode=mode)
            except OSError as exc:
                raise HomeError(f"cannot create {d}: {exc.strerror or exc}") from None
            return True
        except FileExistsError:
            if not d.is_dir():
                raise HomeError(f"{d} exists and is not a directory") from None
            return False
        except NotADirectoryError:
            raise HomeError(f"cannot create {d}: a parent of it is a file, not a directory") from None
        except OSError as exc:
            raise HomeError(f"cannot create {d}: {exc.strerror or exc}") from None

    def ensure(self, environ: dict[str, str] | None = None) -> HomeLayout:
        """Create the root of the home (sub-folders are created by whoever needs them)."""
        self.ensure_dir(self.root, environ)
        return self
