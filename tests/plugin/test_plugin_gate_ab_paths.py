"""The A/B gate's other paths in a real session: a base runner (the same program on two
runners), a baseline whose kept program was deleted (the fallback names the file), and ab mode
with --save-baseline (only the program under test's blocks are saved). Structure only: no
assertion here depends on how fast anything ran."""

from __future__ import annotations

import json
import shutil

from pytest_sme2.measure.judging import AGAINST_RUNNER
from pytest_sme2.gate.ab import AGAINST

TEST = """
def test_latency(sme2_bench, sme2_case):
    sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
"""


def _common(pytester, export_cache, *more):
    return (f"--sme2-cache-dir={export_cache}", "--runs=5", "--warmup=1", "--sme2-threads=1",
            "--sme2-models=exported/m.pte", f"--baseline-dir={pytester.path / 'b'}", *more)


def _setup(pytester, toy_export):
    pytester.makepyfile(test_ab=TEST)
    (pytester.path / "exported").mkdir()
    shutil.copyfile(toy_export.pte, pytester.path / "exported" / "m.pte")


def _blocks(pytester) -> list[dict]:
    return json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]


def test_a_base_runner_compares_the_same_program_on_two_runners(
        pytester, run_pytest, export_cache, toy_export):
    _setup(pytester, toy_export)
    res = run_pytest(*_common(pytester, export_cache, "--sme2-gate-mode=ab",
                              "--sme2-ab-base-runner=python", "--fail-on-regression=1000"))
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*pte t1 native: * vs the same program re-measured in this "
                              "session on runner python*"])
    blocks = _blocks(pytester)
    verdict = blocks[0]["baseline"]
    assert verdict["against"] == AGAINST_RUNNER + " python" != AGAINST
    assert verdict["reason"].endswith("; base: the same program on runner python, candidate on "
                                      "runner native")
    assert {b["runner"] for b in blocks} == {"native"}     # the base's are not kept
    assert len(blocks) == verdict["current_blocks"] >= 2


def test_a_deleted_kept_program_is_named_in_the_fallback(
        pytester, run_pytest, export_cache, toy_export):
    _setup(pytester, toy_export)
    common = _common(pytester, export_cache)
    run_pytest(*common, "--save-baseline").assert_outcomes(passed=1)
    (kept,) = (pytester.path / "b" / "programs").glob("*.pte")
    kept.unlink()
    # a changed program, so the base would be re-measured if it were there
    (pytester.path / "exported" / "m.pte").write_bytes(toy_export.pte.read_bytes() + b"\0")
    res = run_pytest(*common, "--sme2-gate-mode=ab")
    res.stdout.fnmatch_lines([f"*A/B gate not run: programs/{kept.stem[:12]}*.pte is not in "
                              f"*; judged against the stored sessions*"])


def test_ab_mode_saves_only_the_candidates_blocks_as_the_baseline(
        pytester, run_pytest, export_cache, toy_export):
    _setup(pytester, toy_export)
    common = _common(pytester, export_cache)
    run_pytest(*common, "--save-baseline").assert_outcomes(passed=1)
    res = run_pytest(*common, "--sme2-gate-mode=ab", "--sme2-ab-base-runner=python",
                     "--fail-on-regression=1000", "--save-baseline")
    res.assert_outcomes(passed=1)
    blocks = _blocks(pytester)
    assert {b["runner"] for b in blocks} == {"native"}
    assert not any("[base#" in b["nodeid"] for b in blocks)
    saved = "\n".join(p.read_text() for p in (pytester.path / "b").rglob("*.json"))
    assert "base#" not in saved
    assert '"runner": "python"' not in saved and '"runner": "native"' in saved


LLM = """
def test_llm(sme2_generate):
    sme2_generate("llm.pte", scheme="8da4w", prompt_tokens=8, new_tokens=4)
"""


def test_an_llms_phases_are_paired_too(pytester, run_pytest, export_cache, tiny_llama_8da4w):
    """An LLM in ab mode: decode per token is the pairs' verdict, and prefill time and time to
    first token are judged by the same pairs (not against the stored sessions)."""
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "llm.pte")
    pytester.makepyfile(test_llm=LLM)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     f"--baseline-dir={pytester.path / 'b'}", "--sme2-gate-mode=ab",
                     "--sme2-ab-base-runner=python", "--fail-on-regression=1000",
                     "--sme2-loads=1")
    res.assert_outcomes(passed=1)
    [first, *_] = _blocks(pytester)
    assert first["baseline"]["against"] == AGAINST_RUNNER + " python"
    phases = first["baseline_phases"]
    assert set(phases) == {"prefill", "ttft"}
    for name, j in phases.items():
        assert j["against"] == AGAINST_RUNNER + " python", (name, j)
        assert j["reason"].endswith("; base: the same program on runner python, candidate on "
                                    "runner native")
        assert j["current_blocks"] == first["baseline"]["current_blocks"] >= 2
        assert j["reason"].startswith(("prefill time ", "time to first token ")), j["reason"]
