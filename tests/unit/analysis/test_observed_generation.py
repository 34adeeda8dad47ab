"""A llama_main's generation (pytest_sme2.analysis.observed_generation): its ETDump holds the
constant methods' executes and a warm-up generation before the timed one; the timed one is the
last prefill + decode forwards; its report makes the summary. The whole path with a stand-in
llama_main: tests/plugin/test_plugin_llama_main.py."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.phases import analyze_generation
from pytest_sme2.analysis.llm_observer import parse_observer_line
from pytest_sme2.analysis.observed_generation import (ObservedGenerationError, forward_runs,
                                                      forwards_only, observed_summary,
                                                      observer_report, report_line,
                                                      timed_generation)
from pytest_sme2.readers.etdump import read_etdump
from tests.fakes.etdumps import execute_run, make_etdump

REPORT = parse_observer_line(
    'PyTorchObserver {"prefill_token_per_sec":2000,"decode_token_per_sec":500,'
    '"prompt_tokens":8,"generated_tokens":3,"model_load_start_ms":1000,'
    '"model_load_end_ms":1040,"inference_start_ms":2000,"inference_end_ms":2010,'
    '"prompt_eval_end_ms":2004,"first_token_ms":2004,"aggregate_sampling_time_ms":1,'
    '"SCALING_FACTOR_UNITS_PER_SECOND":1000}')


@pytest.fixture
def etdump(tmp_path):
    """Five constant methods (an execute with nothing in it), a warm-up of 1 + 6 forwards,
    then the timed 1 + 3: prefills cost 4 ms, decode steps 1 ms (+0.1 per position)."""
    runs, t = [], 0
    for _ in range(5):
        runs.append([e for e in execute_run(t, []) if e.name == "Method::execute"])
        t += 10_000
    for steps in (6, 3):
        runs.append(execute_run(t, [("Fully Connected (NC, QP8, F32, QC8W) #1", 4_000_000)]))
        t += 5_000_000
        for k in range(steps):
            runs.append(execute_run(t, [("Fully Connected (NC, QP8, F32, QC8W) #1",
                                         1_000_000 + 100_000 * k)]))
            t += 2_000_000
    path = tmp_path / "llama_main.etdump"
    path.write_bytes(make_etdump(runs))
    return read_etdump(path)


def test_the_constant_methods_executes_are_not_forwards(etdump):
    assert forward_runs(etdump).tolist() == list(range(5, 5 + 7 + 4))
    process = forwards_only(etdump)           # the process's start-up: its first forward
    assert sorted(set(process["run"])) == [-1, *range(11)]
    first = process[(process["run"] == 0) & (process["name"] == "Method::execute")]
    assert float(first["duration_ms"].iloc[0]) > 4.0            # the warm-up's prefill


def test_the_timed_generation_is_the_last_prefill_and_decode_forwards(etdump):
    summary = observed_summary(REPORT, dynamic_shape=True, max_seq_len=128).generation
    assert (summary.prefill_executes, summary.decode_executes, summary.generations,
            summary.warmup) == (1, 3, 1, 0)
    events = timed_generation(etdump, summary.executes_per_generation, "x.etdump")
    assert sorted(set(events["run"])) == [-1, 0, 1, 2, 3]
    g = analyze_generation(events, summary, source="x.etdump")
    assert g.prefill.median_ms == pytest.approx(4.0, abs=0.01)          # the timed prefill
    assert g.decode.executes == 3 and g.decode.token_median_ms == pytest.approx(1.1, abs=0.01)
    assert g.prompt_tokens == 8 and g.new_tokens == 3


def test_summary_from_the_report():
    s = observed_summary(REPORT, dynamic_shape=True, max_seq_len=128)
    assert s.program_load_ms is None      # its load covers the ETDump's method loads
    g = s.generation
    assert g.prefill_ms == (4.0,) and g.decode_ms == (6.0,) and g.first_sampling_ms == (0.0,)
    assert observed_summary(REPORT, dynamic_shape=False).generation.prefill_executes == 8
    # a prompt longer than one forward takes is prefilled in chunks of max_seq_len
    assert observed_summary(REPORT, dynamic_shape=True, max_seq_len=3
                            ).generation.prefill_executes == 3


def test_fewer_forwards_than_reported_is_one_line(etdump):
    with pytest.raises(ObservedGenerationError, match=r"^x.etdump: 11 executes of forward in "
                       r"the ETDump, fewer than the 12 of the generation the runner reported"):
        timed_generation(etdump, 12, "x.etdump")


def test_no_report_is_one_line():
    with pytest.raises(ObservedGenerationError, match=r"^runner 'llm': the runner printed "
                       r"neither our generation summary nor a PyTorchObserver report"):
        observer_report("I 00:00:01 loading...\n", "runner 'llm'")
    two = 'PyTorchObserver {"prompt_tokens": 5}\nI log\nPyTorchObserver {"prompt_tokens": 2}\n'
    assert observer_report(two, "r").prompt_tokens == 2          # the last report


def test_the_report_in_words():
    assert report_line(REPORT) == ("prefill 2,000.0 tok/s, decode 500.0 tok/s, TTFT 4.0 ms, "
                                   "load 40.0 ms (8 prompt + 3 generated tokens)")
