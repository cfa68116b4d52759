"""Linked git worktrees inside an entry: find their repos, then ``git worktree prune``.

Deleting an entry that holds a linked worktree leaves a dangling registration in the
repo it belongs to. Before deleting, the entry's ``.git`` *files* (to depth 4; the
prune's activity re-check notes them as it walks) are read: ``gitdir: <path>`` (relative paths resolve against the file's folder) names
``<common git dir>/worktrees/<n>``; the common git dir (``<gitdir>/../..``) is what
``git worktree prune`` runs on after the loop, which covers bare repos and separate
git dirs alike.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable


def repos_of_git_files(git_files: Iterable[str]) -> set[str]:
    """The repos of the linked worktrees whose ``.git`` files are given."""
    return {repo for repo in map(_repo_of, git_files) if repo}


def _repo_of(git_file: str) -> str | None:
    try:
        with open(git_file, "rb") as fh:
            text = fh.read(4096).decode("utf-8", errors="surrogateescape").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = text[len("gitdir:"):].strip()
    if not gitdir:
        return None
    if not os.path.isabs(gitdir):
        gitdir = os.path.join(os.path.dirname(git_file), gitdir)
    gitdir = os.path.abspath(gitdir)
    if os.path.basename(os.path.dirname(gitdir)) != "worktrees":
        return None
    return os.path.abspath(os.path.join(gitdir, "..", ".."))


def prune_worktrees(repos: Iterable[str], on_error=None) -> None:
    """``git -C <repo> worktree prune`` for each repo that still exists."""
    for repo in sorted(set(repos)):
        if not os.path.isdir(repo):
            continue
        try:
            proc = subprocess.run(
                ["git", "-C", repo, "worktree", "prune"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=15, check=False,
            )
            if proc.returncode != 0 and on_error is not None:
                on_error(repo, proc.stderr.decode("utf-8", "backslashreplace").strip() or f"exit {proc.returncode}")
        except (OSError, subprocess.SubprocessError) as exc:
            if on_error is not None:
                on_error(repo, str(exc))
