"""Background processes: spawn, follow, yield, kill, notify.

The public surface other parts code against::

    from engine.processes import ProcessRegistry, ProcessSession, ProcessLookupFailed
    from engine.processes import SessionStatus, KillOutcome  # the states, as StrEnums

The names are looked up when first asked for (PEP 562), so importing one module of
this package (``engine.processes.redact`` for a CLI line) does not load the registry
and everything it needs.
"""

from __future__ import annotations

# name -> the module that defines it
_EXPORTS = {
    "KillReport": "engine.processes.kill_report",
    "ProcessRegistry": "engine.processes.registry",
    "SpawnFailed": "engine.processes.registry",
    "KillOutcome": "engine.processes.session",
    "ProcessLookupFailed": "engine.processes.session",
    "ProcessSession": "engine.processes.session",
    "SessionStatus": "engine.processes.session",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
