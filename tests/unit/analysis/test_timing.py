"""Timed runs apart from traced runs: the runner's clock as Method::execute events, the
Python bindings' own time taken off, a runner that traced its timed runs kept as one frame."""

import json

import numpy as np
import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.analysis.runner_summary import GenerationSummary, parse_summary
from pytest_sme2.analysis.timing import (NATIVE_CLOCK, PYTHON_CLOCK, THROUGH_TRACER,
                                         TimingError, clock_events, process_runs,
                                         traced_generation, with_traced_e2e)
from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.readers.etdump import EVENT_COLUMNS, parse_etdump
from pytest_sme2.results.timing import TRACED, UNTRACED, Timing
from tests.fakes.etdumps import execute_run, make_etdump


def _traced_events(durations_ns: list[int]):
    """An ETDump of one Execute run per duration (Method::execute around one delegate op)."""
    runs, t = [], 1_000
    for d in durations_ns:
        runs.append(execute_run(t, [("Convolution (NHWC, F32) IGEMM #1", d - 200)]))
        t += d + 1_000
    return parse_etdump(make_etdump(runs))


def _summary(**keys) -> str:
    base = {"threads": 1, "executions": 4, "program_load_ms": 0.1, "method_load_ms": 0.3}
    return json.dumps({**base, **keys})


def test_clock_events_are_one_method_execute_per_execute_in_the_readers_columns():
    frame = clock_events([0.5, 0.25, 0.125])
    assert list(frame.columns) == EVENT_COLUMNS
    assert e2e_per_run(frame).tolist() == [0.5, 0.25, 0.125]
    assert (frame["end"] - frame["start"]).tolist() == [500_000, 250_000, 125_000]
    assert (frame["start"].to_numpy()[1:] == frame["end"].to_numpy()[:-1]).all()


def test_an_untraced_native_process_is_timed_by_its_clock_and_broken_down_by_its_etdump():
    traced = _traced_events([70_000, 66_000, 65_000])
    summary = parse_summary(_summary(
        timing="untraced", clock_overhead_ns=20.0, execute_ms=[0.3, 0.061, 0.06, 0.062],
        traced={"warmup": 1, "runs": 2, "executions": 3}))
    runs = process_runs(traced, summary, warmup=1, source="x.etdump")
    assert runs.separate and runs.timing.mode == UNTRACED and runs.timing.source == NATIVE_CLOCK
    assert e2e_per_run(runs.timed).tolist() == [0.3, 0.061, 0.06, 0.062]
    assert runs.traced is traced and runs.traced_warmup == 1
    assert runs.timing.traced_runs == 2 and runs.timing.clock_overhead_ns == 20.0


def test_a_runner_that_traced_its_timed_runs_gives_one_frame_for_both():
    traced = _traced_events([70_000, 66_000])
    runs = process_runs(traced, parse_summary(_summary()), warmup=1, source="x.etdump")
    assert not runs.separate and runs.timed is traced and runs.traced is traced
    assert runs.timing == Timing(TRACED, THROUGH_TRACER)
    with pytest.raises(TimingError, match="traced its runs but left no ETDump"):
        process_runs(None, parse_summary(_summary()), 1, "x.etdump")


def test_an_untraced_summary_without_its_clock_is_one_line():
    with pytest.raises(TimingError, match="printed no execute_ms"):
        process_runs(None, parse_summary(_summary(timing="untraced")), 0, "x.etdump")


def test_the_python_runners_clock_is_said_as_what_it_spans():
    traced = _traced_events([60_000, 62_000])
    summary = parse_summary(_summary(
        timing="untraced", execute_span="ExecuTorchMethod.execute()", execute_ms=[0.2, 0.07],
        traced={"warmup": 1, "runs": 1, "executions": 2}))
    runs = process_runs(traced, summary, warmup=1, source="x.etdump")
    assert e2e_per_run(runs.timed).tolist() == [0.2, 0.07]
    assert runs.timing.source == PYTHON_CLOCK and "one call into the Python bindings" in \
        PYTHON_CLOCK


def test_what_tracing_added_is_the_traced_median_over_the_untraced_one():
    timing = Timing(UNTRACED, NATIVE_CLOCK, traced_runs=10)
    traced = latency_stats(np.array([0.28, 0.29, 0.30]))
    out = with_traced_e2e(timing, traced, timed_median_ms=0.19)
    assert out.traced_median_ms == 0.29 and out.traced_mean_ms == pytest.approx(0.29)
    assert out.overhead_pct == pytest.approx(52.63, abs=0.01)
    # A runner that timed through its tracer has nothing beside it to compare.
    through = Timing(TRACED, THROUGH_TRACER)
    assert with_traced_e2e(through, traced, 0.29) is through


def test_the_traced_generations_keep_the_loop_and_drop_the_timed_passes_timers():
    timed = GenerationSummary(prompt_tokens=8, new_tokens=4, warmup=3, generations=33,
                              prefill_executes=1, decode_executes=4, dynamic_shape=True,
                              prefill_ms=(1.0,) * 33, decode_ms=(2.0,) * 33)
    traced = traced_generation(timed, traced_warmup=3, traced_runs=10)
    assert (traced.generations, traced.warmup, traced.executes_per_generation) == (13, 3, 5)
    assert traced.prefill_ms == () and traced.decode_ms == ()
