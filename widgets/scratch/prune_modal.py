"""The prune approval dialog: the plan, exactly as it would run, default No.

It is the product's confirm dialog (widgets/common/confirm.py) with the plan's own text:
what goes and how many bytes, which processes get which signal, what expires from
quarantine, and what stays and why.
"""

from __future__ import annotations

from engine.text import human_bytes
from widgets.common.confirm import ConfirmModal

MAX_LISTED = 100


class PruneModal(ConfirmModal):
    """Dismisses True only when the user picks "Prune" (or presses y)."""

    def __init__(self, plan, redact: bool = True) -> None:
        from engine.scratch.plan import describe_plan

        n = len(plan.candidates)
        if plan.is_empty:
            title = "Nothing to prune: every entry stays (reasons below)"
        else:
            verb = "Quarantine" if plan.quarantines else "Delete"
            title = f"{verb} {n} idle scratch entr{'y' if n == 1 else 'ies'} ({human_bytes(plan.total_bytes)})?"
            if plan.signals:
                title += f" {len(plan.signals)} process(es) get SIGTERM."
        # A plan of 100,000 entries is not 100,000 lines here: each part lists its first
        # MAX_LISTED and says how many more (the title gives the whole count and size).
        super().__init__(title, "\n".join(describe_plan(plan, limit=MAX_LISTED, redact=redact)), yes_label="Prune",
                         no_label="Cancel")
        self.plan = plan
