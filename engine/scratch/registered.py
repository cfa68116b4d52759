"""The processes this product registered (process sessions and kanban workers).

A registered live process, or a descendant of one, keeps every scratch entry it
works in and is never signalled by the prune. The list comes from the process
registry; the prune reaches it through a *provider* (a callable returning
``(pid, fingerprint, label)`` tuples) so the registry is one seam, and tests can
register real processes of their own through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from engine.config import Settings
from engine.home import HomeLayout

RegisteredProvider = Callable[[], Iterable[tuple[int, str, str]]]


class RegistryUnreadable(Exception):
    """The registry exists but could not be read: treat every process as registered."""


def registry_provider(home: HomeLayout, settings: Settings) -> RegisteredProvider:
    """The default provider: ``ProcessRegistry(home, settings).live_processes()``."""

    def provide() -> list[tuple[int, str, str]]:
        try:
            from engine.processes import ProcessRegistry
        except ImportError:
            return []  # this build has no process registry: nothing is registered
        try:
            return [(int(pid), str(fp), str(label))
                    for pid, fp, label in ProcessRegistry(home, settings).live_processes()]
        except Exception as exc:  # any failure: fail closed
            raise RegistryUnreadable(f"cannot read the process registry: {exc}") from exc

    return provide

