"""An LLM in a session: a user's ``export_llama`` .pte is measured as a generation by
``sme2_generate``, by ``sme2_bench`` (found to be an LLM by its methods) and by ``sme2_compare``
(token ids as the outputs, a speed-up per phase); the gate judges each phase; bad input is one
line each while the other tests go on."""

import json
import shutil

TESTS = """
import pytest


def test_generate(sme2_generate):
    gen = sme2_generate("llm.pte", scheme="pte", prompt_tokens=12, new_tokens=6)
    assert gen.prompt_tokens == 12 and gen.new_tokens == 6
    assert gen.generations == 3
    assert len(gen.tokens) == 7            # D + 1 ids, the same in every generation (checked)
    assert gen.prefill.tokens_per_s > 0 and gen.decode.tokens_per_s > 0
    assert gen.decode.executes == 6 and gen.prefill.executes == 1    # dynamic length
    assert 0 < gen.prefill.median_ms <= gen.ttft_ms
    assert gen.startup.load_ms > 0 and gen.runner.name == "native"
    assert gen.device.spec == "host"
    # Each phase's categories (mean ms per generation; Other is what the named ones leave).
    for phase in (gen.prefill, gen.decode):
        assert sum(phase.categories_ms.values()) > 0
        assert min(phase.categories_ms.values()) >= -1e-6, phase.categories_ms


def test_generate_at_depth(sme2_generate):
    gen = sme2_generate("llm.pte", scheme="pte", prompt_tokens=12, new_tokens=6, depth=32)
    assert gen.depth == 32 and gen.depth_executes == 1     # one execute fills 32 tokens
    assert gen.depth_ms > 0                                # timed apart from both phases
    assert gen.prefill.executes == 1 and gen.decode.executes == 6 and len(gen.tokens) == 7
    assert gen.bench_name("decode") == "tg6 @ d32"


def test_depth_over_the_limit(sme2_generate):
    sme2_generate("llm.pte", scheme="pte", prompt_tokens=12, new_tokens=6, depth=120)


def test_bench_finds_the_llm(sme2_bench):
    r = sme2_bench("llm.pte")
    assert r.generation is not None and r.generation.new_tokens == 4
    assert r.e2e.n == 3 * 4                        # every timed decode step
    assert abs(sum(r.categories_ms.values()) - r.breakdown_e2e_ms) < 1e-6   # the traced steps


def test_compare(sme2_compare):
    cmp = sme2_compare("python", "native", "llm.pte", blocks=2)
    assert cmp.outputs.equal, cmp.outputs          # the same token ids
    assert cmp.decode.speedup == cmp.speedup
    assert cmp.prefill.speedup.low > 0 and cmp.ttft.speedup.low > 0


def test_not_an_llm(sme2_generate):
    sme2_generate("toy.pte", scheme="pte")


def test_prompt_over_the_limit(sme2_generate):
    sme2_generate("llm.pte", scheme="pte", prompt_tokens=200, new_tokens=4)
"""


def test_an_llm_in_a_session(pytester, run_pytest, export_cache, toy_export, tiny_llama_8da4w):
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "llm.pte")
    shutil.copyfile(toy_export.pte, pytester.path / "toy.pte")
    pytester.makepyfile(test_llm=TESTS)
    common = (f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
              "--sme2-prompt-tokens=8", "--sme2-new-tokens=4", "--sme2-loads=1",
              f"--baseline-dir={pytester.path / 'baselines'}")
    res = run_pytest(*common, "--save-baseline")
    res.assert_outcomes(passed=4, failed=3)
    res.stdout.fnmatch_lines_random([
        "*toy.pte: not an LLM program (its metadata has no use_kv_cache and get_max_seq_len*",
        "*prompt 200 + new 4 tokens is over the program's limits (max_seq_len 128*",
        "*llm.pte: depth 120 + prompt 12 + new 6 tokens is over the program's limits*",
        "*pp12 @ d32, tg6 @ d32*"])
    assert "Traceback" not in res.stdout.str()
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    generated = [b for b in doc["benchmarks"] if b.get("generation")]
    assert {b["nodeid"].split("::")[-1].split("[")[0] for b in generated} == {
        "test_generate", "test_generate_at_depth", "test_bench_finds_the_llm", "test_compare"}
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "| prefill | pp12 @ d32 | 12 | 1 |" in report
    gen = next(b for b in generated if b["nodeid"].endswith("test_generate"))
    assert gen["generation"]["prefill"]["tokens"] == 12
    # `pytest-sme2 analyze` of its ETDump: the record beside it drops the traced warm-up
    # generation and splits prefill from decode, as the session did (issue 49, item 11).
    from pytest_sme2.measure.offline import analyze_recorded  # pandas: this check's alone

    found = analyze_recorded(gen["etdump"])
    assert (found.record.warmup, found.record.runs) == (1, 10)       # --warmup, trace runs
    assert found.generation.prefill.executes == 1 and found.generation.decode.executes == 6
    assert found.generation.generations == 10 and found.analysis.e2e.n == 10 * 6
    cmp = doc["comparisons"][0]
    assert set(cmp["phase_speedups"]) == {"prefill", "ttft", "decode"}

    # The next session is judged per phase against the one just saved.
    res = run_pytest(*common, "-k", "test_generate or test_bench")
    res.assert_outcomes(passed=3)       # the depth's own baseline key judges it
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    for block in doc["benchmarks"]:
        assert set(block["baseline_phases"]) == {"prefill", "ttft"}, block["nodeid"]
        assert block["baseline_phases"]["prefill"]["status"] != "not_compared", block
        assert block["baseline"]["status"] != "not_compared"
