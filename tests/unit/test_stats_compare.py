import json
from dataclasses import replace
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.measure.comparison import check_outputs, make_comparison
from pytest_sme2.stats import FASTER, SAME, SLOWER, verdict
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results import BlockResult, ResultAnalysis, RunContext
from pytest_sme2.stats import (Interval, bootstrap_ratio_of_medians, noise_floor, paired_ratio,
                               t_quantile)

DATA = Path(__file__).parents[1] / "data" / "speed_states"


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764),
                                         (5, 2.5706), (9, 2.2622), (30, 2.0423)])
def test_t_quantile_close_to_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=2e-3)


def test_paired_ratio_exact_when_every_pair_agrees():
    iv = paired_ratio([2.0, 4.0, 3.0, 1.0, 5.0, 6.0], [1.0, 2.0, 1.5, 0.5, 2.5, 3.0])
    assert (iv.point, iv.low, iv.high) == pytest.approx((2.0, 2.0, 2.0))


def test_the_signed_rank_distribution_is_exact():
    from pytest_sme2.stats import _signed_rank_cdf

    # n = 3: W+ takes 0..6 with counts 1 1 1 2 1 1 1 of 8 sign assignments
    assert _signed_rank_cdf(3) == pytest.approx(np.cumsum([1, 1, 1, 2, 1, 1, 1]) / 8)
    # the 2.5% critical value of W+ for n = 10 is 8 (tables): P(W+ <= 8) <= 0.025 < P(<= 9)
    cdf = _signed_rank_cdf(10)
    assert cdf[8] <= 0.025 < cdf[9]


def test_hodges_lehmann_matches_hand_computation():
    from pytest_sme2.stats import hodges_lehmann

    # 6 values: 21 Walsh averages, the 95% interval from the first and last (k = 1)
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 16.0]
    walsh = sorted((x[i] + x[j]) / 2 for i in range(6) for j in range(i, 6))
    point, low, high = hodges_lehmann(x)
    assert point == pytest.approx(float(np.median(walsh)))
    assert (low, high) == (walsh[0], walsh[-1])
    # five values: no 95% interval exists (1/32 > 2.5%)
    assert hodges_lehmann(x[:5])[1:] == (-math.inf, math.inf)


def test_a_few_pairs_at_another_machine_speed_do_not_swing_the_ratio():
    """The 40 pairs of a session on a VM that switched between two speeds 1.8x apart
    (tests/data/speed_states/runners_agree_40_pairs.json): the t-interval on the mean log
    ratio read python/native 1.056 [0.974, 1.145] and could not tell; the same pairs' robust
    interval reads the steady ~4% the runners differ by."""
    d = json.loads((DATA / "runners_agree_40_pairs.json").read_text())
    iv = paired_ratio(d["candidate_block_medians_ms"], d["base_block_medians_ms"])
    assert 1 / iv.point == pytest.approx(1.040, abs=0.002)
    assert (1 / iv.high, 1 / iv.low) == pytest.approx((1.020, 1.062), abs=0.002)


def test_paired_ratio_rejects_bad_input():
    with pytest.raises(Sme2Error, match="paired blocks needed"):
        paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(Sme2Error, match="positive"):
        paired_ratio([0.0, 1.0], [1.0, 1.0])


def test_bootstrap_ratio_of_medians():
    iv = bootstrap_ratio_of_medians([2.0, 2.1, 1.9, 2.0], [1.0, 1.05, 0.95, 1.0])
    assert iv.point == pytest.approx(2.0)
    assert 1.7 < iv.low <= 2.0 <= iv.high < 2.3


@pytest.mark.parametrize("iv,expected", [
    (Interval(1.6, 1.5, 1.7), FASTER),
    (Interval(1.01, 1.005, 1.015), SAME),     # significant but below the 2% noise margin
    (Interval(0.7, 0.6, 0.8), SLOWER),
    (Interval(1.1, 0.9, 1.3), SAME),
])
def test_verdict(iv, expected):
    assert verdict(iv) == expected


def test_check_outputs():
    a = [np.array([1.0, -2.0], dtype=np.float32)]
    assert check_outputs(a, [a[0] + 1e-5], "fp32").equal
    bad = check_outputs(a, [a[0] + 0.1], "fp32")
    assert not bad.equal and bad.max_abs_diff == pytest.approx(0.1, rel=1e-5)
    assert not check_outputs(a, [np.zeros(3, dtype=np.float32)], "fp32").equal


def _result(runner, i, median, cats):
    samples = [median] * 3
    return BlockResult(nodeid=f"t[{runner}#{i}]", model="m", dtype="fp16", threads=1,
                           runner={"name": runner}, device={}, runs=3, warmup=0, e2e_ms=samples,
                           e2e=latency_stats(samples), etdump="", pte="",
                           analysis=ResultAnalysis(categories_ms=cats), context=RunContext(block=i))


def test_comparison_of_blocks():
    off = [_result("off", i, 4.0 * f, {"GEMM": 3.0 * f, "Data Movement": 1.0 * f, "Other": 0.0})
           for i, f in enumerate([1.0, 1.02, 0.98, 1.01, 0.99, 1.0])]
    on = [_result("on", i, 2.0 * f, {"GEMM": 1.0 * f, "Data Movement": 1.0 * f, "Other": 0.0})
          for i, f in enumerate([1.0, 1.02, 0.98, 1.01, 0.99, 1.0])]
    cmp = make_comparison(off, on, nodeid="t.py::test_c")
    assert cmp.speedup.point == pytest.approx(2.0)
    assert cmp.verdict == FASTER
    assert cmp.category_speedups["GEMM"].point == pytest.approx(3.0)
    assert cmp.category_speedups["Data Movement"].point == pytest.approx(1.0)
    assert cmp.category_speedups["Other"] is None  # no time on either side: no ratio
    doc = cmp.to_json()
    assert doc["base"] == "off" and doc["candidate"] == "on" and doc["nodeid"] == "t.py::test_c"
    assert doc["base_block_medians_ms"] == pytest.approx([4.0, 4.08, 3.92, 4.04, 3.96, 4.0])
    assert doc["base_median_ms"] == 4.0 and doc["candidate_median_ms"] == 2.0  # of the blocks
    assert "speed-up 2.000x" in str(cmp)


def test_comparison_needs_paired_blocks():
    with pytest.raises(Sme2Error, match="same number"):
        make_comparison([_result("a", 0, 1.0, {})], [_result("b", 0, 1.0, {})])


def test_few_sessions_get_a_floor_of_at_least_25_percent():
    floor, source = noise_floor([[1.0]])
    assert floor == 0.25 and source == "1 block(s) of 1 session(s), at least 25% below 3 sessions"
    floor, source = noise_floor([[1.0, 1.01, 0.99]])
    assert floor == 0.25 and source.startswith("3 block(s) of 1 session(s)")
    floor, _ = noise_floor([[1.0, 1.1], [1.6, 1.5]])   # two sessions 50% apart
    assert floor > 0.5
    floor, source = noise_floor([[1.0], [1.01], [0.99], [1.0]])
    assert floor < 0.1 and source == "4 sessions"


WOBBLE = (1.0, 1.01, 0.99, 1.005, 0.995, 1.0)


@pytest.mark.parametrize("ratios,expected", [
    (tuple(w / 1.5 for w in WOBBLE), "faster"),             # candidate / base
    (tuple(w * 1.4 for w in WOBBLE), "slower"),
    (WOBBLE, "no change"),                                  # rules out 10% either way
    ((0.87, 1.15, 0.95, 1.1, 0.9, 1.12), "cannot tell"),    # admits none and 10%
])
def test_a_comparison_says_one_of_four_verdicts_by_the_shared_rule(ratios, expected):
    from pytest_sme2.gate.ab import Pairs
    from pytest_sme2.measure.comparison import comparison_judgement, verdict_word

    j = comparison_judgement(Pairs((1.0,) * 6, ratios), margin=0.02, threshold_pct=10)
    assert verdict_word(j) == expected


def _compared(ratios, on_unresolved="warn", emulated=False):
    base = [_result("off", i, 1.0, {"GEMM": 1.0}) for i in range(len(ratios))]
    cand = [_result("on", i, r, {"GEMM": r}) for i, r in enumerate(ratios)]
    if emulated:
        for b in base + cand:
            b.device = replace(b.device, emulated=True)
    cmp = make_comparison(base, cand, nodeid="t.py::test_c", margin=0.05)
    cmp.on_unresolved = on_unresolved
    return cmp


def test_expect_verdict_passes_the_verdicts_asked_and_fails_others_with_the_figures():
    same = _compared(WOBBLE)
    assert same.expect_verdict("no change") is same
    slower = _compared(tuple(w * 1.3 for w in WOBBLE))
    with pytest.raises(AssertionError) as e:
        slower.expect_verdict("no change")
    assert str(e.value).startswith("expected no change, got on vs off on m fp16 t1: speed-up ")
    assert "30.0% slower" in str(e.value)
    assert slower.expect_verdict("slower", "no change") is slower


def test_expect_verdict_obeys_the_unresolved_policy_and_asks_nothing_of_emulated_times():
    wide = (0.87, 1.15, 0.95, 1.1, 0.9, 1.12)
    assert _compared(wide).verdict == "cannot tell"
    assert _compared(wide, "warn").expect_verdict("no change")       # said in the summary
    assert _compared(wide, "pass").expect_verdict("no change")
    with pytest.raises(AssertionError, match="expected no change, got .*cannot tell"):
        _compared(wide, "fail").expect_verdict("no change")
    assert _compared(tuple(w * 1.3 for w in WOBBLE), emulated=True).expect_verdict("no change")
