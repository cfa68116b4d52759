"""Both board backends do all that engine/kanban/backend.py asks of one."""

from __future__ import annotations

import inspect

import pytest

from engine.kanban.backend import BoardBackend, HermesExtras
from engine.kanban.backends.hermes.board import HermesBoardService
from engine.kanban.service import BoardService


def members(protocol: type) -> list[str]:
    """The names a protocol's body declares (its own, not typing's machinery)."""
    return sorted(n for n in vars(protocol) if not n.startswith("_") or n in ("__aenter__", "__aexit__"))


def parameters(func) -> list[str]:
    return [p.name for p in inspect.signature(func).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


@pytest.mark.parametrize("backend", [BoardService, HermesBoardService])
def test_a_backend_has_every_member_of_the_protocol(backend):
    for name in members(BoardBackend):
        assert hasattr(backend, name), f"{backend.__name__} has no {name}"
        wanted, got = getattr(BoardBackend, name), getattr(backend, name)
        if inspect.isfunction(wanted) and inspect.isfunction(got):
            assert parameters(got)[:len(parameters(wanted))] == parameters(wanted), name
            assert inspect.iscoroutinefunction(got) == inspect.iscoroutinefunction(wanted), name


def test_hermes_board_has_hermes_extras():
    for name in members(HermesExtras):
        assert inspect.iscoroutinefunction(getattr(HermesBoardService, name)), name


def test_callers_ask_capabilities_not_kinds():
    ours = BoardService.capabilities
    assert ours.dispatchable and ours.batch_create and ours.checks_profiles and ours.signals_workers
    assert not (ours.read_only or ours.worker_log_files or ours.reports_reasons or ours.hermes_verbs)
    assert not hasattr(BoardService, "kind") and not hasattr(HermesBoardService, "kind")
