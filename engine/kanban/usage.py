"""Tokens and cost per run, per card and per board, whoever recorded them.

hermes-tui's own board keeps what a worker reports (``kanban usage ID --input-tokens N
--output-tokens N --cost-usd X``, one row per run in ``run_usage``); hermes-agent's board
links a run to its worker's session (:mod:`engine.hermes.usage`), whose usage hermes
records in ``state.db``. A run whose usage is not known is *not linked*, with why:
never shown as zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunUsage:
    """One run's usage, or why it is not known (``linked`` False)."""

    run_id: int
    task_id: str
    linked: bool
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    session_id: str | None = None  # hermes-agent's worker session
    model: str | None = None
    why: str = ""  # when not linked

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "task_id": self.task_id, "linked": self.linked,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd,
                "session_id": self.session_id, "model": self.model, "why": self.why or None}

    def words(self) -> str:
        if not self.linked:
            return f"run {self.run_id}: usage not linked ({self.why})"
        text = f"run {self.run_id}: {_tokens(self.input_tokens)} in / {_tokens(self.output_tokens)} out tokens"
        text += f", {_cost(self.cost_usd)}" if self.cost_usd is not None else ", cost not recorded"
        if self.model:
            text += f" ({self.model})"
        if self.session_id:
            text += f", session {self.session_id}"
        return text


@dataclass(frozen=True)
class UsageTotal:
    """The sum over the linked runs, and how many runs are not linked."""

    runs: tuple[RunUsage, ...]

    @property
    def linked(self) -> tuple[RunUsage, ...]:
        return tuple(r for r in self.runs if r.linked)

    @property
    def unlinked(self) -> int:
        return len(self.runs) - len(self.linked)

    @property
    def input_tokens(self) -> int | None:
        return sum(r.input_tokens or 0 for r in self.linked) if self.linked else None

    @property
    def output_tokens(self) -> int | None:
        return sum(r.output_tokens or 0 for r in self.linked) if self.linked else None

    @property
    def cost_usd(self) -> float | None:
        costs = [r.cost_usd for r in self.linked if r.cost_usd is not None]
        return round(sum(costs), 6) if costs else None

    def to_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd,
                "linked_runs": len(self.linked), "unlinked_runs": self.unlinked,
                "runs": [r.to_json() for r in self.runs]}

    def words(self) -> str:
        """One line: the total, and the runs it leaves out."""
        if not self.runs:
            return "no runs yet"
        if not self.linked:
            return f"usage not linked ({self.unlinked} run(s): {self.runs[-1].why})"
        text = f"{_tokens(self.input_tokens)} in / {_tokens(self.output_tokens)} out tokens"
        text += f", {_cost(self.cost_usd)}" if self.cost_usd is not None else ", cost not recorded"
        if self.unlinked:
            text += f" ({self.unlinked} of {len(self.runs)} run(s) not linked)"
        return text


def usage_lines(usage: UsageTotal) -> list[str]:
    """The usage section of a card (``kanban show``, the details dialog): the total, then each run."""
    return [usage.words(), *(run.words() for run in usage.runs)]


def total(runs: Iterable[RunUsage]) -> UsageTotal:
    return UsageTotal(tuple(runs))


def _tokens(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _cost(usd: float | None) -> str:
    return "?" if usd is None else f"${usd:.4f}".rstrip("0").rstrip(".") if usd else "$0"
