"""ExecuTorch's production LLM program (export_llama --use_sdpa_with_kv_cache: llama::custom_sdpa
and llama::update_cache from the wheel) in a session on the host (issue 45): the native and
python runners and ExecuTorch's own TextLLMRunner (``text_llm_runner``) sample the tokens of the
plain-attention export of the same checkpoint; the report sets TextLLMRunner's stats (whole ms)
beside our clocks in one table; the breakdown places the custom operators; a tokenizer that is
missing or wrong is one line while the other tests go on."""

import json
import shutil

TESTS = """
import pytest

TOKENS = {}


@pytest.mark.parametrize("runner", ["native", "python", "text_llm_runner"])
def test_custom_sdpa(sme2_generate, runner):
    gen = sme2_generate("sdpa.pte", scheme="pte", runner=runner, prompt_tokens=12,
                        new_tokens=6)
    assert gen.runner.name == runner and len(gen.tokens) == 7
    assert gen.decode.executes == 6 and gen.prefill.executes == 1
    TOKENS[runner] = gen.tokens
    if runner == "text_llm_runner":
        report = gen.runner_report
        assert report["runner"] == "text_llm_runner" and report["stats_resolution_ms"] == 1
        assert report["prompt_tokens"] == 12 and report["generated_tokens"] == 6
        assert gen.decode.token_median_ms > 0          # our clock around its executes
    else:
        # The custom SDPA has a row of its own; the cache write is a copy.
        assert gen.decode.categories_ms.get("Attention", 0) > 0, gen.decode.categories_ms


def test_plain(sme2_generate):
    TOKENS["plain"] = sme2_generate("plain.pte", scheme="pte", prompt_tokens=12,
                                    new_tokens=6).tokens
    assert TOKENS["plain"] == TOKENS["native"] == TOKENS["python"] == TOKENS["text_llm_runner"]


def test_missing_tokenizer(sme2_generate):
    sme2_generate("sdpa.pte", scheme="pte", runner="text_llm_runner", tokenizer="nope.model")


def test_wrong_tokenizer(sme2_generate):
    sme2_generate("sdpa.pte", scheme="pte", runner="text_llm_runner", tokenizer="toy.pte")
"""


def test_custom_sdpa_on_every_host_runner(pytester, run_pytest, toy_export, tiny_llama_8da4w,
                                          tiny_llama_8da4w_sdpa):
    shutil.copyfile(tiny_llama_8da4w_sdpa, pytester.path / "sdpa.pte")
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "plain.pte")
    shutil.copyfile(toy_export.pte, pytester.path / "toy.pte")
    pytester.makepyfile(test_sdpa=TESTS)
    res = run_pytest("--runs=3", "--warmup=1", "--sme2-loads=1")
    res.assert_outcomes(passed=4, failed=2)
    out = res.stdout.str()
    res.stdout.fnmatch_lines_random([
        "*sme2_generate(tokenizer=...): tokenizer *nope.model does not exist; pass the model's "
        "tokenizer.model (SentencePiece)*",
        "*toy.pte: not a tokenizer ExecuTorch's runner reads (tried CppHFTokenizer, "
        "CppTiktoken, CppSPTokenizer, CppLlama2cTokenizer)*"])
    assert "Traceback" not in out
    # The terminal's table: its stats in whole ms beside our clock and the native runner's.
    res.stdout.fnmatch_lines([
        "ExecuTorch's own LLM runner (TextLLMRunner), by its stats and by our clock",
        "*", "*",
        "*pte  *pp12, tg6  text_llm_runner: its own stats (whole ms)*",
        "*pte  *pp12, tg6  text_llm_runner: our clock around its executes*",
        "*pte  *pp12, tg6  native: its clock around each execute*",
        "ExecuTorch's TextLLMRunner keeps its stats in whole milliseconds*"])
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "## ExecuTorch's own LLM runner" in report
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    text = next(b for b in doc["benchmarks"] if b["runner"] == "text_llm_runner")
    assert text["generation"]["runner_report"]["generations"], text["generation"]
    assert text["timing"]["source"].startswith("our clock around each Method::execute inside")
    native = next(b for b in doc["benchmarks"] if b["runner"] == "native"
                  and "sdpa" in b["nodeid"])
    ops = {o["name"] for o in native["operators"]}
    assert {"llama::custom_sdpa.out", "llama::update_cache.out"} <= ops
