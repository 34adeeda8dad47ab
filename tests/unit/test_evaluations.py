"""The evaluation scripts (evaluations/) behind docs/measurements/: each compiles, keeps its
work under ``if __name__ == "__main__":`` and imports, so a moved module breaks this test and
not a published figure months later. The scripts themselves are long timing runs: not run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

EVALUATIONS = Path(__file__).resolve().parents[2] / "evaluations"
SCRIPTS = sorted(p for p in EVALUATIONS.glob("*.py") if p.name != "_common.py")


def _guarded(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
               for node in tree.body)


def test_the_evaluations_are_there():
    assert len(SCRIPTS) >= 24


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_an_evaluation_compiles_imports_and_runs_only_as_a_script(script, monkeypatch):
    tree = ast.parse(script.read_text(), str(script))
    compile(tree, str(script), "exec")
    assert _guarded(tree), f"{script.name}: its work belongs under if __name__ == '__main__':"
    monkeypatch.syspath_prepend(str(EVALUATIONS))       # as `python evaluations/NAME.py` has it
    importlib.import_module(script.stem)
