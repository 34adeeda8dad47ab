"""The same-job A/B gate's rule (pytest_sme2.gate.ab): pure numbers, no timing."""

from __future__ import annotations

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.rule import CANNOT_TELL, IMPROVEMENT, NO_CHANGE, NOT_COMPARED, REGRESSION
from pytest_sme2.gate.ab import AGAINST, Pairs, judge_ab, line

BASE = (1.00, 1.02, 0.98, 1.01, 0.99, 1.0)


def _scaled(factor: float, wobble=(0.0, 0.01, -0.01, 0.005, -0.005, 0.002)) -> Pairs:
    return Pairs(BASE, tuple(b * factor * (1 + w) for b, w in zip(BASE, wobble)))


def test_a_clear_regression_reads_against_the_re_measured_base():
    j = judge_ab(_scaled(1.21))
    assert j.status == REGRESSION and j.against == AGAINST
    assert j.summary.startswith("regression 1.21x [")
    assert j.summary.endswith("vs the base program, re-measured in this session (6 pairs)")
    assert j.to_dict()["against"] == AGAINST


def test_drift_shared_by_both_sides_cancels():
    # the whole machine 30% slower in the later pairs: base and candidate alike
    drift = (1.0, 1.0, 1.3, 1.3, 1.3, 1.3)
    pairs = Pairs(tuple(b * d for b, d in zip(BASE, drift)),
                  tuple(b * d * 1.001 for b, d in zip(BASE, drift)))
    assert judge_ab(pairs).status == NO_CHANGE


def test_the_threshold_is_the_change_to_detect():
    assert line(10) == pytest.approx(1.05)
    assert judge_ab(_scaled(1.10)).status == REGRESSION      # the threshold's size is caught
    assert judge_ab(_scaled(1.02)).status == NO_CHANGE
    assert judge_ab(_scaled(0.85)).status == IMPROVEMENT


def test_an_interval_that_admits_both_no_change_and_the_threshold_cannot_tell():
    wide = Pairs((1.0,) * 6, (0.97, 1.12, 1.06, 0.95, 1.1, 1.04))
    j = judge_ab(wide)
    assert j.status == CANNOT_TELL and j.unresolved
    assert j.summary.startswith("cannot tell 1.04x [")
    assert "cannot tell: 10% is not resolvable here (interval [" in j.reason
    assert "after 6 pairs; minimum detectable change now ~" in j.reason
    assert "pairs would resolve 10%)" in j.reason


def test_one_pair_is_not_judged():
    j = judge_ab(Pairs((1.0,), (2.0,)))
    assert j.status == NOT_COMPARED and "2 or more pairs" in j.summary


def test_unpaired_blocks_are_one_line():
    with pytest.raises(Sme2Error, match="3 base block.s. but 2 candidate block.s."):
        Pairs((1.0, 1.0, 1.0), (1.0, 1.0))


def test_a_negative_threshold_is_refused():
    with pytest.raises(Sme2Error, match="0% or more"):
        judge_ab(_scaled(1.0), threshold_pct=-1)


def test_zero_times_are_not_judged():
    assert judge_ab(Pairs((0.0, 1.0), (1.0, 1.0))).status == NOT_COMPARED


def test_a_machine_switching_between_two_speeds_does_not_make_a_change():
    """Measured at 2 threads on 2 shared cores: each block runs at 0.039 or 0.063 ms, so
    unchanged pairs read 0.62, 1.0 or 1.6. Lopsided pairs moved the mean log ratio past the
    line (1.09 [1.02, 1.17]: a regression by the interval alone); the robust estimate stays
    near 1, and most pairs agree on no change."""
    # an unchanged trial of evaluations/regression_gate_evaluation_time_gates.py, as measured
    ratios = (1.01, 0.62, 1.6, 1.61, 0.62, 1.03, 0.99, 1.01, 1.61, 0.62, 1.03, 1.6, 0.61, 0.99,
              1.0, 1.54, 0.63, 1.0, 1.0, 1.62, 1.01, 1.0, 1.6, 1.0)
    j = judge_ab(Pairs((1.0,) * 24, ratios))
    assert j.status != REGRESSION and j.ratio.point < 1.05
    real = Pairs((1.0,) * 24, tuple(r * 1.12 for r in ratios))
    assert judge_ab(real).status == REGRESSION     # +12% moves most pairs past the margin
    assert judge_ab(Pairs((1.0,) * 5, (1.3,) * 5)).status == CANNOT_TELL   # 5 pairs: too few


def test_a_wild_pair_does_not_hide_a_change_nor_make_one():
    # measured shape: a +10% change, one pair whose base block ran while the core was taken
    ratios = (1.103, 1.365, 1.106, 0.944, 1.131, 1.104, 1.108, 1.114)
    assert judge_ab(Pairs((1.0,) * 8, ratios)).status == REGRESSION
    # the same wild pair in an unchanged program does not make a regression of it: 8 pairs
    # cannot rule 10% out beside it, twice as many can
    same = Pairs((1.0,) * 8, (1.0, 1.37, 0.99, 1.01, 1.0, 0.98, 1.02, 1.0))
    assert judge_ab(same).status == CANNOT_TELL
    assert judge_ab(same + Pairs((1.0,) * 8, (1.0, 1.01, 0.99, 1.01, 1.0, 0.98, 1.02, 1.0))
                    ).status == NO_CHANGE


def test_pairs_the_probe_saw_straddle_two_speeds_are_left_out_and_counted():
    # pairs 2 and 5 ran their two blocks at machine speeds 1.8x apart: ratios of 1.8 and 0.55
    ratios = (1.0, 1.8, 1.01, 0.99, 0.55, 1.0, 1.01, 0.99)
    j = judge_ab(Pairs((1.0,) * 8, ratios, straddled=(1, 4), switch=1.8))
    assert j.status == NO_CHANGE
    assert "(the machine switched speed 1.8x in 2 of 8 pairs (left out))" in j.reason
    # when too few pairs ran at one speed, the verdict says that is why it cannot tell
    j = judge_ab(Pairs((1.0,) * 6, ratios[:6], straddled=(0, 1, 2, 3, 4), switch=1.8))
    assert j.status == CANNOT_TELL
    assert j.reason.startswith("cannot tell: the machine switched speed 1.8x in 5 of 6 pairs "
                               "(left out); too few pairs ran at one speed")


def test_a_straddle_note_survives_adding_pairs():
    more = Pairs((1.0,), (1.0,), straddled=(0,), switch=1.5) + \
        Pairs((1.0,) * 4, (1.0,) * 4, straddled=(1,), switch=1.8)
    assert more.straddled == (0, 2) and more.switch == 1.8
    assert more.kept == Pairs((1.0,) * 3, (1.0,) * 3)


# -- an LLM: prefill and time to first token by the same pairs ---------------------------------


def _gen(prefill_ms: float, runner: str = "native"):
    from pytest_sme2.results import BlockResult
    from tests.fakes.results_docs import generation_block

    return BlockResult.from_json(generation_block("8da8w", runner, prefill_ms=prefill_ms))


def test_an_llms_prefill_and_ttft_are_judged_pair_by_pair():
    from pytest_sme2.gate.ab import judge_phases
    from pytest_sme2.gate.rule import PREFILL, REGRESSION, TTFT

    base = [_gen(16.0 * f) for f in (1.0, 1.02, 0.99, 1.01, 1.0, 1.0)]
    slower = [_gen(16.0 * f * 1.3) for f in (1.0, 1.02, 0.99, 1.01, 1.0, 1.0)]
    verdicts = {j.measure: j for j in judge_phases(base, slower, 10)}
    assert set(verdicts) == {PREFILL, TTFT}
    assert verdicts[PREFILL].status == REGRESSION
    assert verdicts[PREFILL].reason.startswith("prefill time 30.0% slower: 6 interleaved pair(s)")
    assert verdicts[PREFILL].against == "the base program, re-measured in this session"
    assert verdicts[TTFT].status == REGRESSION
    same = {j.measure: j for j in judge_phases(base, base, 10)}
    assert same[PREFILL].status == NO_CHANGE and same[TTFT].status == NO_CHANGE


def test_forward_passes_have_no_phases_to_pair():
    from pytest_sme2.gate.ab import judge_phases
    from tests.fakes.baselines import bench_result

    assert judge_phases([bench_result()] * 2, [bench_result()] * 2, 10) == []
