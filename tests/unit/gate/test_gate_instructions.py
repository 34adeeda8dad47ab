"""The regression gate on instruction counts (--sme2-measure instructions, issue 13): synthetic
baselines keyed ``measure="instructions"``, one value per session."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.baselines import bench_result as _result

from pytest_sme2.baselines.key import BaselineKey
from pytest_sme2.baselines.store import load, save
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.gate.rule import INSTRUCTIONS, NOT_COMPARED, OK, REGRESSION, evaluate, judge_levels
from pytest_sme2.gate.rule import junit_properties
from pytest_sme2.stats import UNMEASURED_DRIFT, noise_floor

AT_2 = GatePolicy(fail_on_regression=2)
COUNT = 2_570_512.0


def _counted(per_execute: float, **kw):
    r = _result(**kw)
    r.instructions = {"per_execute": per_execute, "executions": 2, "method": "callgrind",
                      "threads": 1, "hottest": [["f", per_execute]],
                      "per_library": {}, "deterministic_note": ""}
    return r


def _record(folder, counts):
    for i, c in enumerate(counts):
        save([_counted(c)], folder, session_id=f"s{i}", commit=False)
        save([_counted(c)], folder, session_id=f"s{i}", commit=False, measure=INSTRUCTIONS)


def test_instruction_baselines_are_their_own_file_with_one_value_per_session(tmp_path):
    _record(tmp_path, [COUNT, COUNT + 3])
    key = BaselineKey.from_result(_counted(COUNT), measure=INSTRUCTIONS)
    base = load(tmp_path / key.filename)
    assert base.key.measure == INSTRUCTIONS
    assert [s.blocks for s in base.sessions] == [[[COUNT]], [[COUNT + 3]]]
    assert len(list(tmp_path.glob("*.json"))) == 2          # the time file beside it


def test_a_5_percent_regression_is_caught_at_threshold_2(tmp_path):
    _record(tmp_path, [COUNT, COUNT + 2, COUNT - 1])
    report = evaluate([_counted(COUNT * 1.05)], tmp_path, AT_2)
    j = report.instructions
    assert j is not None and j.status == REGRESSION and j.measure == INSTRUCTIONS
    assert j.reason.startswith("instructions 5.0% more") and "instructions" in j.summary
    assert report.e2e.measure == "time"                     # time judged as before, apart
    failure = report.failure(AT_2)
    assert failure and "instructions 5.0% more" in failure
    props = dict(junit_properties(j))
    assert props["sme2_gate_instructions_status"] == REGRESSION
    assert props["sme2_gate_instructions_ratio"] == 1.05


def test_a_and_a_is_not_a_regression(tmp_path):
    _record(tmp_path, [COUNT, COUNT + 2, COUNT - 1])
    report = evaluate([_counted(COUNT + 1)], tmp_path, AT_2)
    assert report.instructions.status == OK and not report.regressions
    assert report.failure(AT_2) is None


def test_below_3_sessions_the_floor_is_small_for_instructions_only(tmp_path):
    _record(tmp_path, [COUNT])                              # one session: drift unmeasured
    j = evaluate([_counted(COUNT * 1.05)], tmp_path, AT_2).instructions
    assert j.status == REGRESSION and j.noise_floor_pct == 0.1
    assert noise_floor([[1.0, 1.01]])[0] >= UNMEASURED_DRIFT     # time's floor unchanged
    t = judge_levels([[1.0, 1.01]], [1.05], 2)
    assert t.noise_floor_pct == 25.0 and t.status == OK and t.measure == "time"


def test_a_baseline_measured_in_time_only_is_not_compared_with_the_reason(tmp_path):
    for i in range(3):
        save([_counted(COUNT)], tmp_path, session_id=f"s{i}", commit=False)   # time only
    report = evaluate([_counted(COUNT * 1.5)], tmp_path, AT_2)
    j = report.instructions
    assert j.status == NOT_COMPARED and not j.foreign
    assert "measured in time only" in j.reason and "--sme2-measure instructions" in j.reason
    assert report.failure(AT_2) is None


def test_no_counts_no_instruction_judgement(tmp_path):
    _record(tmp_path, [COUNT] * 3)
    report = evaluate([_result()], tmp_path, AT_2)
    assert report.instructions is None
    assert "measure" not in report.e2e.to_dict()            # time's verdict as before
    block = replace(_result())
    report.record_on(block)
    assert block.instructions_judgement is None and "baseline_instructions" not in block.to_json()


def test_off_the_host_one_line_per_session_and_time_only():
    from types import SimpleNamespace

    from pytest_sme2.measure.session import BenchSession

    session, lines = BenchSession(devices=("android:R5",)), []
    session._devices["android:R5"] = SimpleNamespace(spec="android:R5",
                                                     target="aarch64-linux-android")
    for _ in range(3):
        r = _result()
        session.count_instructions(r, lines.append)
        assert r.instructions is None
    assert lines == ["--device android:R5: instructions are counted on the host only; "
                     "measuring time only"]
