"""The stored-baseline rule one bad session cannot blind (pytest_sme2.gate.robust)."""

from __future__ import annotations

from pytest_sme2.gate.levels import CANNOT_TELL, REGRESSION, judge_levels
from pytest_sme2.gate.robust import screen
from pytest_sme2.gate.robust import judge_robust as _judge_robust


def judge_robust(sessions, current, threshold_pct=10.0):
    return _judge_robust(judge_levels, sessions, current, threshold_pct)

CLEAN = [[1.00, 1.01, 0.99], [1.02, 1.00, 1.01], [0.99, 1.00, 1.01], [1.01, 1.0, 1.02]]


def test_a_slow_session_is_named_and_left_out():
    sessions = [*CLEAN[:2], [1.16, 1.17, 1.15], CLEAN[2]]
    out = screen(sessions)
    assert [o.index for o in out] == [2] and str(out[0]) == "session 3 ran 16% slow"
    j = judge_robust(sessions, [1.40])
    assert j.status == REGRESSION
    today = judge_levels(sessions, [1.40])
    assert j.noise_floor_pct < today.noise_floor_pct
    assert "because session 3 ran 16% slow (left out)" in j.reason


def test_a_new_level_is_never_screened_out():
    # the newest session, or a step the next session agrees with: perhaps a change accepted
    assert screen([*CLEAN[:3], [1.3]]) == []
    assert screen([*CLEAN[:3], [1.3], [1.31]]) == []


REMEDY = "record the baseline again on the base commit with --save-baseline"


def test_three_sessions_one_slow_keep_the_least_floor_and_name_the_remedy():
    sessions = [CLEAN[0], [1.16, 1.17, 1.15], CLEAN[1]]
    today = judge_levels(sessions, [1.1])
    j = judge_robust(sessions, [1.1])
    assert today.noise_floor_pct > 45                   # the 52%
    assert j.noise_floor_pct == 25                      # 2 sessions left: at least 25%
    assert f"noise floor 25% ({today.noise_floor_pct:.0f}% with it)" in j.reason
    # the remedy that works (issue 49: --sme2-gate-mode ab looped back to the stored rule)
    assert REMEDY in j.reason and "--sme2-gate-mode ab" not in j.reason
    assert j.status == CANNOT_TELL


def test_ordinary_drift_is_not_an_outlier():
    assert screen([[1.0], [1.04], [0.97], [1.06]]) == []
    assert judge_robust(CLEAN, [1.0]).reason == judge_levels(CLEAN, [1.0]).reason


def test_at_most_one_session_in_three_is_left_out():
    assert len(screen([[1.0], [1.5], [1.0], [1.6], [1.01], [1.0]])) == 2
    assert len(screen([[1.0], [1.5], [1.0], [1.6], [1.01]])) == 1
    assert screen([[1.0], [1.5]]) == []


def test_a_wide_floor_without_an_outlier_is_said():
    j = judge_robust([[1.0], [1.2], [0.85]], [1.0])
    assert "between themselves, more than the 10% to detect" in j.reason and REMEDY in j.reason


def test_nothing_to_judge_passes_through():
    assert judge_robust([], [1.0]).status == "not_compared"
