"""The evaluation scripts (evaluations/) behind docs/measurements/: each feeds a page there,
compiles, keeps its work under ``if __name__ == "__main__":`` and imports, so a moved module
breaks this test and not a published figure months later. The scripts themselves are long
timing runs: not run.

They import the library through ``pytest_sme2.api``, as a user's own evaluation would. The
scripts that measure the internals themselves (a private step, a module's own parts) are
listed in :data:`INTERNAL` with the internal names each may import: any other internal import
fails here, and so does an allowance a script no longer uses."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

EVALUATIONS = Path(__file__).resolve().parents[2] / "evaluations"
MEASUREMENTS = EVALUATIONS.parent / "docs" / "measurements"
# Modules the scripts share (_common, _rules_before) are not scripts.
SCRIPTS = sorted(p for p in EVALUATIONS.glob("*.py") if not p.name.startswith("_"))
# Public besides pytest_sme2.api: the model zoo.
PUBLIC = {"pytest_sme2.api", "pytest_sme2_models"}
# script: the internal names ("module:name", or "module" for `import module`) it measures.
INTERNAL = {
    "analysis_cost": {"pytest_sme2",                        # prints which checkout it timed
                      "pytest_sme2.analysis.startup:process_startup",
                      "pytest_sme2.results:ResultAnalysis"},
    "costs_library_exports": {"pytest_sme2.programs.export:DTYPES"},
    "costs_session": {"pytest_sme2.measure.matrix:DEFAULT_DTYPES",
                      "pytest_sme2.measure.matrix:DEFAULT_MODELS",
                      "pytest_sme2.measure.matrix:DEFAULT_THREADS",
                      "pytest_sme2.measure.settings:MIN_BLOCKS"},
    "history_evaluation": {"pytest_sme2.history:page", "pytest_sme2.history:report",
                           "pytest_sme2.history.records:session_points",
                           "pytest_sme2.provision.history:postgres_bin"},
    "history_evaluation_real_sessions": {"pytest_sme2.history:report"},
    "instruction_gate_evaluation": {"pytest_sme2.instructions:count",
                                    "pytest_sme2.instructions.callgrind:Costs",
                                    "pytest_sme2.instructions.callgrind:read_profiles"},
    "int8_accuracy": {"pytest_sme2.programs:recipes",
                      "pytest_sme2.programs.library:model_entry"},
    "llm_kernels": {"pytest_sme2.programs:recipes",
                    "pytest_sme2.programs.export:accuracy_problem",
                    "pytest_sme2.programs.llm.llama:LlamaShape",
                    "pytest_sme2.programs.llm.llama:build_llama"},
    "llm_runner_overhead": {"pytest_sme2.runners.native.cmake:SOURCE_DIR",
                            "pytest_sme2.runners.native.cmake:executorch_cmake_dir"},
    "regression_gate_evaluation_time_gates": {"pytest_sme2.gate.robust:judge_robust"},
    "machine_speed": {"pytest_sme2.analysis.latency:latency_stats",    # a block as a runner's
                      "pytest_sme2.baselines.store:save",              # the stored gate's A/A
                      "pytest_sme2.results.machine:ProbeReading"},     # the probe's readings
    "sampled_vs_traced": {"pytest_sme2.analysis.addresses:kernel_key"},
    "tracing_cost": {"pytest_sme2.analysis.timing:process_runs"},
    "wheel_kernels": {"pytest_sme2.analysis.kernel_map:library_kernels",
                      "pytest_sme2.analysis.kernel_map:map_kernels",
                      "pytest_sme2.emulation.wheel:cached_executorch_dir"},
}


def _guarded(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
               for node in tree.body)


def _internal_imports(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "pytest_sme2" and node.module not in PUBLIC:
                found |= {f"{node.module}:{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names
                      if alias.name.split(".")[0] == "pytest_sme2" and alias.name not in PUBLIC}
    return found


def test_the_evaluations_are_there():
    assert len(SCRIPTS) >= 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_evaluation_feeds_a_measurements_page(script):
    """A script whose figures no page under docs/measurements/ states is deleted, or its
    figures get a page: a guide links to the page, never to the script alone."""
    named = re.compile(rf"(?<![\w]){script.stem}\.py")
    pages = [p for p in MEASUREMENTS.glob("*.md") if named.search(p.read_text())]
    assert pages, f"{script.name}: no page under docs/measurements/ names it"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_an_evaluation_compiles_imports_and_runs_only_as_a_script(script, monkeypatch):
    tree = ast.parse(script.read_text(), str(script))
    compile(tree, str(script), "exec")
    assert _guarded(tree), f"{script.name}: its work belongs under if __name__ == '__main__':"
    monkeypatch.syspath_prepend(str(EVALUATIONS))       # as `python evaluations/NAME.py` has it
    importlib.import_module(script.stem)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_an_evaluation_imports_the_library_through_its_api(script):
    found = _internal_imports(ast.parse(script.read_text(), str(script)))
    allowed = INTERNAL.get(script.stem, set())
    assert found <= allowed, (f"{script.name} imports {sorted(found - allowed)}: import it "
                              "from pytest_sme2.api, or list it in INTERNAL if the script "
                              "measures that internal")
    assert allowed <= found, f"{script.name} no longer imports {sorted(allowed - found)}"


def test_the_allowances_name_scripts_that_exist():
    assert set(INTERNAL) <= {p.stem for p in SCRIPTS}
