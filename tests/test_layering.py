"""The layers point down only: engine <- widgets <- hermes_tui (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "engine": ("textual", "widgets", "hermes_tui", "rich"),
    "widgets": ("hermes_tui",),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def violations(package: str) -> list[str]:
    bad = []
    for path in sorted((REPO / package).rglob("*.py")):
        for mod in imported_modules(path):
            top = mod.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(REPO)} imports {mod}")
    return bad


def test_engine_never_imports_the_ui():
    assert (REPO / "engine" / "identity.py").exists()
    assert violations("engine") == []


def test_widgets_never_import_the_app():
    assert (REPO / "widgets" / "pane.py").exists()
    assert violations("widgets") == []


def test_the_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from textual.app import App\n    import hermes_tui.cli\n")
    assert imported_modules(bad) == {"textual.app", "hermes_tui.cli"}
