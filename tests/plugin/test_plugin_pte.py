"""A .pte someone else exported, named on the command line, by a glob and in a fixture call:
ids without a dtype, one line for a missing file while the others go on, the report's note on
a missing .etrecord, and a changed file judged as a changed exported program."""

import json
import shutil

TESTS = """
def test_latency(sme2_bench, sme2_case):
    r = sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
    assert r.e2e.n == r.runs and r.dtype == "pte"


def test_named_in_a_call(sme2_bench):
    r = sme2_bench("exported/theirs.pte")
    assert r.nodeid.endswith("test_named_in_a_call") and r.dtype == "pte"
"""


def test_a_pte_file_is_a_model(pytester, run_pytest, export_cache, toy_export):
    exported = pytester.path / "exported"
    exported.mkdir()
    shutil.copyfile(toy_export.pte, exported / "theirs.pte")        # no .etrecord beside it
    pytester.makepyfile(test_pte=TESTS)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1", "-v",
                     "--sme2-threads=1", "--sme2-models=gone.pte",
                     "--sme2-pte=exported/*.pte", "--save-baseline",
                     f"--baseline-dir={pytester.path / 'baselines'}")
    res.assert_outcomes(passed=2, failed=1)
    res.stdout.fnmatch_lines(["*test_latency?theirs.pte-t1? PASSED*",
                              "*gone.pte: no such .pte file*"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    keys = {b["export_key"] for b in doc["benchmarks"]}
    assert keys == {toy_export.meta["pte_sha256"][:16]}
    assert all(b["etrecord_missing"] for b in doc["benchmarks"])
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "no .etrecord beside the .pte" in report

    # Other bytes in the same file (trailing padding the runtime ignores): the gate names what
    # changed.
    pte = exported / "theirs.pte"
    pte.write_bytes(pte.read_bytes() + b"\0" * 16)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     "--sme2-threads=1", "--sme2-pte=exported/*.pte", "-k", "test_latency",
                     f"--baseline-dir={pytester.path / 'baselines'}")
    res.stdout.fnmatch_lines(["*changed since baseline: exported program*"])


HOOK = """
import numpy as np

def make_inputs(signature):
    # A ramp, nothing like the seeded N(0, 1) inputs made from the metadata.
    item = signature.inputs[0]
    n = int(np.prod(item.shape))
    return [np.linspace(-2, 2, n, dtype=np.float32).reshape(item.shape)]
"""

HOOK_TESTS = """
import importlib.util

import numpy as np
import pytest
import torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch

from pytest_sme2.programs.pte import make_input
from pytest_sme2.readers.pte_program import forward_signature
from pytest_sme2.readers.tensorfile import read_tensors

PTE = "exported/theirs.pte"


def _forward(arrays):
    return [o.numpy() for o in _load_for_executorch(PTE).forward(
        tuple(torch.from_numpy(np.array(a)) for a in arrays))]


@pytest.mark.sme2(runners=["python", "native"])
def test_the_hooks_inputs_are_what_ran(sme2_compare):
    cmp = sme2_compare("python", "native", PTE, threads=1)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs
    ran = read_tensors(cmp.candidate_blocks[0].context.outputs)      # the native runner's
    spec = importlib.util.spec_from_file_location("hook", "exported/theirs.inputs.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    signature = forward_signature(PTE)
    from_hook = _forward(hook.make_inputs(signature))
    rng = np.random.default_rng(0)
    generated = _forward([make_input(PTE, i, rng) for i in signature.inputs])
    assert np.allclose(ran[0], from_hook[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(ran[0], generated[0], rtol=1e-2, atol=1e-3)
"""


def test_an_inputs_hook_feeds_the_runners(pytester, run_pytest, export_cache, toy_export):
    exported = pytester.path / "exported"
    exported.mkdir()
    shutil.copyfile(toy_export.pte, exported / "theirs.pte")
    (exported / "theirs.inputs.py").write_text(HOOK)
    pytester.makepyfile(test_hook=HOOK_TESTS)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1", "-v",
                     "--sme2-threads=1", "--sme2-blocks=2")
    res.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    key = doc["benchmarks"][0]["export_key"]
    meta = json.loads((export_cache / "pte" / key / "meta.json").read_text())
    assert meta["inputs_from"] == f"{exported / 'theirs.inputs.py'}:make_inputs"

    # A hook whose tensors do not fit forward: one line naming the file, input and expectation.
    (exported / "theirs.inputs.py").write_text(HOOK.replace("np.float32", "np.float64"))
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     "--sme2-threads=1", "--sme2-blocks=2")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*theirs.inputs.py:make_inputs: input 0 is float64 [[]1, 3, 32, "
                              "32[]]; forward expects float32 [[]1, 3, 32, 32[]]*"])
