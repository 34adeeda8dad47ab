"""pytest_sme2.api: every name it lists imports, and the docs import from it only."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest

from pytest_sme2 import api

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("pytest_sme2.api", "pytest_sme2.hookspec", "pytest_sme2_models")


@pytest.mark.parametrize("name", api.__all__)
def test_every_name_in_all_imports(name):
    module = importlib.import_module("pytest_sme2.api")
    assert getattr(module, name) is not None
    exec(f"from pytest_sme2.api import {name}", {})


def test_all_names_each_name_once():
    assert len(api.__all__) == len(set(api.__all__))


def test_the_readme_and_the_docs_import_from_the_public_modules_only():
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            m = re.search(r"\b(?:from|import) (pytest_sme2[\w.]*)", line)
            if m and not m.group(1).startswith(ALLOWED):
                found.append(f"{doc.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


# "from pytest_sme2.api import a, b" (or a parenthesised list over several lines) in a doc.
_IMPORT = re.compile(r"from (pytest_sme2[\w.]*|pytest_sme2_models) import (\([^)]*\)|[\w ,]+)")


def test_every_name_the_docs_import_exists():
    """A doc that imports a name the public module lacks would fail for the reader who
    copies it (the docs were rewritten while the API moved)."""
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in _IMPORT.finditer(doc.read_text()):
            module = importlib.import_module(m.group(1))
            names = m.group(2).strip("()").replace("\n", " ").split("#")[0]
            for name in filter(None, (n.split(" as ")[0].strip() for n in names.split(","))):
                if not hasattr(module, name):
                    missing.append(f"{doc.relative_to(ROOT)}: {m.group(1)}.{name}")
    assert missing == []


def _fixture_example(doc: Path) -> str:
    """The first ``def test_latency(sme2_bench, sme2_case)`` example of ``doc``."""
    text = doc.read_text()
    code = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S)
                if "def test_latency(sme2_bench, sme2_case)" in block)
    return code.split("\ndef test_sme2")[0]


@pytest.mark.parametrize("doc", ["README.md", "docs/writing-benchmarks.md"])
def test_the_documented_latency_test_holds_on_a_small_model_on_a_loaded_machine(doc):
    """The example users copy first must pass on the models they start with: a 0.03 ms model
    measured on a loaded machine read CV 32% and 25% (issue 49, item 10), which an assert on
    the CV failed. Its assertions run here on such a block."""
    from pytest_sme2.analysis.latency import latency_stats
    from pytest_sme2.results import BlockResult

    samples = [0.03 * (1 + 0.45 * ((i % 4) - 1.5) / 1.5) for i in range(30)]
    noisy = BlockResult(nodeid="t.py::test_latency[toy_cnn-fp32-t1]", model="toy_cnn",
                        dtype="fp32", threads=1, runner={"name": "native"},
                        device={"kind": "host"}, runs=30, warmup=3, e2e_ms=samples,
                        e2e=latency_stats(samples), etdump="", pte="")
    assert noisy.e2e.cv_pct > 25
    case = types.SimpleNamespace(model="toy_cnn", dtype="fp32", threads=1)
    scope: dict = {}
    exec(_fixture_example(ROOT / doc), scope)
    scope["test_latency"](lambda *a, **k: noisy, case)
