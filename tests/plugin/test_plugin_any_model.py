"""A user's .pte and a library model (``transformers:...``, small config overrides) in real
sessions: under pytest-xdist (``-n 2``) on the host, and on the fake arm64 phone (QEMU, SME2)
as an SME2-on vs masked pair with kernels proven by sampling and outputs compared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SMALL_LIBRARY_MODEL
from tests.needs import missing

try:        # skips on a developer's machine without the extra, fails in CI (tests/needs.py)
    import transformers  # noqa: F401
except ImportError:
    missing("transformers", "pip install 'pytest-sme2[transformers]'")

SPEC = SMALL_LIBRARY_MODEL      # exported once per session (tests/conftest.py)


@pytest.fixture
def theirs_pte(pytester, toy_export):
    exported = pytester.path / "exported"
    exported.mkdir()
    shutil.copyfile(toy_export.pte, exported / "theirs.pte")
    return exported / "theirs.pte"


LATENCY = """
def test_latency(sme2_bench, sme2_case):
    r = sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
    assert r.e2e.n == r.runs
"""


def test_a_pte_and_a_library_model_under_xdist(pytester, run_pytest, export_cache, theirs_pte,
                                                 small_library_export, toy_export):
    pytester.makepyfile(test_any=LATENCY)
    pytester.makeini(f"[pytest]\nsme2_models = exported/theirs.pte, {SPEC}\n")
    res = run_pytest("-n", "2", f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     "--sme2-threads=1", "--sme2-dtypes=fp32", "-v")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines(["*test_latency?theirs.pte-t1? *", "*test_latency?transformers:*"])
    assert "exporting" not in res.stdout.str()          # both found by the workers, not made
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    got = {b["model"]: b for b in doc["benchmarks"]}
    assert set(got) == {str(theirs_pte), SPEC}
    assert got[str(theirs_pte)]["dtype"] == "pte"
    assert got[str(theirs_pte)]["export_key"] == toy_export.meta["pte_sha256"][:16]
    assert got[SPEC]["export_key"] == small_library_export.key
    assert all(b["e2e"]["n"] == 3 for b in got.values())


PAIR = f"""
import pytest

SPEC = {SPEC!r}


@pytest.mark.parametrize("model", ["exported/theirs.pte", SPEC])
def test_pair(sme2_compare, sme2_on, sme2_off, sme2_capable_device, sme2_emulated, model):
    assert sme2_emulated
    cmp = sme2_compare(sme2_off, sme2_on, model, dtype="fp32", threads=1)
    on, off = cmp.candidate_blocks[0], cmp.base_blocks[0]
    assert on.device.kind == "android"
    assert on.kernel_evidence.sme2 == "proven", on.kernel_evidence.reason
    assert any(k.isa_family == "SME2" for k in on.kernel_evidence.sampled_kernels)
    assert off.kernel_evidence.sme2 == "absent", off.kernel_evidence.reason
    assert not any(k.isa_family in ("SME", "SME2") for k in off.kernel_evidence.sampled_kernels)
    assert any("PF32" in o.name for o in on.operators)
    assert not any("PF32" in o.name for o in off.operators)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs
"""


def test_a_pte_and_a_library_model_on_the_fake_phone(pytester, run_pytest, arm64_phone,
                                                       adb_server, monkeypatch, export_cache,
                                                       theirs_pte, small_library_export):
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_phone=PAIR)
    res = run_pytest(f"--device=android:{arm64_phone.serial}", f"--sme2-cache-dir={export_cache}",
                     "--runs=2", "--warmup=1", "--sme2-blocks=2", "--sme2-confirm-blocks=0", "-v")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines(["*sme2_on vs sme2_off on *theirs.pte pte t1: *outputs equal*",
                              "*sme2_on vs sme2_off on transformers:MobileViTModel?image_size=32*"
                              "outputs equal*"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    pushed = {Path(p).name for p in arm64_phone.device.sends}
    assert "theirs.pte" in pushed and "model.pte" in pushed, pushed   # a user's, ours
    assert {b["device"]["serial"] for b in doc["benchmarks"]} == {arm64_phone.serial}
    assert {b["model"] for b in doc["benchmarks"]} == {"exported/theirs.pte", SPEC}
