"""The layers point down only (engine <- widgets <- hermes_tui, ARCHITECTURE.md), and no
module of the project imports itself back through others."""

from __future__ import annotations

import ast
from collections.abc import Iterator
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
    assert (REPO / "widgets" / "common" / "pane.py").exists()
    assert violations("widgets") == []


def test_the_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from textual.app import App\n    import hermes_tui.cli\n")
    assert imported_modules(bad) == {"textual.app", "hermes_tui.cli"}


# -- import cycles ---------------------------------------------------------------------------

PACKAGES = ("engine", "widgets", "hermes_tui")

# Imports inside a function that close a cycle, each with why it may stay. A module-level
# cycle is never allowed: the first import of either module would see the other half-made.
ALLOWED_LATE_IMPORTS = {
    ("engine.kanban.backends.sqlite.store", "engine.kanban.dispatcher"):
        "the dispatch lock lives with the dispatcher; issue 26 item 6 moves it next to the store",
    ("engine.processes.supervisor", "engine.doctor"):
        "the TMPDIR check is doctor's; imported late so a plain `ps` loads neither doctor nor sqlite3",
    ("engine.processes.registry", "engine.processes.supervisor"):
        "the supervising wrapper is spawned only when a session starts; a listing never needs it",
    ("hermes_tui.keymap", "hermes_tui.app"):
        "the keymap checks binding ids against the app's bindings; issue 26 item 6 passes the app class in",
    ("hermes_tui.cli", "hermes_tui.launch"):
        "the app's launcher is loaded only when the app opens; issue 26 item 6 gives it its own CLI module",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The project modules one import statement loads (``from pkg import mod`` names the module)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    for alias in node.names:
        full = f"{base}.{alias.name}"
        yield full if full in known else base


def import_edges(path: Path, module: str, known: set[str]) -> Iterator[tuple[str, bool]]:
    """(imported project module, whether the import runs only inside a function). Imports
    under ``if TYPE_CHECKING:`` never run and are left out."""
    is_package = path.name == "__init__.py"

    def visit(body: list[ast.stmt], late: bool) -> Iterator[tuple[str, bool]]:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield from ((t, late) for t in _targets(node, module, is_package, known) if t in known and t != module)
            inside = late or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(node, field, None)
                if isinstance(sub, list):
                    yield from visit(sub, inside)

    yield from visit(ast.parse(path.read_text(encoding="utf-8")).body, False)


def import_graph(allowed: set[tuple[str, str]]) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """The project's import graph without the allowed late imports, and the late edges in it."""
    modules = project_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    late_edges = set()
    for module, path in modules.items():
        for target, late in import_edges(path, module, set(modules)):
            if late and (module, target) in allowed:
                continue
            graph[module].add(target)
            if late:
                late_edges.add((module, target))
    return graph, late_edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (a depth-first walk without recursion)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def cycle_words(cycle: list[str], late_edges: set[tuple[str, str]]) -> str:
    steps = [f"{a} -> {b}{' (inside a function)' if (a, b) in late_edges else ''}" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "import cycle: " + ", ".join(steps)


def test_no_import_cycles():
    graph, late_edges = import_graph(set(ALLOWED_LATE_IMPORTS))
    cycle = find_cycle(graph)
    assert cycle is None, cycle_words(cycle, late_edges)


def test_the_cycle_finder_names_a_cycle():
    cycle = find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert cycle == ["a", "b", "c", "a"]
    assert cycle_words(cycle, {("c", "a")}) == "import cycle: a -> b, b -> c, c -> a (inside a function)"
    assert find_cycle({"a": {"b"}, "b": set()}) is None
