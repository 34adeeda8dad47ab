"""The generation analysis on crafted ETDumps: phase tagging, warm-up, per-phase stats, TTFT,
categories, and its one-line errors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_sme2.analysis.phases import (GenerationAnalysisError, analyze_generation,
                                             phase_tags)
from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.runner_summary import GenerationSummary, parse_summary
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.results.generation import (Generation, GenerationResult, context_token_ids,
                                            llama_bench_name, parse_generate,
                                            prompt_token_ids)
from pytest_sme2.analysis.timing import clock_events
from tests.fakes.etdumps import execute_run, make_etdump

GEMM_P = "Fully Connected (NC, QD8, F32, QC4W) GEMM #1"
SDPA = "Softmax (NC, F32) #1"


def _generation_etdump(generations: int, prefill_executes: int, decode: int,
                       prefill_ns: int = 800_000, decode_ns: int = 200_000,
                       depth_executes: int = 0, depth_ns: int = 5_000_000) -> bytes:
    runs, t = [], 0
    for _ in range(generations):
        for k in range(depth_executes + prefill_executes + decode):
            dur = (depth_ns if k < depth_executes else
                   prefill_ns if k < depth_executes + prefill_executes else decode_ns)
            runs.append(execute_run(t, [(GEMM_P, dur * 3 // 4), (SDPA, dur // 4)]))
            t += dur + 10_000
    return make_etdump(runs)


def _summary(generations=4, warmup=1, prompt=16, new=5, dynamic=True, first_ms=0.05,
             depth=0, depth_executes=0):
    pre = 1 if dynamic else prompt
    return GenerationSummary(prompt_tokens=prompt, new_tokens=new, warmup=warmup,
                             generations=generations, prefill_executes=pre,
                             decode_executes=new, dynamic_shape=dynamic, depth=depth,
                             depth_executes=depth_executes,
                             tokens=tuple(range(new + 1)),
                             first_sampling_ms=(first_ms,) * generations,
                             sampling_ms=(0.2,) * generations,
                             generation_ms=(2.0,) * generations)


def test_phase_tags_split_each_generation():
    gen, pre = phase_tags(12, 3, 1, 3)
    assert gen.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert pre.tolist() == [True, False, False, False] * 3


def test_execute_count_mismatch_is_one_clear_error():
    with pytest.raises(GenerationAnalysisError, match=r"11 Method::execute events, but 3 "
                       r"generations of 1 prefill \+ 3 decode executes make 12"):
        phase_tags(11, 3, 1, 3)


def test_a_depth_fill_belongs_to_no_generation():
    gen, pre = phase_tags(10, 2, 1, 2, depth_executes=2)
    assert gen.tolist() == [-1, -1, 0, 0, 0, -1, -1, 1, 1, 1]
    assert pre.tolist() == [False, False, True, False, False] * 2


def test_a_count_without_the_depth_fill_names_it():
    with pytest.raises(GenerationAnalysisError, match=r"2 generations of 2 depth-fill \+ 1 "
                       r"prefill \+ 2 decode executes make 10"):
        phase_tags(6, 2, 1, 2, depth_executes=2)


def test_at_depth_the_fill_is_neither_prefill_nor_decode():
    """Five-millisecond fill executes before each prompt change no phase's figures."""
    s = _summary(depth=512, depth_executes=5)
    events = parse_etdump(_generation_etdump(4, 1, 5, depth_executes=5))
    r = analyze_generation(events, s)
    assert r.depth == 512 and r.depth_executes == 5
    assert r.depth_ms == pytest.approx(5 * 5.0002)     # counted apart: five 5 ms executes
    assert r.prefill.median_ms == pytest.approx(0.8002)
    assert r.decode.median_ms == pytest.approx(5 * 0.2002)
    assert r.decode.token_median_ms == pytest.approx(0.2002)
    assert sum(r.decode.categories_ms.values()) == pytest.approx(r.decode.median_ms)
    assert r.prefill.categories_ms["GEMM"] == pytest.approx(0.6)
    assert r.ttft_ms == pytest.approx(0.8002 + 0.05)
    assert (r.bench_name("prefill"), r.bench_name("decode")) == ("pp16 @ d512", "tg5 @ d512")


def test_dynamic_prefill_and_decode_stats():
    s = _summary()
    events = parse_etdump(_generation_etdump(4, 1, 5))
    r = analyze_generation(events, s)
    assert r.generations == 3 and r.warmup == 1
    # execute_run adds 200 ns of framework around the ops: Method::execute = ops + 200 ns
    assert r.prefill.median_ms == pytest.approx(0.8002)
    assert r.prefill.tokens_per_s == pytest.approx(16 / 0.8002 * 1e3)
    assert r.prefill.token_median_ms is None          # one execute of 16 tokens
    assert r.decode.median_ms == pytest.approx(5 * 0.2002)
    assert r.decode.tokens_per_s == pytest.approx(5 / (5 * 0.2002) * 1e3)
    assert r.decode.token_median_ms == pytest.approx(0.2002)
    assert r.decode.token_p90_ms == pytest.approx(0.2002)
    assert r.ttft_ms == pytest.approx(0.8002 + 0.05)
    assert r.prefill.categories_ms["GEMM"] == pytest.approx(0.6)
    assert r.decode.categories_ms["GEMM"] == pytest.approx(5 * 0.15)
    assert r.decode.categories_ms["Normalization"] == pytest.approx(5 * 0.05)
    assert sum(r.decode.categories_ms.values()) == pytest.approx(r.decode.median_ms)
    assert r.tokens == [0, 1, 2, 3, 4, 5]


def test_a_runner_timed_by_its_executes_alone_has_no_breakdown():
    """ExecuTorch's TextLLMRunner: our clock around each Method::execute, no operator traced:
    per-phase times and tokens, no categories (it once showed every category at 0 ms)."""
    s = replace(_summary(), runner_report={"runner": "text_llm_runner", "prefill_ms": 1.0})
    ms = [0.8 if k == 0 else 0.2 for _ in range(4) for k in range(6)]
    r = analyze_generation(clock_events(ms), s)
    assert r.prefill.median_ms == pytest.approx(0.8) and r.decode.median_ms == pytest.approx(1.0)
    assert r.prefill.categories_ms == {} and r.decode.categories_ms == {}
    assert r.runner_report == {"runner": "text_llm_runner", "prefill_ms": 1.0}


def test_token_by_token_prefill():
    s = _summary(generations=2, warmup=0, prompt=3, new=2, dynamic=False)
    events = parse_etdump(_generation_etdump(2, 3, 2, prefill_ns=300_000))
    r = analyze_generation(events, s)
    assert r.prefill.executes == 3
    assert r.prefill.median_ms == pytest.approx(3 * 0.3002)
    assert r.prefill.token_median_ms == pytest.approx(0.3002)


def test_warmup_generations_are_dropped():
    runs, t = [], 0
    for g in range(3):  # the first generation is slow: it must not count
        for k in range(3):
            dur = (5_000_000 if g == 0 else 100_000) * (2 if k == 0 else 1)
            runs.append(execute_run(t, [(GEMM_P, dur)]))
            t += dur + 1000
    s = _summary(generations=3, warmup=1, prompt=4, new=2)
    r = analyze_generation(parse_etdump(make_etdump(runs)), s)
    assert r.prefill.median_ms == pytest.approx(0.2002)
    assert r.decode.median_ms == pytest.approx(2 * 0.1002)
    # Each timed generation's phase time is kept (llama-bench's samples), warm-up left out.
    assert r.prefill.samples_ms == pytest.approx([0.2002, 0.2002])
    assert r.decode.samples_ms == pytest.approx([2 * 0.1002, 2 * 0.1002])


def test_prefill_only_process_has_no_decode_stats():
    s = _summary(generations=1, warmup=0, prompt=8, new=0)
    r = analyze_generation(parse_etdump(_generation_etdump(1, 1, 0)), s)
    assert r.prefill.median_ms == pytest.approx(0.8002)
    assert r.decode.executes == 0 and r.decode.median_ms is None


def test_all_warmup_is_an_error():
    s = _summary(generations=2, warmup=2)
    with pytest.raises(GenerationAnalysisError, match="leave none"):
        analyze_generation(parse_etdump(_generation_etdump(2, 1, 5)), s)


def test_result_round_trips_through_json():
    s = _summary()
    sme2 = KernelSources(device_sme2=True)
    r = analyze_generation(parse_etdump(_generation_etdump(4, 1, 5)), s, prefill=sme2, decode=sme2)
    d = r.to_json()
    back = GenerationResult.from_json(d)
    assert back.to_json() == d
    assert back.decode.kernel_evidence is not None
    assert back.ttft_ms == r.ttft_ms


def test_summary_line_with_generation_parses():
    line = ('{"threads": 1, "executions": 21, "program_load_ms": 0.28, "method_load_ms": 1.7, '
            '"rss_before_load_kb": 5256, "rss_after_load_kb": 7552, "peak_rss_kb": 12192, '
            '"generation": {"prompt_tokens": 8, "new_tokens": 6, "warmup": 1, "generations": 3, '
            '"prefill_executes": 1, "decode_executes": 6, "dynamic_shape": true, '
            '"use_kv_cache": true, "max_seq_len": 128, "max_context_len": 128, '
            '"vocab_size": 512, "prompt": [14, 268], "tokens": [3, 9, 9], '
            '"prefill_ms": [5.9, 0.8, 0.9], "first_sampling_ms": [0.001, 0.001, 0.001], '
            '"sampling_ms": [0.004, 0.004, 0.003], "decode_ms": [7.1, 11.0, 2.2], '
            '"generation_ms": [13.0, 11.8, 3.1]}}')
    s = parse_summary("Generation 1 of 2: prefill 0.8 ms\n" + line + "\n")
    assert s.executions == 21 and s.generation is not None
    g = s.generation
    assert g.executes_per_generation == 7 and g.tokens == (3, 9, 9) and g.max_seq_len == 128
    assert parse_summary('{"threads": 1}').generation is None


def test_prompt_ids_are_fixed_and_in_range():
    ids = prompt_token_ids(64, 512)
    assert ids[:3] == [14, 268, 11]  # the native runner printed these for vocab 512
    assert min(ids) >= 1 and max(ids) < 512


def test_phase_only_generations():
    g = Generation(64, 32)
    assert g.prefill_only() == Generation(64, 0)
    assert g.decode_only() == Generation(1, 31)       # one-token executes at positions 0..31
    assert g.decode_only().executes(dynamic_shape=True) == 32
    assert g.executes(dynamic_shape=False) == 96
    with pytest.raises(ValueError):
        Generation(0, 3)


def test_a_generation_at_depth():
    g = Generation(64, 32, depth=512)
    assert g.positions == 608 and g.arg == "64,32,512"
    assert parse_generate("64,32,512") == g and parse_generate("64,32") == Generation(64, 32)
    assert parse_generate("1,31,512,1") == Generation(1, 31, 512, 1)
    # Phase-only processes fill the same depth; the decode-only one token by token, so that it
    # runs only one-token executes (decode kernels).
    assert g.prefill_only() == Generation(64, 0, 512)
    assert g.decode_only() == Generation(1, 31, 512, 1) and g.decode_only().arg == "1,31,512,1"
    for bad in ("64", "64,32,x", "64,32,-1", "1,2,3,4,5"):
        with pytest.raises(ValueError, match="--generate"):
            parse_generate(bad)


def test_the_depth_fill_and_the_prompt_are_one_fixed_sequence():
    fill, prompt = context_token_ids(3, 64, 512)
    assert fill + prompt == prompt_token_ids(67, 512) and len(prompt) == 64
    assert context_token_ids(0, 64, 512) == ([], prompt_token_ids(64, 512))


def test_llama_bench_names():
    assert llama_bench_name("prefill", 64) == "pp64"
    assert llama_bench_name("decode", 32) == "tg32"
    assert llama_bench_name("decode", 32, 512) == "tg32 @ d512"
