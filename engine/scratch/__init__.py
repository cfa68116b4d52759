"""Scratch entries and the prune.

``<home>/cache/scratch`` holds one entry per task/lane/run. An entry nobody has
written to for ``scratch.idle_hours`` is pruned: its stray processes are signalled,
it is moved to quarantine (or deleted), and every step is written to the audit log.
Each rule here exists because losing work happened before; see docs/scratch.md.

Modules: activity (the tri-state subtree scan), keep (marker and lock rules),
procscan + ownership (/proc and who owns a process), entries (the survey behind the
listing and the plan), plan, execute, delete (the in-process deleter), quarantine,
audit, worktrees, schedule and auto_pass (the detached hourly pass).
"""

__all__ = ["maybe_start_auto_prune"]


def __getattr__(name: str):
    """``maybe_start_auto_prune`` is imported on first use: a command that only lists
    (``scratch``) does not pay for the scheduler's imports (subprocess and the rest)."""
    if name == "maybe_start_auto_prune":
        from engine.scratch.schedule import maybe_start_auto_prune

        return maybe_start_auto_prune
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
