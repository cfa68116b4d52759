"""The README's set-up commands are the ones CI runs, and the docs it links exist."""

from __future__ import annotations

import re

from tests.conftest import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(python3 -m venv[^\n]+)\n```", text)


def test_readme_has_the_two_setup_commands():
    demo, tests = readme_commands()
    assert demo.endswith("pip install -e . && hermes-tui --demo")
    assert "pip install -e '.[test]'" in tests and "pytest" in tests
    assert "slow" not in tests  # the heavy tests are part of the suite; `-m "not slow"` is the quick loop
    assert '`pytest -n 2 -m "not slow"`' in (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci
    assert "ruff check ." in ci


def test_readme_links_resolve():
    text = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs|screenshots)/[^)]+)\)", text):
        assert (REPO / target).exists(), target
