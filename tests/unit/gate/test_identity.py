"""The stored gate on a program, runner and runtime that are the baseline's, byte for byte: what
its time shows is the machine (issue 44: an A/A on a VM that switched speed read "56.2% slower"
and failed; issue 49: a comment-only change could not be told and its advice looped)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pytest_sme2.baselines.store import save
from pytest_sme2.gate.decide import floor_remedy
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.gate.rule import NO_CHANGE, REGRESSION, evaluate
from pytest_sme2.results.machine import ProbeReading
from tests.fakes.baselines import under_test_result

AT_10 = GatePolicy(fail_on_regression=10)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
FAST = (0.104, 0.105, 0.103)
SLOW = (0.163, 0.164, 0.162)          # the same program on the machine's slow speed: 1.56x


def _probed(samples, probe_us: float, **changes):
    r = under_test_result(samples, **changes)
    r.probe = ProbeReading([probe_us] * 24, [probe_us] * 24)
    return r


def _baseline(tmp_path, sessions=1):
    for i in range(sessions):
        save([_probed(FAST, 14.0)], tmp_path, session_id=f"s{i}", commit=False,
             now=T0 + timedelta(days=i))
    return tmp_path


def test_the_same_program_runner_and_runtime_reading_slower_is_the_machine(tmp_path):
    blocks = [_probed(SLOW, 25.2) for _ in range(3)]
    j = evaluate(blocks, _baseline(tmp_path), AT_10).e2e
    assert j.status == NO_CHANGE and not j.regressed
    assert j.reason.startswith("no change by identity: the program (pppp), its runner and "
                               "runtime are the baseline's, byte for byte, so the time it read "
                               "(1.567x [")
    assert "regression by the stored rule) is this machine's speed, not the code's" in j.reason
    assert "the machine-state probe ran 1.80x slower than when it was recorded" in j.reason
    assert AT_10 and evaluate(blocks, tmp_path, AT_10).failure(AT_10) is None


def test_a_comment_only_change_is_the_same_program(tmp_path):
    # the model's source changed, the exported program did not: its hash says so
    blocks = [_probed(SLOW, 14.0, model_source="bbbb") for _ in range(3)]
    j = evaluate(blocks, _baseline(tmp_path, 3), AT_10).e2e
    assert j.status == NO_CHANGE and "no change by identity" in j.reason
    assert "changed since baseline: model source" in j.reason


def test_another_program_is_judged_by_the_stored_rule(tmp_path):
    blocks = [_probed(SLOW, 14.0, program="qqqq") for _ in range(3)]
    j = evaluate(blocks, _baseline(tmp_path, 3), AT_10).e2e
    assert j.status == REGRESSION and "by identity" not in j.reason


def test_another_runner_build_or_runtime_is_not_the_same(tmp_path):
    _baseline(tmp_path, 3)
    other_build = {"runtime": "executorch.pybindings", "executorch": "1.5.1", "build": "b2"}
    for changes in ({"runner_labels": other_build},
                    {"versions": {"torch": "2.13.0", "executorch": "1.5.2",
                                  "torchao": "0.18.0"}}):
        j = evaluate([_probed(SLOW, 14.0, **changes) for _ in range(3)], tmp_path, AT_10).e2e
        assert j.status == REGRESSION, changes


def test_the_floor_remedy_names_what_works():
    text = floor_remedy(45.2, 10)
    assert text.startswith("the baseline's sessions drift 45% between themselves, more than "
                           "the 10% to detect")
    assert "record the baseline again on the base commit with --save-baseline" in text
    assert "raise --fail-on-regression above 45%" in text


def test_load_and_memory_name_their_own_threshold_and_no_pairs():
    from pytest_sme2.results.judgement import LOAD

    text = floor_remedy(88.0, 25, LOAD)
    assert "raise --sme2-load-threshold above 88%" in text
    assert "--fail-on-regression" not in text and "pairs" not in text
