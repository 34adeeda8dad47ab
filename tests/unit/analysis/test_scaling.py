"""Thread scaling of LLM generations (issue 38, part 4): speed-up, efficiency and where scaling
stops, from synthetic generation blocks."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.scaling import shared_unit_note, thread_scaling
from pytest_sme2.results import load_results
from tests.fakes.results_docs import (ANDROID, INT8_DECODE, INT8_PREFILL, QEMU_SME2,
                                      generation_block, single_doc)


def _doc(points, device=None, scheme="8da8w", mask=None, **kw):
    """``points``: threads -> (prefill ms, decode token ms)."""
    d = single_doc()
    for t, (pre, tok) in points.items():
        b = generation_block(scheme, prefill_ms=pre, token_ms=tok, device=device,
                             nodeid=f"b.py::test_llm[tiny_llama-{scheme}-t{t}]", **kw)
        b["threads"] = t
        if mask:
            b["cpu_mask"] = mask
        d["benchmarks"].append(b)
    return load_results(d).benchmarks


def test_speedup_efficiency_and_where_scaling_stops():
    [s] = thread_scaling(_doc({1: (16.0, 1.0), 2: (8.4, 0.55), 4: (8.2, 0.53)}))
    assert s.base_threads == 1 and [p.phase for p in s.phases] == ["prefill", "decode"]
    pre = s.phase("prefill")
    assert [p.threads for p in pre.points] == [1, 2, 4]
    assert pre.points[1].speedup == pytest.approx(16.0 / 8.4)
    assert pre.points[1].efficiency == pytest.approx(16.0 / 8.4 / 2)
    # 2 -> 4: +2.4%, below 10% of the ideal +100%: stops at 4
    assert pre.stops_at == 4 and pre.ideal_pct == pytest.approx(100.0)
    assert pre.summary == "stops at 4 threads: +2% over 2 (ideal +100%, noise 4%)"


def test_a_gain_within_noise_stops_scaling():
    """2 -> 4 threads gains 15% (above 10% of ideal) but the blocks' CV is 20%: noise."""
    blocks = _doc({1: (16.0, 1.0), 2: (8.0, 0.5), 4: (8.0 / 1.15, 0.5 / 1.15)})
    for b in blocks:
        if b.generation is not None and b.threads == 4:
            b.generation.decode.cv_pct = 20.0
    decode = thread_scaling(blocks)[0].phase("decode")
    assert decode.stops_at == 4 and decode.noise_pct == 20.0


def test_scaling_throughout_and_without_one_thread():
    [s] = thread_scaling(_doc({2: (16.0, 1.0), 4: (8.0, 0.5)}))
    assert s.base_threads == 2
    decode = s.phase("decode")
    assert decode.stops_at is None and decode.points[1].efficiency == pytest.approx(1.0)
    assert decode.summary == "scales through 4 threads: +100% over 2 (ideal +100%, noise 4%)"


def test_one_thread_count_is_no_series_and_forward_passes_are_ignored():
    assert thread_scaling(_doc({1: (16.0, 1.0)})) == []
    assert thread_scaling(load_results(single_doc()).benchmarks) == []


def test_pinned_cpus_come_from_the_mask():
    [s] = thread_scaling(_doc({1: (16.0, 1.0), 2: (8.0, 0.5)}, device=ANDROID, mask="f0"))
    assert s.phase("decode").points[0].cpus == "4,5,6,7"


def test_shared_unit_note():
    host = thread_scaling(_doc({1: (16.0, 1.0), 2: (8.0, 0.5)}))[0]
    assert shared_unit_note(host) == "vm has no SME2: no shared SME2 unit to stop decode scaling"
    qemu = thread_scaling(_doc({1: (16.0, 1.0), 2: (8.0, 0.5)}, device=QEMU_SME2))[0]
    assert shared_unit_note(qemu).startswith("emulated CPU")
    phone = thread_scaling(_doc({1: (16.0, 1.0), 2: (15.8, 0.99)}, device=ANDROID,
                                prefill_kernels=INT8_PREFILL, decode_kernels=INT8_DECODE))[0]
    assert phone.phase("decode").stops_at == 2
    assert shared_unit_note(phone) == ("decode scaling stops at 2 threads, where the cluster's "
                                       "SME2 unit is first shared (one unit per cluster assumed)")
