"""The Chrome/Perfetto trace of one run: checked the way ui.perfetto.dev and chrome://tracing
parse it (a traceEvents object, complete events properly nested per thread), not by eye."""

from __future__ import annotations

import json

import pytest

from pytest_sme2.analysis.summary import analyze
from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.measure.artifacts.trace import TRACE_SCHEMA, median_run, trace_events, write_trace
from pytest_sme2.results import BlockResult, RunContext
from tests.fakes.etdumps import Ev, make_etdump, program_run

EPS_US = 1e-6  # float rounding of ns -> us; the viewers read ts back to whole ns


def check_viewer_parse(trace: dict) -> list[dict]:
    """What a trace-event viewer needs: a JSON object with a ``traceEvents`` list; every event
    with ph/ts/pid/tid/name (and dur >= 0 for "X"); complete events on one thread begin in
    non-decreasing ts order and nest properly (each inside the slice open around it), so a
    stack can be drawn. Returns the X events with their depth."""
    trace = json.loads(json.dumps(trace))             # what a viewer gets: plain JSON
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace["displayTimeUnit"] in ("ms", "ns")
    by_tid: dict[tuple, list[dict]] = {}
    for e in trace["traceEvents"]:
        for key in ("ph", "ts", "pid", "tid", "name"):
            assert key in e, (key, e)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            by_tid.setdefault((e["pid"], e["tid"]), []).append(e)
        else:
            assert e["ph"] == "M", e
    out = []
    for events in by_tid.values():
        stack: list[dict] = []
        last = float("-inf")
        for e in events:
            assert e["ts"] >= last, ("begin order", e)
            last = e["ts"]
            while stack and not _inside(e, stack[-1]) and \
                    e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS_US:
                stack.pop()                              # the open slice ended before e
            if stack:                                    # else e would overlap it partly
                assert _inside(e, stack[-1]), ("not nested", stack[-1], e)
            e["depth"] = len(stack)
            out.append(e)
            stack.append(e)
    return out


def _inside(child: dict, parent: dict) -> bool:
    return (parent["ts"] - EPS_US <= child["ts"] and
            child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + EPS_US)


def _frame(e2e_extra_ns=(0, 300, 100, 200, 50), **kw):
    """Five runs of two XNNPACK operators in a delegate and one portable kernel; run i's
    operators take ``e2e_extra_ns[i]`` ns longer, so the median run is known."""
    runs = []
    for i, extra in enumerate(e2e_extra_ns):
        runs.append(program_run(1_000_000 * (i + 1), [
            ("delegate", 0, [("Convolution (NHWC, PF32) IGEMM #1", 4000 + extra),
                             ("Fully Connected (NC, F32) #1", 1000)]),
            ("portable", 1, [("aten_add", 700)])], **kw))
    return parse_etdump(make_etdump(runs))


def test_synthetic_run_is_nested_and_matches_the_analysis():
    events = _frame()
    analysis = analyze(events, warmup=1)
    trace = trace_events(analysis.events, warmup=1)
    slices = check_viewer_parse(trace)
    # timed runs 1..4 take +300, +100, +200, +50: sorted 50, 100, 200, 300, the median (the
    # lower of the middle two) is +100, run 2
    assert trace["otherData"]["run"] == 2 == median_run(events, warmup=1)
    assert trace["otherData"]["schema"] == TRACE_SCHEMA
    by_name = {e["name"]: e for e in slices}
    outer = by_name["Method::execute"]
    assert outer["ts"] == 0 and outer["depth"] == 0
    assert outer["dur"] == pytest.approx(analysis.e2e_all[2] * 1000, abs=EPS_US)
    assert trace["otherData"]["e2e_ms"] == pytest.approx(analysis.e2e_all[2])
    assert by_name["DELEGATE_CALL"]["depth"] == by_name["OPERATOR_CALL"]["depth"] == 1
    conv = by_name["Convolution (NHWC, PF32) IGEMM #1"]
    assert conv["depth"] == 2 and conv["dur"] == pytest.approx(4.1)   # 4000 + 100 ns
    assert conv["cat"] == "operator"
    assert conv["args"] == {"category": "Convolution", "backend": "delegate",
                            "delegated": True, "instruction_id": 0}
    kernel = by_name["native_call_aten_add.out"]
    assert kernel["depth"] == 2 and kernel["args"]["backend"] == "portable"
    assert kernel["args"]["delegated"] is False and kernel["args"]["instruction_id"] == 1
    assert by_name["DELEGATE_CALL"]["cat"] == "delegate"
    assert len(slices) == trace["otherData"]["events"] == 6      # one run only
    assert trace["otherData"]["clipped"] == 0


def test_raw_frame_and_an_explicit_run():
    events = _frame()
    trace = trace_events(events, run=0)          # not annotated: annotated on the way
    slices = check_viewer_parse(trace)
    assert trace["otherData"]["run"] == 0
    assert {e["args"]["category"] for e in slices} >= {"Convolution", ""}
    with pytest.raises(Sme2Error, match="no events for run 9"):
        trace_events(events, run=9)
    with pytest.raises(Sme2Error, match="leaves no timed runs"):
        trace_events(events, warmup=5)


def test_spilling_and_simultaneous_events_still_nest():
    """An operator ending after its delegate call, one starting before Method::execute, and a
    zero-length event at the tick its neighbour starts: clipped into place, never overlapping."""
    t0 = 1_000_000
    run = [Ev(None, t0 + 100, t0 + 600, 0, debug="A #1"),
           Ev(None, t0 + 600, t0 + 600, 0, debug="B #1"),
           Ev(None, t0 + 600, t0 + 900, 0, debug="C #1"),      # spills past DELEGATE_CALL
           Ev("DELEGATE_CALL", t0 + 50, t0 + 800, 0),
           Ev("OPERATOR_CALL", t0 - 20, t0 + 30, 1),            # starts before execute
           Ev("Method::execute", t0, t0 + 1000, 0)]
    trace = trace_events(parse_etdump(make_etdump([run])))
    slices = check_viewer_parse(trace)
    by_name = {e["name"]: e for e in slices}
    assert by_name["C #1"]["args"]["clipped_ns"] == 100
    assert by_name["C #1"]["dur"] == pytest.approx(0.2)
    assert by_name["OPERATOR_CALL"]["ts"] == 0 and by_name["OPERATOR_CALL"]["dur"] == 0.03
    assert by_name["Method::execute"]["dur"] == 1.0
    assert trace["otherData"]["clipped"] == 2


def test_write_trace_and_the_results_key(tmp_path):
    path = write_trace(_frame(), tmp_path / "sub" / "native.trace.json", warmup=1)
    check_viewer_parse(json.loads(path.read_text()))
    ctx = RunContext(block=0, trace=str(path))
    assert ctx.to_json()["trace"] == str(path)
    assert "trace" not in RunContext(block=0).to_json()   # older documents write back as read
    d = {"nodeid": "n", "model": "m", "dtype": "fp32", "threads": 1, "runner": "native",
         "device": {}, "runs": 1, "warmup": 0, "e2e_ms": [1.0], "etdump": "e", "pte": "p",
         "e2e": {"n": 1, "median_ms": 1.0, "mean_ms": 1.0, "p10_ms": 1.0, "p90_ms": 1.0,
                 "min_ms": 1.0, "max_ms": 1.0, "std_ms": 0.0, "cv_pct": 0.0, "mad_ms": 0.0,
                 "outliers": 0}, "trace": str(path)}
    r = BlockResult.from_json(d)
    assert r.context.trace == str(path) and "trace" not in r.extra
    assert r.to_json()["trace"] == str(path)




def _generation_frame(prefill_ns=(9000, 20000, 8000, 12000), decode_ns=1000, decode=3,
                      fill=(0, 0, 0, 0)):
    """Four generations (one warm-up) of one prefill execute (its GEMM takes
    ``prefill_ns[g]``) and ``decode`` one-token executes, 1 ms apart; ``fill[g]`` ns: one
    depth-fill execute first in each generation (none where no value is given)."""
    runs, t = [], 1_000_000
    for pre, ns_fill in zip(prefill_ns, fill):
        if ns_fill:
            runs.append(program_run(t, [("delegate", 0, [("Fully Connected (NC, QP8) #1",
                                                          ns_fill)])]))
            t += 1_000_000
        for i in range(1 + decode):
            ns = pre if i == 0 else decode_ns + 10 * i
            runs.append(program_run(t, [("delegate", 0, [("Fully Connected (NC, QP8) #1", ns)]),
                                        ("portable", 1, [("aten_add", 300)])]))
            t += 1_000_000
    return parse_etdump(make_etdump(runs))


def test_the_median_generation_at_depth_leaves_the_fill_out():
    from pytest_sme2.measure.artifacts.trace import (GenerationLoop, generation_trace_events,
                                                     median_generation)

    # With its fill (90 us) generation 2 would be the slowest and 1 the median; without: 3.
    events = _generation_frame(fill=(1000, 1000, 90000, 1000))
    loop = GenerationLoop(4, 1, 3, warmup=1, depth_executes=1)
    assert median_generation(events, loop) == (3, [16, 17, 18, 19])
    assert generation_trace_events(events, loop)["otherData"]["runs"] == [16, 17, 18, 19]


def test_a_generation_is_drawn_whole_with_its_phases_marked():
    from pytest_sme2.measure.artifacts.trace import (GenerationLoop, generation_trace_events,
                                                     median_generation)

    events = _generation_frame()
    # timed generations 1..3 take 20000, 8000, 12000 ns of prefill (+ the same decode): the
    # median is generation 3, runs 12..15
    assert median_generation(events, GenerationLoop(4, 1, 3, warmup=1)) == (3, [12, 13, 14, 15])
    trace = generation_trace_events(events, GenerationLoop(4, 1, 3, warmup=1))
    slices = check_viewer_parse(trace)
    assert trace["otherData"]["generation"] == 3 and trace["otherData"]["runs"] == [12, 13, 14, 15]
    phases = [e for e in slices if e["cat"] == "phase"]
    assert [(p["name"], p["depth"]) for p in phases] == [("prefill", 0), ("decode", 0)]
    executes = [e for e in slices if e["name"] == "Method::execute"]
    assert [e["depth"] for e in executes] == [1, 1, 1, 1]
    assert [e["args"]["phase"] for e in executes] == ["prefill", "decode", "decode", "decode"]
    assert [e["args"].get("token") for e in executes] == [None, 1, 2, 3]
    assert executes[0]["ts"] == 0 and executes[1]["ts"] == pytest.approx(1000.0)  # 1 ms later
    gemm = [e for e in slices if e["name"] == "Fully Connected (NC, QP8) #1"]
    assert gemm[0]["dur"] == pytest.approx(12.0) and gemm[0]["args"]["phase"] == "prefill"
    assert all(e["args"]["phase"] == "decode" for e in gemm[1:])
    decode = phases[1]
    assert decode["ts"] == executes[1]["ts"]
    assert decode["ts"] + decode["dur"] == pytest.approx(executes[3]["ts"] + executes[3]["dur"])
    assert trace["otherData"]["events"] == len(slices) - 2


def test_a_generation_trace_is_written_and_refuses_a_wrong_loop(tmp_path):
    from pytest_sme2.analysis.phases import GenerationAnalysisError
    from pytest_sme2.measure.artifacts.trace import GenerationLoop, write_generation_trace

    events = _generation_frame()
    path = write_generation_trace(events, tmp_path / "g.trace.json", GenerationLoop(4, 1, 3, 1),
                                  source="x.etdump")
    trace = json.loads(path.read_text())
    check_viewer_parse(trace)
    assert trace["otherData"]["source"] == "x.etdump"
    with pytest.raises(GenerationAnalysisError, match="16 Method::execute events"):
        write_generation_trace(events, tmp_path / "bad.json", GenerationLoop(4, 1, 4))
    with pytest.raises(Sme2Error, match="leaves none"):
        write_generation_trace(events, tmp_path / "bad.json", GenerationLoop(4, 1, 3, 4))
