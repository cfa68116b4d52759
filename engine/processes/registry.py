"""The registry over ``<home>/processes/``: spawn, list, look up, wait, kill.

Every instance (an app, a CLI call, the kanban dispatcher) reads the same folders, so a
session started by one is seen, followed and killed by any other. The instance that
spawned a session also holds its ``Popen`` so it can wait without polling and reap it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from engine.processes import session as sess
from engine.processes import start
from engine.processes.finished_index import FinishedIndex, StatKey, indexable, stat_key
from engine.processes.session import (
    ID_HEX_LEN,
    ID_PREFIX,
    ProcessLookupFailed,
    ProcessSession,
    SessionCorrupt,
    SessionNotStarted,
    SessionSource,
)

# Not `from typing import TYPE_CHECKING`: a listing (`ps`) must not pay for typing, nor
# for subprocess, identity, the supervisor or hermes-agent's reader; each is imported
# where it is first needed (spawning, waiting, a running session, processes.json).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.processes.hermes_sessions import HermesListing
    from engine.processes.kill_report import KillReport
    from engine.processes.restart import RestartPolicy

MIN_PREFIX_HEX = 4
RETENTION_EVERY_SECONDS = 600.0
RETENTION_STAMP = ".last_retention"
# A spawn records its session within milliseconds; a folder still not started after
# this long belongs to a spawn that died or failed, and retention removes it.
ABANDONED_START_SECONDS = 600.0
# hermes-agent's list of its processes in the home (engine.hermes.processes.FILE_NAME;
# named here so a listing of a home without it never loads that reader).
HERMES_PROCESSES_FILE = "processes.json"


class SpawnFailed(Exception):
    """The command could not be started (bad cwd, empty command, no /bin/sh)."""


@contextlib.contextmanager
def _restart_lock(session_dir: Path):
    """Held through one restart of a session (look for a successor, stop, start): two
    restarts of one session at once cannot both start it again. The kernel drops it
    with its holder, so a restart killed half-way leaves nothing to clear."""
    try:
        fd = os.open(session_dir / sess.RESTART_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except PermissionError:
        raise  # another user's session: the CLI's one line for that
    except OSError as exc:  # a read-only or full file system: nothing is stopped or started
        raise SpawnFailed(f"cannot take the restart lock of {session_dir.name} ({exc.strerror or exc}): "
                          "nothing was stopped or started") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class Restarted:
    """What :meth:`ProcessRegistry.restart` did."""

    def __init__(self, old: ProcessSession, new: ProcessSession, stopped: KillReport | None,
                 env_recorded: bool) -> None:
        self.old = old
        self.new = new
        self.stopped = stopped
        self.env_recorded = env_recorded  # False: an old session; the current environment was used


class Listing:
    """One listing: the sessions (ours and hermes-agent's), one problem per unreadable
    session folder of ours, and why hermes-agent's processes.json could not be read.
    (Plain classes here and below: each dataclass costs a listing's start-up time.)"""

    __slots__ = ("sessions", "problems", "hermes_problem")

    def __init__(self, sessions: tuple[ProcessSession, ...], problems: tuple[SessionCorrupt, ...],
                 hermes_problem: str | None) -> None:
        self.sessions = sessions
        self.problems = problems
        self.hermes_problem = hermes_problem


def new_session_id() -> str:
    return ID_PREFIX + os.urandom(ID_HEX_LEN // 2).hex()  # as random as uuid4, without importing uuid


MAX_ID_ARGUMENT = 128  # the longest id, prefix or name a lookup takes (a name is at most 64)
_ID_ARGUMENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:#@+-")


def id_argument_problem(text: str) -> str | None:
    """Why ``text`` cannot be a session id, id prefix or name (None: it may be one). An
    id of 300 characters reached the file system ("File name too long"); one with a
    space, a slash or a control character is none either."""
    from engine.text import escape_text

    if not text:
        return "no process id given"
    shown = escape_text(text[:40]) + ("…" if len(text) > 40 else "")
    if len(text) > MAX_ID_ARGUMENT:
        return (f"process id '{shown}' is {len(text)} characters long: an id, prefix or name has at most "
                f"{MAX_ID_ARGUMENT}")
    if not _ID_ARGUMENT_CHARS.issuperset(text) or text.startswith("."):
        return (f"process id '{shown}' is not an id, prefix or name: use proc_ and hex digits, or a name "
                "(letters, digits, '.', '_', '-')")
    return None


def is_session_id(text: str) -> bool:
    """``proc_`` and 12 lowercase hex digits: a name safe as a folder of ours."""
    hexpart = text[len(ID_PREFIX):] if text.startswith(ID_PREFIX) else ""
    return len(hexpart) == ID_HEX_LEN and all(c in "0123456789abcdef" for c in hexpart)


class _Cached:
    """A running session's ``meta.json`` as read under ``meta_key``, and the session as
    last derived while its leader ran (``running``: reused while that leader's pidfd
    says it still runs and the metadata is unchanged)."""

    __slots__ = ("meta_key", "base", "running")

    def __init__(self, meta_key: tuple[int, int, int], base: ProcessSession) -> None:
        self.meta_key = meta_key
        self.base = base
        self.running: ProcessSession | None = None


# Every child this process spawned, whichever registry spawned it (the app holds several:
# the processes pane's, the dispatcher's spawner's, the demo's): any registry's reap
# collects them all, so a session killed through one registry is never left a zombie of
# the process because another one spawned it. Session ids are unique, so one map serves.
_PROCESS_CHILDREN: dict[str, subprocess.Popen] = {}


class _State:
    __slots__ = ("children", "finished", "indexed", "bases", "pidfds")

    def __init__(self) -> None:
        self.children: dict[str, subprocess.Popen] = _PROCESS_CHILDREN
        self.finished: dict[str, ProcessSession] = {}
        # Finished sessions the index vouched for at a listing of running ones only: not
        # built until asked for (then checked against their folder again, and moved to finished).
        self.indexed: set[str] = set()
        self.bases: dict[str, _Cached] = {}
        self.pidfds: dict[str, int] = {}  # running session -> pidfd of its leader


class ProcessRegistry:
    """Sessions of one home. Thread-safe; cheap to create (no I/O until used)."""

    def __init__(self, home: HomeLayout, settings: Settings) -> None:
        self.home = home
        self.settings = settings
        self._state = _State()
        self._lock = threading.RLock()
        self._scratch_ready = False
        self._root_ready = False
        self._own_home: bool | None = None  # known once a listing may write the finished index
        self._index = FinishedIndex(self.root)

    @property
    def root(self) -> Path:
        return self.home.processes_dir

    def session_dir(self, session_id: str) -> Path:
        return self.root / session_id

    # -- spawning ---------------------------------------------------------------------

    def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        owner: str = "cli",
        notify: bool = False,
        watch: Sequence[str] = (),
        background: bool = True,
        name: str | None = None,
        max_output_bytes: int | None = None,
        restart: RestartPolicy | None = None,
        restarted_from: str | None = None,
        base_env: Mapping[str, str] | None = None,
        session_id: str | None = None,
        labels: Mapping[str, Any] | None = None,
    ) -> ProcessSession:
        """Start ``command`` (a shell string, or an argv list run without a shell).

        The command runs in its own session with stdin from /dev/null and its output in
        ``output.log``; it never depends on this process staying alive. ``name`` must be
        free among running sessions; ``max_output_bytes`` (None: the config's) bounds
        the stored output; ``restart`` runs the command again by its policy;
        ``base_env`` replaces this process's environment (a restart's recorded one).

        ``session_id``: the id to use, chosen (and recorded elsewhere) beforehand, so
        that the session can be found by it after a crash of this process; a folder of
        that id existing already (a finished spawn, or :meth:`fence_session_id`) fails
        the spawn. ``labels`` are stored as they are in ``meta.json``.
        """
        from engine import identity
        from engine.processes.supervisor import command_argv, spawn_environment

        try:
            argv, display, recorded_argv = command_argv(command, self.settings.processes.shell)
        except ValueError as exc:
            raise SpawnFailed(str(exc)) from None
        workdir = self._workdir(cwd)
        watch = tuple(w for w in watch if w)
        if name is not None:
            from engine.processes.names import NameRefused, check_name

            try:
                check_name(name)
            except NameRefused as exc:
                raise SpawnFailed(str(exc)) from None
        bound = self.settings.processes.max_output_bytes if max_output_bytes is None else max(0, max_output_bytes)
        scratch = self._scratch_dir()
        session_id, d = self._new_session_dir(session_id)
        if name is not None:
            try:
                self._claim_name(name, session_id)
            except SpawnFailed:
                _remove_tree(d)
                raise
        meta = {
            "id": session_id,
            "command": display,
            "argv": recorded_argv,
            "cwd": workdir,
            "owner": owner,
            "notify": bool(notify),
            "watch": list(watch),
            "background": bool(background),
            "spawner_pid": os.getpid(),
        }
        if name is not None:
            meta["name"] = name
        if bound:
            meta["max_output_bytes"] = bound
        if restarted_from:
            meta["restarted_from"] = restarted_from
        if restart is not None and restart.active:
            meta.update(restart=restart.policy, max_restarts=restart.max_restarts)
        if labels:
            meta["labels"] = dict(labels)
        environ = spawn_environment(home_root=self.home.root, scratch_dir=scratch, session_id=session_id,
                                    base=base_env, extra=env)
        try:
            start.write_env_record(d, environ)  # what `proc restart` runs it again with
            # Until its record below is written the folder has no meta.json, which reads
            # as "never started": the wrapper waits at its gate, nothing of it has run.
            popen = start.start_gated(d, argv, workdir, environ,
                                      restart.wrapper_args(d) if restart is not None and restart.active else None)
        except OSError as exc:
            self._release_name(name, session_id)
            _remove_tree(d)
            raise SpawnFailed(f"cannot start {display!r}: {exc.strerror or exc}; it did not run") from None
        meta.update(pid=popen.pid, fingerprint=identity.fingerprint(popen.pid), started_at=time.time())
        try:
            key = start.write_meta_record(d, meta)
        except OSError as exc:
            start.abort_gated(popen)
            self._release_name(name, session_id)
            _remove_tree(d)
            raise SpawnFailed(f"cannot record the session of {display!r} "
                              f"({exc.strerror or exc}): the command did not run") from None
        start.open_gate(popen)
        if bound:
            from engine.processes.keeper import ensure_keeper

            ensure_keeper(self.root)  # after the record: a keeper ending now still sees it
        session = sess.session_from_meta(d, meta)
        with self._lock:
            self._state.children[session_id] = popen
            self._state.bases[session_id] = _Cached(key, session)  # its wait reads nothing back
        self._maybe_retention()
        return session

    @staticmethod
    def _workdir(cwd: str | Path | None) -> str:
        """The command's working directory, absolute and resolved."""
        if cwd is None:
            try:
                return os.getcwd()  # the kernel's own path of it: absolute, no symlinks
            except OSError as exc:
                raise SpawnFailed(f"the current directory is gone ({exc.strerror or exc})") from None
        workdir = Path(cwd).expanduser()
        if not workdir.is_dir():
            raise SpawnFailed(f"working directory {workdir} does not exist or is not a directory")
        return str(workdir.resolve())

    def _new_session_dir(self, wanted: str | None = None) -> tuple[str, Path]:
        """A new, empty session folder (of id ``wanted`` when given). The processes
        folder is made (with the home's policy) on the first spawn, and again only if it
        has gone since."""
        if not self._root_ready:
            self.home.ensure_dir(self.root)
            self._root_ready = True
        if wanted is not None and not is_session_id(wanted):
            raise SpawnFailed(f"{wanted!r} is not a process session id; it did not run")
        while True:
            session_id = wanted or new_session_id()
            d = self.session_dir(session_id)
            try:
                d.mkdir(mode=0o700)
                return session_id, d
            except FileExistsError:
                if wanted is not None:
                    raise SpawnFailed(f"process session {wanted} exists already (started before, or fenced "
                                      "by a launch recovery); it did not run") from None
                continue
            except FileNotFoundError:
                self.home.ensure_dir(self.root)
            except PermissionError:
                raise  # another user's home: the CLI's one line for that
            except OSError as exc:  # a read-only or full file system, ...: the command never ran
                raise SpawnFailed(f"cannot make the session's folder in {self.root}: "
                                  f"{exc.strerror or exc}; it did not run") from None

    def _claim_name(self, name: str, session_id: str) -> None:
        from engine.processes.names import NameRefused, claim

        def running(other: str) -> bool:
            try:
                return self._current(other).running
            except ProcessLookupFailed:
                return False

        try:
            claim(self.root, name, session_id, running)
        except NameRefused as exc:
            raise SpawnFailed(str(exc)) from None
        except OSError as exc:
            raise SpawnFailed(f"cannot record the name {name!r}: {exc.strerror or exc}") from None

    def _release_name(self, name: str | None, session_id: str) -> None:
        if name is not None:
            from engine.processes.names import release

            release(self.root, name, session_id)

    def fence_session_id(self, session_id: str) -> bool:
        """Take ``session_id`` so that no spawn can use it any more: True when no folder
        of it existed (so none of its commands ever ran, nor can now; the empty folder
        left is removed by retention like any abandoned start), False when one did."""
        if not is_session_id(session_id):
            raise ValueError(f"{session_id!r} is not a process session id")
        if not self._root_ready:
            self.home.ensure_dir(self.root)
            self._root_ready = True
        try:
            self.session_dir(session_id).mkdir(mode=0o700)
        except FileExistsError:
            return False
        return True

    def _scratch_dir(self) -> Path | None:
        if not self._scratch_ready:
            from engine.home import HomeError

            try:
                self.home.ensure_dir(self.home.scratch_dir)
            except (HomeError, OSError):
                return None  # the command still runs; its TMPDIR is just not redirected
            self._scratch_ready = True
        return self.home.scratch_dir

    def _maybe_retention(self) -> None:
        stamp = self.root / RETENTION_STAMP
        try:
            if time.time() - stamp.stat().st_mtime < RETENTION_EVERY_SECONDS:
                return
        except FileNotFoundError:
            pass
        except OSError:
            return
        try:
            stamp.touch()
            from engine.processes.retention import prune_finished

            prune_finished(self)
        except OSError:
            pass

    # -- looking up -------------------------------------------------------------------

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if n.startswith(ID_PREFIX)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ProcessLookupFailed(f"cannot read {self.root}: {exc.strerror or exc}") from None

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id for an exact id or a unique prefix (>= 4 hex after ``proc_``)."""
        text = (id_or_prefix or "").strip()
        problem = id_argument_problem(text)
        if problem:
            raise ProcessLookupFailed(problem)
        if (self.session_dir(text) / sess.META_FILE).exists():
            return text  # an exact id always wins over a name or a prefix
        from engine.processes.names import holder

        named = holder(self.root, text)
        if named is not None and (self.session_dir(named) / sess.META_FILE).exists():
            return named  # a name (its newest session) wins over a prefix
        hexpart = text[len(ID_PREFIX) :] if text.startswith(ID_PREFIX) else text
        names = self._names()
        matches = sorted(n for n in names if n.startswith(ID_PREFIX + hexpart))
        if len(hexpart) < MIN_PREFIX_HEX:
            listed = f" (matches: {', '.join(matches[:10])})" if matches else ""
            raise ProcessLookupFailed(
                f"process id {text!r} is too short: give at least {MIN_PREFIX_HEX} hex characters "
                f"after '{ID_PREFIX}'{listed}",
                tuple(matches),
            )
        if not matches:
            raise ProcessLookupFailed(f"no process session matches {text!r}")
        if len(matches) > 1:
            raise ProcessLookupFailed(
                f"process id {text!r} is ambiguous: {', '.join(matches[:10])}"
                + (f" and {len(matches) - 10} more" if len(matches) > 10 else ""),
                tuple(matches),
            )
        return matches[0]

    def get(self, id_or_prefix: str) -> ProcessSession:
        """Our session by id or prefix; else hermes-agent's (processes.json) by the same
        rules. A prefix matching sessions of both is ambiguous."""
        try:
            session_id = self.resolve_id(id_or_prefix)
        except ProcessLookupFailed as exc:
            if exc.candidates:
                raise
            found = self._hermes_match(id_or_prefix, ours_matched=False)
            if found is None:
                problem = self.hermes_sessions().problem
                if problem:
                    raise ProcessLookupFailed(f"{exc.message}; {problem} were not searched") from None
                raise
            return found
        if session_id != (id_or_prefix or "").strip():
            self._hermes_match(id_or_prefix, ours_matched=True)  # raises when a hermes one matches too
        return self._current(session_id)

    def _current(self, session_id: str) -> ProcessSession:
        """Our session of that exact id, as it is now."""
        self.reap()
        try:
            return self._load(session_id)
        except (SessionCorrupt, SessionNotStarted) as exc:
            raise ProcessLookupFailed(str(exc)) from None

    def hermes_sessions(self) -> HermesListing:
        """hermes-agent's sessions of this home (processes.json, read-only)."""
        from engine.processes.hermes_sessions import list_hermes_sessions

        return list_hermes_sessions(self.home.root)

    def change_key(self) -> tuple:
        """Changes whenever a listing of sessions that are all finished could: a session
        folder added or removed (the sessions folder's mtime), hermes-agent's
        processes.json rewritten. Two equal keys with nothing running in between: the
        listing is the same (a running session may end without changing it)."""
        def stamp(path: str):
            try:
                st = os.stat(path)
            except OSError:
                return None
            return st.st_mtime_ns, st.st_size, st.st_ino

        return stamp(os.fspath(self.root)), stamp(f"{self.home.root}/{HERMES_PROCESSES_FILE}")

    def list_with_hermes(self, include_finished: bool = True) -> Listing:
        """Our sessions and hermes-agent's, by start time, with what could not be read,
        from one scan of the folders."""
        own, bad = self._scan(include_finished)
        theirs: list[ProcessSession] = []
        hermes_problem = None
        if os.path.lexists(f"{self.home.root}/{HERMES_PROCESSES_FILE}"):  # else its reader is not even loaded
            hermes = self.hermes_sessions()
            theirs = [s for s in hermes.sessions if include_finished or s.running]
            hermes_problem = hermes.problem
        merged = sorted(own + theirs, key=lambda s: (s.started_at, s.id))
        return Listing(tuple(merged), tuple(bad[session_id] for session_id in sorted(bad)), hermes_problem)

    def _hermes_match(self, id_or_prefix: str, ours_matched: bool) -> ProcessSession | None:
        """The hermes-agent session named by an exact id or a unique prefix (the same
        minimum length as ours), or None. Raises when the prefix names more than one
        session, counting ours (``ours_matched``)."""
        text = (id_or_prefix or "").strip()
        sessions = self.hermes_sessions().sessions if text and id_argument_problem(text) is None else ()
        exact = [s for s in sessions if s.id == text]
        if exact:
            return exact[0]
        hexpart = text[len(ID_PREFIX):] if text.startswith(ID_PREFIX) else text
        if len(hexpart) < MIN_PREFIX_HEX:
            return None
        matches = [s for s in sessions if s.id.startswith(ID_PREFIX + hexpart)]
        if len(matches) + int(ours_matched) > 1:
            raise ProcessLookupFailed(f"process id {text!r} is ambiguous: "
                                      f"{', '.join(s.id for s in matches[:10])} (hermes-agent's)"
                                      + (" and one of ours" if ours_matched else ""))
        return matches[0] if matches else None

    def _load(self, session_id: str) -> ProcessSession:
        with self._lock:
            done = self._state.finished.get(session_id)
            if done is None and session_id in self._state.indexed:
                self._state.indexed.discard(session_id)
                done = self._index.session(session_id, recheck=True)  # None: changed since, read below
                if done is not None:
                    self._state.finished[session_id] = done
        if done is not None:
            return done
        d = self.session_dir(session_id)
        try:
            key = start.meta_key(os.stat(f"{d}/{sess.META_FILE}"))  # taken before the read: a change makes it stale
        except FileNotFoundError:
            raise SessionNotStarted(f"{session_id}: no metadata: its command was never started") from None
        with self._lock:
            cached = self._state.bases.get(session_id)
        if cached is None or cached.meta_key != key:
            cached = _Cached(key, sess.session_from_meta(d, sess.read_meta(d)))
            with self._lock:
                self._state.bases[session_id] = cached
        current = sess.derive(cached.base, self._leader_alive)
        if current.running:
            cached.running = current
        elif current.finished and sess.is_settled(current):
            with self._lock:
                self._state.finished[session_id] = current
                self._state.bases.pop(session_id, None)
                fd = self._state.pidfds.pop(session_id, None)
                if fd is not None:
                    os.close(fd)
        return current

    def _still_running(self, root: str, session_id: str, leaders_alive: frozenset[str]) -> ProcessSession | None:
        """The session as last derived while it ran, when nothing can have changed since:
        its verified leader still runs (``leaders_alive``: the pidfd poll of this listing)
        and its ``meta.json`` is the one read (one stat). None: derive it again. A running
        session's other records (exit, kill) only come with or after its leader's end."""
        if session_id not in leaders_alive:
            return None
        with self._lock:
            cached = self._state.bases.get(session_id)
        if cached is None or cached.running is None:
            return None
        try:
            key = start.meta_key(os.stat(f"{root}/{session_id}/{sess.META_FILE}"))
        except OSError:
            return None
        return cached.running if key == cached.meta_key else None

    def _leaders_alive(self) -> frozenset[str]:
        """The sessions whose verified leader still runs by its pidfd: one poll() for all
        of them (a pidfd polls readable once its process has exited)."""
        import select

        with self._lock:  # the fds are only used and closed under the lock (no fd-number reuse)
            if not self._state.pidfds:
                return frozenset()
            poller = select.poll()
            for fd in self._state.pidfds.values():
                poller.register(fd, select.POLLIN)
            ready = {fd for fd, _events in poller.poll(0)}
            return frozenset(session_id for session_id, fd in self._state.pidfds.items() if fd not in ready)

    def _leader_alive(self, s: ProcessSession) -> bool:
        """Is the session's verified leader still running?

        The first check reads /proc (fingerprint); it also opens a pidfd on the verified
        process, so later checks are one poll() on that fd: no /proc read per refresh,
        and a recycled pid can never be mistaken for ours.
        """
        from engine import identity

        with self._lock:  # the fd is only used and closed under the lock (no fd-number reuse)
            fd = self._state.pidfds.get(s.id)
            if fd is not None:
                exited = _pidfd_exited(fd)
                if exited is False:
                    return True
                del self._state.pidfds[s.id]
                os.close(fd)
                if exited:
                    return False
        if not (identity.HAVE_PIDFD and identity.is_verifiable(s.fingerprint)):
            return sess.leader_alive(s)
        try:
            fd = os.pidfd_open(s.pid)
        except ProcessLookupError:
            return False
        except OSError:
            return sess.leader_alive(s)
        if not identity.is_alive(s.pid, s.fingerprint):  # checked after opening: same process
            os.close(fd)
            return False
        with self._lock:
            if s.id in self._state.pidfds:
                os.close(fd)
            else:
                self._state.pidfds[s.id] = fd
        return True

    def list(self, include_finished: bool = True) -> list[ProcessSession]:
        """Sessions sorted by start time (oldest first). Unreadable folders are skipped
        here and named by :meth:`unreadable` (``ps`` warns about them)."""
        return self._scan(include_finished)[0]

    def unreadable(self) -> list[str]:
        """Ids of session folders that exist but whose metadata cannot be read."""
        return sorted(self._scan(include_finished=False)[1])

    def problems(self) -> list[SessionCorrupt]:
        """One :class:`SessionCorrupt` (a one-line message) per unreadable session."""
        bad = self._scan(include_finished=False)[1]
        return [bad[session_id] for session_id in sorted(bad)]

    def _scan(self, include_finished: bool) -> tuple[list[ProcessSession], dict[str, SessionCorrupt]]:
        self.reap()
        found: list[ProcessSession] = []
        bad: dict[str, SessionCorrupt] = {}
        names = self._names()
        with self._lock:
            known = set(self._state.finished) | self._state.indexed
        index = self._index
        unknown = [n for n in names if n not in known]
        # A listing of running sessions only asks the index which sessions it still holds
        # (finished ones): it never builds them just to drop them.
        indexed = index.load(unknown) if include_finished and names else {}
        held = set(indexed) if include_finished else set(index.holding(unknown) if names else ())
        with self._lock:
            present = set(names)
            gone = set(self._state.finished) - present
            for session_id in gone:
                self._state.finished.pop(session_id, None)
            self._state.indexed &= present
            for session_id, s in indexed.items():
                self._state.finished.setdefault(session_id, s)
            self._state.indexed.update(held.difference(self._state.finished))
            unbuilt = set() if include_finished else set(self._state.indexed)
        fresh: dict[str, tuple[StatKey, ProcessSession]] = {}
        leaders_alive = self._leaders_alive()
        root = os.fspath(self.root)
        for session_id in names:
            if session_id in unbuilt:
                continue  # finished, and not asked for
            still = self._still_running(root, session_id, leaders_alive)
            if still is not None:  # the common case of a refresh: nothing of it to read again
                found.append(still)
                continue
            # The key is taken before the files are read (see FinishedIndex); only for sessions not known yet.
            key = None if session_id in held or session_id in known else stat_key(self.session_dir(session_id))
            try:
                s = self._load(session_id)
            except SessionNotStarted:
                continue  # no command of it ever ran: nothing to list or to spare
            except (SessionCorrupt, OSError) as exc:
                if self.session_dir(session_id).is_dir():  # not just removed by retention meanwhile
                    bad[session_id] = exc if isinstance(exc, SessionCorrupt) else SessionCorrupt(
                        f"{session_id}: unreadable metadata ({exc.strerror or exc})")
                continue
            if key is not None and indexable(s) and stat_key(self.session_dir(session_id)) == key:
                fresh[session_id] = (key, s)
            if include_finished or s.running:
                found.append(s)
        if index.outdated(fresh, names) and self._may_write_index():
            index.save(fresh, names)
        found.sort(key=lambda s: (s.started_at, s.id))
        return found, bad

    def _may_write_index(self) -> bool:
        """The index is ours to write only in hermes-tui's own home: in a guest home a
        listing writes nothing (it is read like any other time, folder by folder)."""
        if self._own_home is None:
            from engine.hermes.guest import home_owner

            self._own_home = not home_owner(self.home.root, self.settings).is_guest
        return self._own_home

    def live_processes(self) -> list[tuple[int, str, str]]:
        """(pid, fingerprint, session id) of running sessions whose leader is verified.

        A session whose metadata is malformed may still have a live process, so a
        caller that spares registered processes (the scratch pruner) must not treat it
        as a stranger: every live process working under the cwd its metadata still
        names is returned as registered too. When not even the cwd can be read, raises
        :class:`SessionCorrupt`: its process could be anywhere, so the caller fails
        closed everywhere. A folder whose command never started counts for nothing."""
        from engine import identity

        sessions, bad = self._scan(include_finished=False)
        anywhere = sorted(session_id for session_id, exc in bad.items() if not exc.cwd)
        if anywhere:
            raise SessionCorrupt(f"unreadable process session(s) whose cwd is unknown: {', '.join(anywhere[:5])}")
        live = [(s.pid, s.fingerprint, s.id) for s in sessions if identity.is_alive(s.pid, s.fingerprint)]
        for session_id in sorted(bad):
            label = f"{session_id} (unreadable metadata, working under {bad[session_id].cwd})"
            live.extend((pid, fp, label) for pid, fp in _processes_under(bad[session_id].cwd))
        return live

    # -- waiting ------------------------------------------------------------------------

    def reap(self) -> None:
        """Collect exited children this process spawned (through any registry), so none
        lingers as a zombie."""
        with self._lock:
            children = list(self._state.children.items())
        for session_id, popen in children:
            if popen.poll() is not None:
                with self._lock:
                    self._state.children.pop(session_id, None)

    def popen_of(self, session_id: str) -> subprocess.Popen | None:
        with self._lock:
            return self._state.children.get(session_id)

    def wait(self, id_or_prefix: str, timeout: float | None = None) -> ProcessSession:
        """The session once it has ended, or as it is when ``timeout`` runs out."""
        session_id = self.resolve_id(id_or_prefix)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        popen = self.popen_of(session_id)
        if popen is not None:
            import subprocess

            try:
                popen.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return self._current(session_id)
        delay = 0.01
        while True:
            current = self._current(session_id)
            if current.finished:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                return current
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(delay * 1.5, 0.25)

    # -- changing ---------------------------------------------------------------------

    def move_to_background(self, id_or_prefix: str) -> ProcessSession:
        """Yield: the session becomes a background session with notify-on-complete.

        Only metadata changes; the process is never signalled and its output file is
        untouched, so a follower continues from the very same byte offset.
        """
        from engine.fsutil import atomic_write_json, read_json

        session_id = self.resolve_id(id_or_prefix)
        d = self.session_dir(session_id)
        with self._lock:
            meta = read_json(d / sess.META_FILE)
            meta["background"] = True
            meta["notify"] = True
            meta["yielded_at"] = time.time()
            atomic_write_json(d / sess.META_FILE, meta)
            self._state.bases.pop(session_id, None)
            done = self._state.finished.pop(session_id, None)
        if done is not None:
            return replace(done, background=True, notify=True)
        return self.get(session_id)

    def kill(self, id_or_prefix: str, grace: float | None = None) -> KillReport:
        """Verified terminate of the session's process group (TERM, grace, KILL); see
        :func:`engine.processes.kill.kill_session`."""
        from engine.processes.kill import kill_session

        return kill_session(self, self.get(id_or_prefix), grace)

    def kill_grace(self, grace: float | None) -> float:
        """The grace between TERM and KILL: ``grace`` when given, else the configured one."""
        return self.settings.processes.kill_grace_seconds if grace is None else max(0.0, float(grace))

    def forget_finished(self, session_id: str) -> None:
        """Drop the cached end of a session (a kill just wrote its record: read it again)."""
        with self._lock:
            self._state.finished.pop(session_id, None)

    def restart(self, id_or_prefix: str, grace: float | None = None) -> Restarted:
        """The session's command again, as a new session linked to it (``restarted_from``):
        the same command, cwd, environment, name, bound and policy. A running session is
        stopped first (the verified TERM, grace, KILL); if that fails nothing is started."""
        from engine.processes.restart import RestartPolicy

        s = self.get(id_or_prefix)
        if s.source is SessionSource.HERMES:
            raise SpawnFailed(f"{s.id} is hermes-agent's: hermes restarts its own processes")
        if s.owner.startswith("kanban:"):
            raise SpawnFailed(f"{s.id} is the worker of card {s.owner.split(':', 1)[1]}: the board's retry rules "
                              "start its workers (reclaim the card instead)")
        with _restart_lock(s.dir):
            s = self.get(s.id)  # as it is now, under the lock: another restart may have just run
            successor = self._successor(s.id)
            if successor is not None:
                state = "running" if successor.running else successor.exit_text()
                raise SpawnFailed(f"{s.id} was already restarted as {successor.id} ({state}): "
                                  f"restart {successor.id} instead; nothing was started")
            environ = start.read_env_record(s.dir)
            stopped = None
            if s.running:
                stopped = self.kill(s.id, grace)
                if not stopped.ok:
                    raise SpawnFailed(f"{s.id} was not stopped ({stopped.detail or stopped.outcome}): "
                                      "nothing was restarted")
            policy = RestartPolicy(s.restart, s.max_restarts) if s.restart != "no" else None
            new = self.spawn(list(s.argv) if s.argv else s.command, cwd=s.cwd, owner=s.owner, notify=s.notify,
                             watch=s.watch, background=True, name=s.name, max_output_bytes=s.max_output_bytes,
                             restart=policy, restarted_from=s.id, base_env=environ)
        return Restarted(old=s, new=new, stopped=stopped, env_recorded=environ is not None)

    def _successor(self, session_id: str) -> ProcessSession | None:
        """The session a restart of ``session_id`` started, unless that one never ran (its
        wrapper ended at its gate: the restart was cut short before its command started)."""
        for other in self.list():
            if other.restarted_from == session_id and not (other.dir / sess.NOT_STARTED_FILE).exists():
                return other
        return None

    def remove_abandoned_starts(self, now: float | None = None) -> list[str]:
        """Remove folders whose command never started and whose spawn is over: no
        metadata, or a ``starting`` record, untouched for ``ABANDONED_START_SECONDS``.
        Nothing of them ever ran (the wrapper waits for the record), so nothing is lost."""
        now = time.time() if now is None else now
        removed = []
        for session_id in self._names():
            d = self.session_dir(session_id)
            try:
                sess.read_meta(d)
                continue
            except sess.SessionNotStarted:
                pass
            except SessionCorrupt:
                continue  # reported by ps; never removed on a guess
            try:
                age = now - max(d.stat().st_mtime, _mtime(d / sess.META_FILE))
            except OSError:
                continue
            if age >= ABANDONED_START_SECONDS:
                _remove_tree(d)
                removed.append(session_id)
        return removed

    def remove(self, session_id: str) -> bool:
        """Delete a finished session's folder (retention). Running sessions are refused."""
        s = self.get(session_id)
        if s.running or s.id != session_id:
            return False
        _remove_tree(s.dir)
        with self._lock:
            self._state.finished.pop(session_id, None)
            self._state.bases.pop(session_id, None)
        return True


def _pidfd_exited(fd: int) -> bool | None:
    """A pidfd polls readable once its process has exited (zombie or reaped).
    None when the fd itself is unusable (then /proc decides)."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    events = poller.poll(0)
    if not events:
        return False
    revents = events[0][1]
    if revents & (select.POLLNVAL | select.POLLERR):
        return None
    return bool(revents & select.POLLIN)


def _processes_under(cwd: str) -> list[tuple[int, str]]:
    """(pid, fingerprint) of every live process whose working directory is ``cwd`` or
    below it (a /proc scan: only done for a session with malformed metadata)."""
    from engine import identity

    root = os.path.realpath(cwd).rstrip(os.sep) or os.sep
    found = []
    try:
        names = os.listdir(identity.PROC)
    except OSError:
        raise SessionCorrupt(f"cannot list {identity.PROC} to find the processes under {cwd}") from None
    for name in names:
        if not name.isdigit():
            continue
        try:
            where = os.readlink(identity.PROC / name / "cwd")
        except OSError:
            continue  # gone, or another user's (the pruner never signals those)
        if where == root or where.startswith(root.rstrip(os.sep) + os.sep):
            fp = identity.fingerprint(int(name))
            if identity.is_verifiable(fp):
                found.append((int(name), fp))
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
