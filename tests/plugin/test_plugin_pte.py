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
