"""What the app draws, observed: the screen's layouts."""

from __future__ import annotations


def count_layouts(monkeypatch) -> list[object]:
    """One entry for each layout of a screen from now on (Textual's compositor reflowing
    every widget; a scroll's reflow of what is visible is not one). Observed, not replaced:
    Textual's own reflow still runs. ``clear()`` the list to count afresh."""
    from textual._compositor import Compositor

    made: list[object] = []
    reflow = Compositor.reflow

    def observed(compositor, *args, **kwargs):
        made.append(args)
        return reflow(compositor, *args, **kwargs)

    monkeypatch.setattr(Compositor, "reflow", observed)
    return made
