"""The processes registered in this home: our own process sessions and kanban
workers, and the background processes hermes-agent lists in ``processes.json``.

A registered live process, or a descendant of one, keeps every scratch entry it
works in and is never signalled by the prune. The list comes from the process
registries; the prune reaches them through a *provider* (a callable returning
``(pid, fingerprint, label)`` tuples, the label saying whose it is: "hermes-tui
session proc_…", "hermes-agent session …") so the registries are one seam, and tests can
register real processes of their own through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from engine.config import Settings
from engine.home import HomeLayout

RegisteredProvider = Callable[[], Iterable[tuple[int, str, str]]]


class RegistryUnreadable(Exception):
    """The registry exists but could not be read: treat every process as registered."""


def _our_sessions(home: HomeLayout, settings: Settings) -> list[tuple[int, str, str]]:
    from engine.processes import ProcessRegistry

    return [(int(pid), str(fp), f"hermes-tui session {label}")
            for pid, fp, label in ProcessRegistry(home, settings).live_processes()]


def _hermes_sessions(home: HomeLayout) -> list[tuple[int, str, str]]:
    from engine.hermes.processes import ProcessesFileUnreadable, live_hermes_processes

    try:
        return live_hermes_processes(home.root)
    except ProcessesFileUnreadable as exc:
        raise RegistryUnreadable(f"hermes-agent's processes.json cannot be read ({exc})") from None


def registry_provider(home: HomeLayout, settings: Settings) -> RegisteredProvider:
    """The default provider: our process registry's live sessions plus hermes-agent's
    verified ``processes.json`` entries."""

    def provide() -> list[tuple[int, str, str]]:
        hermes = _hermes_sessions(home)
        try:
            ours = _our_sessions(home, settings)
        except Exception as exc:  # any failure: fail closed
            raise RegistryUnreadable(f"cannot read the process registry: {exc}") from exc
        return ours + hermes

    return provide
