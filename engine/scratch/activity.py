"""Is a scratch entry still being worked in? The tri-state subtree scan.

A directory's own mtime only moves when a direct child is added or removed, so a
writer deep inside a tree is invisible at the top: the scan walks the whole subtree
(depth-first, ``lstat`` on every inode, directories' own mtimes included) and stops
at the first mtime inside the idle window. Only a walk that sees everything and finds
nothing recent may call an entry idle; any error is ``scan-failed``, which every
caller treats as "keep" (losing work because a directory was unreadable is the
failure this module exists to prevent).

Two kinds of inode do not count as activity:
- symlinks (their own mtime says when the link was made, not that anyone works here;
  they are never followed, so a link into a busy repo cannot keep an entry alive);
- regular files with more than one hard link: ``git clone --local`` hardlinks pack
  files, and git freshens a pack's mtime in the *source* repo, which would keep the
  clone "active" forever through the shared inode.

An entry's **arrival** counts as activity too: a tree moved (``mv``), copied
(``cp -a``, ``rsync -a``), extracted (``tar -x``) or cloned into scratch keeps the
mtimes of its origin, so by its mtimes alone it would be idle the moment it lands.
Renaming or creating the entry's top inode sets that inode's change time (ctime),
so the top's ctime within ``arrival_cutoff`` keeps the entry (``Activity.arrived_at``).
Only the top's ctime counts (a move changes no other inode's), and not that of a
hardlinked regular file: its ctime moves whenever any of its names is linked,
unlinked or freshened elsewhere. A chmod or chown of the top also sets it: that
keeps the entry a while longer, which errs toward keeping.

The walk is fd-relative (``listdir`` on a directory fd, ``lstat`` by name with
``dir_fd``, each directory opened relative to its parent's fd): no path string is
built per inode and no ``DirEntry`` object is made, which is what a walk over ~200k
inodes spends most of its time on, and a tree deeper than PATH_MAX is walked too.

A **mount** inside the entry (a bind mount of a directory elsewhere, which has the
same ``st_dev`` as the entry) is never entered: every directory the walk opens is
compared by mount id with the entry's top, and the entry's top with the folder it is
listed in (mounts.py). The first mount met ends the walk: ``Activity.mount`` says
where, and the entry is kept (the state is ``scan-failed``, so a caller that does not
look at ``mount`` keeps it as well).
"""

from __future__ import annotations

import enum
import os
import signal
import stat as st
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from engine.scratch.mounts import mount_key, mount_reason, shown_inside, top_key

_OPEN_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
GIT_FILE_DEPTH = 4  # levels below the entry where a linked worktree's ".git" file is looked for


STOPPED = "the walk was stopped before it ended"  # the error of a walk ended by its caller


class TouchState(enum.StrEnum):
    TOUCHED = "touched"  # an mtime inside the window was found
    SCAN_FAILED = "scan-failed"  # some part could not be read: keep (fail closed)
    IDLE = "idle"  # the whole subtree was seen and nothing is recent


@dataclass(frozen=True)
class Activity:
    """The result of one scan.

    ``newest_mtime``: for an idle entry the newest counted mtime of the whole subtree
    (None when nothing counted, e.g. a lone hardlinked file); for a touched entry the
    recent mtime that stopped the walk (not necessarily the newest). ``size_bytes``
    is the sum of lstat sizes of everything but directories (what ``tree_size``
    reports too), known only after a complete walk. ``git_files``: paths of the
    regular files named ``.git`` found within GIT_FILE_DEPTH levels (linked git
    worktrees, see worktrees.py), noted by the same walk so the prune needs no
    second one; complete only for an idle entry.
    """

    state: TouchState
    newest_mtime: float | None = None
    size_bytes: int | None = None
    error: str = ""
    git_files: tuple[str, ...] = ()
    # The top's ctime when it alone made the entry touched (it arrived within the
    # arrival window and nothing was written within the idle window).
    arrived_at: float | None = None
    top_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the top, as walked
    # A mount met inside (the mount point relative to the entry; "" for the top
    # itself): never entered, the walk ended there, and the entry stays.
    mount: str | None = None

    @property
    def touched(self) -> bool:
        return self.state is TouchState.TOUCHED

    @property
    def idle(self) -> bool:
        return self.state is TouchState.IDLE

    @property
    def failed(self) -> bool:
        return self.state is TouchState.SCAN_FAILED


_COARSE_CLOCK = 5  # Linux's CLOCK_REALTIME_COARSE (the time module does not name it)


def _fs_clock_lag() -> float:
    """How far behind ``time.time()`` a file's new mtime can be: the kernel stamps
    mtimes from its coarse clock, which advances once per tick (measured: a write
    made right after ``time.time()`` carried an mtime 2 ms before it)."""
    import time

    try:
        tick = time.clock_getres(_COARSE_CLOCK)
    except (AttributeError, OSError):
        tick = 0.01
    return 2 * max(tick, 0.001)


FS_CLOCK_LAG = _fs_clock_lag()


def walk_start_moment() -> float:
    """The moment T a re-check walk starts, as the filesystem will date writes: any
    write made after this call carries an mtime at or after it. Taken early by the
    clock's lag: a few milliseconds more count as "written since", never fewer."""
    return time.time() - FS_CLOCK_LAG


_STOPPED = Activity(TouchState.SCAN_FAILED, error=STOPPED)


def _describe(exc: OSError, where: str) -> str:
    """The failing path as a quoted repr (it is outside text: a name may hold a
    newline or ESC) and the error."""
    return f"{where!r}: {exc.strerror or exc}"


def _mounted(sub_path: str) -> Activity:
    """The verdict of a walk that met a mount at ``sub_path`` (relative to the entry)."""
    return Activity(TouchState.SCAN_FAILED, error=mount_reason(sub_path), mount=sub_path)


def scan_activity(path: str | os.PathLike[str], cutoff: float, *, count_top: bool = True,
                  full: bool = False, stop: threading.Event | None = None,
                  arrival_cutoff: float | None = None) -> Activity:
    """Scan ``path`` (a top-level scratch entry); an mtime ``>= cutoff`` is recent,
    and so is the top's ctime ``>= arrival_cutoff`` (its arrival; None: not counted).

    ``count_top=False`` ignores the entry's own mtime (not its children's): the
    quarantine expiry uses it, because moving a directory to a new parent rewrites
    its ``..`` entry, which some filesystems count as a modification.

    ``full=True`` does not stop at the first recent mtime: a touched entry is walked
    to the end too, so its size and newest mtime are known from the same walk (a
    listing that shows every size pays one walk per entry, not two).

    ``stop`` set (the caller is going away) ends the walk at the next directory as
    ``scan-failed``, which every caller treats as "keep"."""
    path = os.fspath(path)
    try:
        top = os.lstat(path)
    except OSError as exc:
        return Activity(TouchState.SCAN_FAILED, error=_describe(exc, path))
    mode = top.st_mode
    top_id = (top.st_dev, top.st_ino)
    # The entry itself: a hardlinked regular file does not count (see the module doc).
    counted = count_top and not (st.S_ISREG(mode) and top.st_nlink > 1)
    newest = top.st_mtime if counted else None
    touched = newest is not None and newest >= cutoff
    arrived = (top.st_ctime if counted and not touched and arrival_cutoff is not None
               and top.st_ctime >= arrival_cutoff else None)
    if (touched or arrived is not None) and not full:
        return Activity(TouchState.TOUCHED, newest, arrived_at=arrived, top_id=top_id)
    if not st.S_ISDIR(mode):
        state = TouchState.TOUCHED if touched or arrived is not None else TouchState.IDLE
        return Activity(state, newest, top.st_size, arrived_at=arrived, top_id=top_id)
    stop_at = float("inf") if full else cutoff
    act = _walk(path, stop_at, newest if newest is not None else float("-inf"), 0, stop)
    if act.failed:
        return act
    written = touched or (act.newest_mtime is not None and act.newest_mtime >= cutoff)
    if act.touched or (full and written):
        return Activity(TouchState.TOUCHED, act.newest_mtime, act.size_bytes, git_files=act.git_files,
                        top_id=top_id)
    if arrived is not None:
        return Activity(TouchState.TOUCHED, act.newest_mtime, act.size_bytes, git_files=act.git_files,
                        arrived_at=arrived, top_id=top_id)
    return Activity(act.state, act.newest_mtime, act.size_bytes, git_files=act.git_files, top_id=top_id)


def _walk(root_path: str, cutoff: float, newest: float, size: int, stop: threading.Event | None = None
          ) -> Activity:
    """Depth-first over directory fds: each directory is opened relative to its
    parent's fd, listed once, and its children are lstat-ed by name. No path string
    is ever handed to the kernel below the top, so a tree deeper than PATH_MAX is
    walked like any other; open fds are bounded by the depth (the current branch),
    not the width. Paths are built per directory only for error messages."""
    lstat = os.lstat
    listdir = os.listdir
    open_ = os.open
    # File-type tests as integer compares: no function call per inode.
    ifmt, ifdir, iflnk, ifreg = 0o170000, st.S_IFDIR, st.S_IFLNK, st.S_IFREG  # 0o170000: the S_IFMT mask
    branch: list[tuple[int, list[str], str]] = []  # (dir fd, subdirs still to visit, shown path)
    git_files: list[str] = []
    where = root_path
    try:
        fd = open_(root_path, _OPEN_DIR_FLAGS)
    except OSError as exc:
        return Activity(TouchState.SCAN_FAILED, error=_describe(exc, root_path))
    try:
        # The top on another mount than the folder it is in: it is a mount point itself.
        root_mount, is_mount = top_key(fd, root_path)
        if is_mount:
            os.close(fd)
            return _mounted("")
    except OSError as exc:
        os.close(fd)
        return Activity(TouchState.SCAN_FAILED, error=_describe(exc, root_path))
    try:
        while True:
            subdirs: list[str] = []
            branch.append((fd, subdirs, where))
            for name in listdir(fd):
                s = lstat(name, dir_fd=fd)
                fmt = s.st_mode & ifmt
                if fmt == ifdir:
                    subdirs.append(name)
                else:
                    size += s.st_size
                    if name == ".git" and fmt == ifreg and len(branch) <= GIT_FILE_DEPTH + 1:
                        git_files.append(where + "/.git")
                    if fmt == iflnk or (fmt == ifreg and s.st_nlink > 1):
                        continue
                mtime = s.st_mtime
                if mtime >= cutoff:
                    return Activity(TouchState.TOUCHED, mtime)
                if mtime > newest:
                    newest = mtime
            while branch and not branch[-1][1]:
                os.close(branch.pop()[0])
            if not branch:
                break
            if stop is not None and stop.is_set():
                return _STOPPED
            parent_fd, pending, parent_where = branch[-1]
            name = pending.pop()
            where = parent_where + "/" + name
            fd = open_(name, _OPEN_DIR_FLAGS, dir_fd=parent_fd)
            try:
                crossed = mount_key(fd) != root_mount  # a bind mount has the same st_dev: the mount id tells
            except OSError:
                os.close(fd)
                raise
            if crossed:  # never entered
                os.close(fd)
                return _mounted(shown_inside(root_path, where))
    except OSError as exc:
        return Activity(TouchState.SCAN_FAILED, error=_describe(exc, where))
    finally:
        for frame in branch:
            os.close(frame[0])
    return Activity(TouchState.IDLE, None if newest == float("-inf") else newest, size,
                    git_files=tuple(git_files))


# --------------------------------------------------------------------------------------
# Many entries at once: split across processes
# --------------------------------------------------------------------------------------

# Below this many entries a fork costs more than it saves.
PARALLEL_MIN_ENTRIES = 8
# Without an explicit worker count the walks start in this process, and only what is
# left after this long is split across forked children: a listing of small entries
# (done in a few milliseconds) never pays for a fork, a big one pays it once.
SOLO_SECONDS = 0.05
# Entries per block of a split scan (one pickled list per block through a child's pipe).
BLOCK = 64


def _scan_chunk(paths: list[str], cutoff: float, count_top: bool = True, full: bool = False) -> list[Activity]:
    return [scan_activity(p, cutoff, count_top=count_top, full=full) for p in paths]


def _cpus() -> int:
    """CPUs this process may run on (0 where it cannot fork)."""
    if not hasattr(os, "fork"):
        return 0
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _worker_count(requested: int | None, n_paths: int) -> int:
    if requested is not None:
        return max(1, min(requested, n_paths))
    if n_paths < PARALLEL_MIN_ENTRIES:
        return 1
    return max(1, min(_cpus(), 4, n_paths))


def scan_many(paths: list[str], cutoff: float, workers: int | None = None, *, count_top: bool = True,
              full: bool = False, arrival_cutoff: float | None = None) -> list[Activity]:
    """``scan_activity`` for every path, in order (``count_top``, ``full`` and
    ``arrival_cutoff`` as there): :func:`iter_scan`'s results as one list."""
    return list(iter_scan(paths, cutoff, workers, count_top=count_top, full=full, arrival_cutoff=arrival_cutoff))


def iter_scan(paths: list[str], cutoff: float, workers: int | None = None, *, count_top: bool = True,
              full: bool = False, stop: threading.Event | None = None,
              arrival_cutoff: float | None = None) -> Iterator[Activity]:
    """``scan_activity`` for every path, yielded in order as each is known, so a caller
    can use (and let go of) each result before the last walk has ended.

    The walk is bound by per-inode Python work under the GIL, so threads do not help;
    the entries are dealt round-robin to ``workers - 1`` forked children plus this
    process. Without ``workers`` the first SOLO_SECONDS are walked here alone and
    only the entries left after that are split (at least PARALLEL_MIN_ENTRIES of
    them, and never more children than CPUs). A child only walks and writes each
    pickled result to its pipe as it has it, then ``_exit``s (no atexit handlers, no
    logging, nothing inherited is touched); this process reads the children's pipes in
    the entries' order. If a fork or a child fails, its share is scanned here: a
    failure costs time, never a wrong answer. ``stop`` set, or the iterator closed
    early, ends the walks: the children are killed and reaped, and every walk not
    finished yet is ``scan-failed`` (kept)."""
    paths = [os.fspath(p) for p in paths]
    start = 0
    if workers is None:
        deadline = time.monotonic() + SOLO_SECONDS
        while start < len(paths) and (len(paths) - start < 2 or time.monotonic() < deadline):
            stopped = stop is not None and stop.is_set()
            yield _STOPPED if stopped else scan_activity(paths[start], cutoff, count_top=count_top, full=full,
                                                         stop=stop, arrival_cutoff=arrival_cutoff)
            start += 1
    yield from _scan_split(paths[start:], cutoff, workers, count_top, full, stop, arrival_cutoff)


def _scan_split(paths: list[str], cutoff: float, workers: int | None, count_top: bool, full: bool,
                stop: threading.Event | None, arrival: float | None = None) -> Iterator[Activity]:
    """The entries dealt round-robin to forked children plus this process, in order."""
    if not paths:
        return
    n = _worker_count(workers, len(paths))

    def here(i: int) -> Activity:
        if stop is not None and stop.is_set():
            return _STOPPED
        return scan_activity(paths[i], cutoff, count_top=count_top, full=full, stop=stop, arrival_cutoff=arrival)

    if n <= 1:
        yield from (here(i) for i in range(len(paths)))
        return
    import pickle  # here: a listing that forks nothing does not pay for it

    # Dealt in blocks of BLOCK entries, block b to share b % n (0: this process): a child
    # pickles one block's results at a time, and this process reads them block by block.
    blocks = [range(b, min(b + BLOCK, len(paths))) for b in range(0, len(paths), BLOCK)]
    readers: dict[int, object] = {}  # share number -> its child's pipe (absent: walked here)
    pids: list[int] = []
    try:
        for k in range(1, n):
            try:
                r, w = os.pipe()
            except OSError:
                continue
            try:
                pid = os.fork()
            except OSError:
                os.close(r)
                os.close(w)
                continue
            if pid == 0:  # the child
                code = 0
                try:
                    os.close(r)
                    with os.fdopen(w, "wb") as out:
                        for block in blocks[k::n]:
                            pickle.dump([here(i) for i in block], out)
                            out.flush()
                except BaseException:
                    code = 1
                os._exit(code)
            os.close(w)
            pids.append(pid)
            readers[k] = os.fdopen(r, "rb")
        for b, block in enumerate(blocks):
            got = None
            inp = readers.get(b % n)
            if stop is not None and stop.is_set():
                inp = None  # the caller is going away: no child is waited for
            if inp is not None:
                try:
                    got = pickle.load(inp)
                except Exception:  # the child died or wrote garbage: the rest of its share is walked here
                    got = None
                if not (isinstance(got, list) and len(got) == len(block)):
                    inp.close()
                    del readers[b % n]
                    got = None
            yield from (got if got is not None else (here(i) for i in block))
    finally:
        for inp in readers.values():
            inp.close()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)  # ours and not yet reaped: the pid cannot be another's
            except OSError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


# --------------------------------------------------------------------------------------
# One entry at a time, the next ones walked ahead
# --------------------------------------------------------------------------------------


def scan_ahead(paths: list[str], cutoff: float, *, count_top: bool = True) -> Iterator[Activity]:
    """``scan_activity`` of each path, in order, for a caller that acts on each
    result before it asks for the next (the prune's verify walk of a moved tree, then
    that tree's delete).

    The first SOLO_SECONDS the walks are made here, one when it is asked for. After
    that, on more than one CPU, the ones left (at least two) are walked ahead by one
    forked child, in order, while this process walks the first of them and then works
    on the results: the walks overlap the caller's work instead of adding to it. Each
    result is still a walk of the whole tree made before the caller receives it. The
    child only walks and writes each pickled result to a pipe, then ``_exit``s; if it
    fails, this process walks the rest itself (a failure costs time, never a wrong
    answer). Closing the iterator early stops the child (``contextlib.closing``)."""
    paths = [os.fspath(p) for p in paths]
    deadline = time.monotonic() + SOLO_SECONDS
    for i, path in enumerate(paths):
        if len(paths) - i >= 2 and time.monotonic() >= deadline and _cpus() > 1:
            yield from _walked_ahead(paths[i:], cutoff, count_top)
            return
        yield scan_activity(path, cutoff, count_top=count_top)


def _walked_ahead(paths: list[str], cutoff: float, count_top: bool) -> Iterator[Activity]:
    """``paths[1:]`` walked by a forked child while this process walks ``paths[0]``."""
    import pickle

    try:
        r, w = os.pipe()
    except OSError:
        r = -1
    pid = 0
    if r >= 0:
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            r = -1
    if pid == 0 and r >= 0:  # the child
        code = 0
        try:
            os.close(r)
            with os.fdopen(w, "wb") as out:
                for path in paths[1:]:
                    pickle.dump(scan_activity(path, cutoff, count_top=count_top), out)
                    out.flush()
        except BaseException:
            code = 1
        os._exit(code)
    if r < 0:  # no pipe or no fork: every walk here
        yield from (scan_activity(p, cutoff, count_top=count_top) for p in paths)
        return
    os.close(w)
    inp = os.fdopen(r, "rb")
    try:
        yield scan_activity(paths[0], cutoff, count_top=count_top)
        for path in paths[1:]:
            act = None
            if not inp.closed:
                try:
                    act = pickle.load(inp)
                except Exception:  # the child died or wrote garbage: the rest is walked here
                    inp.close()
            yield act if isinstance(act, Activity) else scan_activity(path, cutoff, count_top=count_top)
    finally:
        inp.close()
        try:
            os.kill(pid, signal.SIGKILL)  # ours and not yet reaped: the pid cannot be another's
        except OSError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
