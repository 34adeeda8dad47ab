"""An LLM measured as a generation in the reports (issue 30): the terminal's line and table,
report.md's Generation section and the per-scheme kernel findings, from synthetic blocks."""

from __future__ import annotations

import copy

from pytest_sme2.report.markdown.render import render_details, render_markdown
from pytest_sme2.report.recommend import recommendations
from pytest_sme2.report.recommend.scheme_kernels import kernel_sentences
from pytest_sme2.report.terminal import benchmark_line, summary_table
from pytest_sme2.results import load_results, pool_generation
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import (INT4_DECODE, INT4_PREFILL, INT8_PREFILL, QEMU_SME2,
                                      generation_block, interval, llm_doc, single_doc)


def _blocks(doc=None):
    return load_results(doc or llm_doc()).benchmarks


# -- the kernels per scheme, and the pooled figures ----------------------------------------

def test_kernel_sentences_one_per_scheme_from_the_evidence():
    assert kernel_sentences(_blocks()) == [
        "8da4w ran NEON i8mm/dotprod int4 kernels in prefill and NEON dotprod int4 kernels in "
        "decode",
        "8da8w ran SME2 mopa int8 kernels in prefill and SME2 dot int8 kernels in decode"]


def test_kernel_sentences_follow_the_evidence_not_the_scheme():
    """The same scheme name with other kernels says what those kernels were."""
    d = single_doc()
    d["benchmarks"] += [generation_block("8da4w", prefill_kernels=INT8_PREFILL,
                                         decode_kernels=INT8_PREFILL)]
    assert kernel_sentences(_blocks(d)) == [
        "8da4w ran SME2 mopa int8 kernels in prefill and decode"]


def test_kernel_sentences_name_runners_and_skip_schemes_without_kernels():
    d = single_doc()
    d["benchmarks"] += [
        generation_block("8da8w", "sme2_off", prefill_kernels=INT4_PREFILL,
                         decode_kernels=INT4_DECODE),
        generation_block("8da8w", "sme2_on", prefill_kernels=INT8_PREFILL, decode_kernels=None),
        generation_block("fp32", prefill_kernels=None, decode_kernels=None)]
    assert kernel_sentences(_blocks(d)) == [
        "8da8w on sme2_off ran NEON i8mm/dotprod int4 kernels in prefill and NEON dotprod int4 "
        "kernels in decode",
        "8da8w on sme2_on ran SME2 mopa int8 kernels in prefill (no kernels named for decode)"]


def test_figures_pool_blocks_by_their_medians():
    blocks = _blocks({**single_doc(), "benchmarks": [
        generation_block(prefill_ms=10.0, block=0), generation_block(prefill_ms=20.0, block=1),
        generation_block(prefill_ms=40.0, block=2)]})
    f = pool_generation(blocks)
    assert f.blocks == 3 and f.prefill.generations == 30
    assert f.prefill.median_ms == 20.0 and f.prefill.tokens_per_s == 64e3 / 20.0
    assert f.ttft_ms == 20.05
    assert pool_generation(_blocks(single_doc())) is None


# -- terminal --------------------------------------------------------------------------------

def test_benchmark_line_says_the_phases():
    line = benchmark_line(_blocks()[1])
    assert line == ("sme2: tiny_llama 8da4w t1 native: generation of 64 prompt + 32 new "
                    "tokens (pp64, tg32): prefill 4,000 tok/s, decode 1,000 tok/s (per token "
                    "median 1.000 ms, p90 1.200 ms), TTFT 16.050 ms, n=10 generations (+2 warm-up "
                    "discarded); SME2 prefill absent, decode absent")
    assert "Method::execute" not in line


def test_benchmark_line_marks_emulated_generations():
    line = benchmark_line(_blocks(llm_doc(device=QEMU_SME2))[2])
    assert "SME2 prefill proven, decode proven" in line
    assert line.endswith("[emulated CPU: timings say nothing about speed]")


def test_an_llm_gets_one_row_in_the_summary_its_generation_tables():
    blocks = _blocks()
    lines = summary_table(SessionView.of(blocks))
    i = lines.index("generation (LLMs: prefill + decode, medians over the timed generations)")
    head = lines[i + 1].split()
    assert head[:5] == ["benchmark", "runner", "scheme", "threads", "tests"]
    rows = lines[i + 3:i + 5]
    assert rows[0].split() == ["test_llm[tiny_llama-8da4w-t1]", "native", "8da4w", "1", "pp64,",
                               "tg32", "4,000", "1,000", "1.000", "1.200", "16.050", "-", "-",
                               "absent", "absent", "-"]
    assert rows[1].split()[:11] == ["test_llm[tiny_llama-8da8w-t1]", "native", "8da8w", "1",
                                    "pp64,", "tg32", "8,000", "2,000", "0.500", "0.600", "8.050"]
    # Each LLM benchmark is one row: the forward-pass table above holds the others only.
    for b in blocks:
        if b.generation is not None:
            assert sum(line.startswith(b.name + " ") for line in lines) == 1


def test_summary_table_without_llms_is_unchanged():
    blocks = _blocks(single_doc())
    assert not any("generation" in line for line in summary_table(SessionView.of(blocks)))


def test_generation_table_shows_phase_verdicts():
    d = llm_doc()
    b = d["benchmarks"][1]
    b["baseline"] = {"status": "ok", "reason": "same", "ratio": interval(1.01, 0.99, 1.03)}
    b["baseline_phases"] = {
        "prefill": {"status": "regression", "reason": "slower",
                    "ratio": interval(1.3, 1.2, 1.4)},
        "ttft": {"status": "ok", "reason": "same", "ratio": interval(1.0, 0.98, 1.02)}}
    lines = summary_table(SessionView.of(_blocks(d)))
    row = next(x for x in lines if x.startswith("test_llm[tiny_llama-8da4w-t1]  native  8da4w"))
    assert row.endswith("decode ok 1.01x [0.99, 1.03]; prefill REGRESSION 1.30x [1.20, 1.40]; "
                        "ttft ok 1.00x [0.98, 1.02]")


# -- report.md -------------------------------------------------------------------------------

def _section(text: str, title: str) -> str:
    i = text.index(title)
    j = text.find("\n## ", i + len(title))
    return text[i:j if j >= 0 else None]


def test_report_has_a_generation_section():
    s = _section(render_markdown(llm_doc()), "## Generation")
    assert "### tiny_llama 8da4w t1 native" in s and "### tiny_llama 8da8w t1 native" in s
    assert "| prefill | pp64 | 64 | 1 | 16.000 | 17.600 | 4.0 | 4,000 | — | — |" in s
    assert "| decode | tg32 | 32 | 32 | 32.000 | 35.200 | 4.0 | 1,000 | 1.000 | 1.200 |" in s
    assert "Time to first token (prefill + first sampling): **16.050 ms**" in s
    assert "Tokens generated: `3 10 17 24 31 38 45 52 … (33 ids)`" in s
    assert "| GEMM | 12.800 | 80.0 | 19.200 | 60.0 |" in s
    assert ("| prefill | **proven** | SME2 mopa int8 kernels | "
            f"`{INT8_PREFILL[0]}` (SME2, executed) |") in s
    assert f"| decode | **absent** | NEON dotprod int4 kernels | `{INT4_DECODE[0]}` (NEON, " \
        "executed) |" in s


def test_report_summary_has_a_line_per_llm():
    s = _section(render_markdown(llm_doc()), "## Summary")
    assert ("- tiny_llama 8da8w t1 native (LLM, pp64, tg32): prefill 8,000 tok/s, decode "
            "2,000 tok/s (per token median 0.500 ms, p90 0.600 ms), TTFT 8.050 ms.") in s
    e = _section(render_markdown(llm_doc(device=QEMU_SME2)), "## Summary")
    assert "TTFT 16.050 ms (emulated CPU: says nothing about speed)." in e


def _depth_doc() -> dict:
    d = single_doc()
    d["benchmarks"] += [generation_block("8da8w"), generation_block("8da8w", depth=512)]
    return d


def test_tables_name_tests_at_depth_as_llama_bench_does():
    lines = summary_table(SessionView.of(_blocks(_depth_doc())))
    i = lines.index("generation (LLMs: prefill + decode, medians over the timed generations)")
    rows = lines[i + 3:i + 5]
    assert rows[0].split()[4:6] == ["pp64,", "tg32"]
    assert rows[1].split()[:9] == ["test_llm[tiny_llama-8da8w-t1-d512]", "native", "8da8w", "1",
                                   "pp64", "@", "d512,", "tg32", "@"]
    line = benchmark_line(_blocks(_depth_doc())[-1])
    assert "64 prompt + 32 new tokens at depth 512 (the KV cache filled first: 92.160 ms, in " \
        "no phase) (pp64 @ d512, tg32 @ d512)" in line
    text = render_markdown(_depth_doc())
    s = _section(text, "## Generation")
    assert "| prefill | pp64 @ d512 | 64 | 1 |" in s and "| decode | tg32 @ d512 | 32 |" in s
    assert ("At context depth 512: each generation first filled the KV cache with 512 tokens "
            "(5 executes, 92.160 ms per generation, counted apart: in no phase's figures), "
            "then 64 prompt tokens") in s
    assert "(LLM, pp64 @ d512, tg32 @ d512)" in _section(text, "## Summary")


def test_report_generation_section_without_evidence_says_so():
    d = single_doc()
    d["benchmarks"].append(generation_block("fp32", prefill_kernels=None, decode_kernels=None))
    s = _section(render_markdown(d), "## Generation")
    assert "| prefill | **unknown** | no kernel evidence was collected for this phase | — |" in s


def test_report_without_llms_has_no_generation_section():
    assert "## Generation" not in render_markdown(single_doc())


def test_detail_page_has_the_generation():
    pages = render_details(llm_doc())
    page = next(t for p, t in pages.items() if "8da8w" in p)
    assert "## Generation" in page and "SME2 dot int8 kernels" in page


def test_emulated_generation_is_marked():
    s = _section(render_markdown(llm_doc(device=QEMU_SME2)), "## Generation")
    assert "Emulated CPU: its times and tokens per second say nothing about speed" in s


def test_recommendations_say_which_scheme_reached_sme2_per_phase():
    recs = [r for r in recommendations(llm_doc()) if r.rule == "generation-kernels"]
    assert [r.text for r in recs] == [
        "8da4w ran NEON i8mm/dotprod int4 kernels in prefill and NEON dotprod int4 kernels in "
        "decode. No SME2 kernel was proven in either phase; 8da8w reached SME2 in this "
        "session.",
        "8da8w ran SME2 mopa int8 kernels in prefill and SME2 dot int8 kernels in decode. "
        "SME2 is proven in prefill and decode."]
    assert recs[1].evidence == "kernel evidence per phase (prefill proven, decode proven)"


def test_no_generation_recommendation_without_llms():
    doc = copy.deepcopy(single_doc())
    assert not [r for r in recommendations(doc) if r.rule == "generation-kernels"]


def test_llama_bench_rows_carry_the_depth():
    from pytest_sme2.report.llama_bench import llama_bench_rows

    rows = llama_bench_rows(SessionView.of(_blocks(_depth_doc()), []), ("abc1234", 1))
    assert [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in rows] == [
        (64, 0, 0), (0, 32, 0), (64, 0, 512), (0, 32, 512)]


def test_every_depth_gets_its_bandwidth_line():
    """With --sme2-context-depth 0,512 each depth is its own benchmark and gets its own line
    (issue 49, item 5: only depth 0 had one)."""
    from pytest_sme2.report.generation import bandwidth_lines
    from pytest_sme2.results.generation import DecodeTraffic

    doc = _depth_doc()
    for b in doc["benchmarks"][-2:]:
        b["generation"]["traffic"] = DecodeTraffic(200_000, 512, 640.0, 20.0, "measured",
                                                   whole_cache=True).to_json()
    lines = bandwidth_lines(_blocks(doc))
    assert [line.split(": decode reads")[0] for line in lines] == [
        "tiny_llama 8da8w t1 native on vm", "tiny_llama 8da8w t1 native on vm at depth 512"]
    assert "all 640 positions: plain attention reads the whole cache" in lines[1]


# -- ExecuTorch's own runner beside ours; the two attention forms (issue 45) -----------------

def _text_llm_doc():
    d = single_doc()
    native = generation_block("8da8w", "native", prompt=16, new=8, prefill_ms=0.1,
                              token_ms=0.04)
    text = generation_block("8da8w", "text_llm_runner", prompt=16, new=8, prefill_ms=0.12,
                            token_ms=0.05)
    native["runner_info"]["kind"] = "native"
    text["runner_info"]["kind"] = "text_llm_runner"
    text["generation"]["runner_report"] = {
        "runner": "text_llm_runner", "stats_resolution_ms": 1, "prefill_ms": 0.0,
        "decode_ms": 1.0, "ttft_ms": 0.0, "prefill_tokens_per_s": None,
        "decode_tokens_per_s": 8000.0, "prompt_tokens": 16, "generated_tokens": 8}
    d["benchmarks"] += [native, text]
    return d


def test_its_stats_sit_beside_our_clocks_in_one_table():
    from pytest_sme2.report.generation import runner_stats_rows

    rows = runner_stats_rows(_blocks(_text_llm_doc()))
    assert [r["source"] for r in rows] == [
        "text_llm_runner: its own stats (whole ms)",
        "text_llm_runner: our clock around its executes",
        "native: its clock around each execute"]
    stats, ours, native = rows
    assert {r["tests"] for r in rows} == {"pp16, tg8"}
    # Whole milliseconds: a 0.12 ms prefill reads 0 ms and has no rate; our clock has both.
    assert (stats["prefill_ms"], stats["prefill_tokens_per_s"]) == (0.0, None)
    assert ours["prefill_ms"] == 0.12 and ours["prefill_tokens_per_s"] == 16e3 / 0.12
    assert native["decode_ms"] == 0.04 * 8
    assert runner_stats_rows(_blocks()) == []


def test_the_terminal_and_report_say_what_whole_milliseconds_do():
    blocks = _blocks(_text_llm_doc())
    lines = summary_table(SessionView.of(blocks))
    at = lines.index("ExecuTorch's own LLM runner (TextLLMRunner), by its stats and by our "
                     "clock")
    table = lines[at + 3:at + 6]
    assert "8da8w   pp16, tg8  text_llm_runner: its own stats (whole ms)" in table[0]
    assert table[0].split()[-5:] == ["0.000", "—", "1.000", "8,000", "0.000"]
    assert "whole milliseconds" in lines[at + 6] and "no rate" in lines[at + 6]
    text = render_markdown(_text_llm_doc())
    section = _section(text, "## ExecuTorch's own LLM runner")
    assert "| text_llm_runner: its own stats (whole ms) |" in section
    assert "a phase under 1 ms reads 0 ms" in section


def test_both_attention_forms_in_one_session_are_said_to_differ_in_attention():
    from pytest_sme2.report.generation import attention_lines

    d = single_doc()
    d["benchmarks"] += [generation_block("8da8w", model="tiny_llama"),
                        generation_block("8da8w", model="tiny_llama_plain")]
    (line,) = attention_lines(_blocks(d))
    assert line.startswith("attention: tiny_llama runs ExecuTorch's custom SDPA")
    assert "tiny_llama_plain plain attention" in line
    assert line.endswith("the difference between their rows is the attention implementation")
    assert line in summary_table(SessionView.of(_blocks(d))) and line in render_markdown(d)
    assert attention_lines(_blocks()) == []


# -- figures that cannot point two ways (issue 44, item 5) -----------------------------------

def test_a_per_token_median_and_a_rate_that_disagree_say_which_to_believe():
    """The steps of a generation ran at two machine speeds: the per-token median (the
    commonest step, here the fast one) and the median generation's rate part by more than
    the probe's straddle; the line, the generation table and report.md say to believe the
    rate. Where they agree, nothing is added."""
    from pytest_sme2.report.generation import rates_note
    from pytest_sme2.results.generation import PhaseStats

    steady = PhaseStats("decode", tokens=32, executes=32, median_ms=32.0, tokens_per_s=1000.0,
                        token_median_ms=1.0)
    assert rates_note(steady) == ""
    mixed = PhaseStats("decode", tokens=32, executes=32, median_ms=32.0, tokens_per_s=1000.0,
                       token_median_ms=0.6)
    note = rates_note(mixed)
    assert note.startswith("decode: the per-token median (0.600 ms, 1,667 tok/s) and the median "
                           "generation's rate (1,000 tok/s) are 1.67x apart")
    assert "believe the rate" in note

    d = single_doc()
    block = generation_block("8da8w", prompt=16, new=8, token_ms=0.05)
    block["generation"]["decode"]["token_median_ms"] = 0.03
    d["benchmarks"].append(block)
    lines = summary_table(SessionView.of(_blocks(d)))
    (row,) = [line for line in lines if line.startswith("test_llm[tiny_llama-8da8w-t1]")
              and "pp16, tg8" in line]
    assert "0.030*" in row
    assert any(line.startswith("* its decode steps ran at several machine speeds")
               for line in lines)
    assert "believe the rate" in render_markdown(d)
