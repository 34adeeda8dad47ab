"""gate.junit.junit_properties: a gate judgement as JUnit XML properties."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_sme2.gate.levels import judge_levels
from pytest_sme2.gate.junit import junit_properties


def test_junit_properties():
    j = judge_levels([[1.0, 1.0], [1.0, 1.01], [0.99, 1.0]], [2.0, 2.01], threshold_pct=10)
    props = dict(junit_properties(j))
    assert props["sme2_gate_status"] == "regression"
    assert props["sme2_gate_baseline_median"] == 1.0
    assert props["sme2_gate_current_median"] == pytest.approx(2.005)
    assert props["sme2_gate_ratio"] == pytest.approx(2.005)
    assert props["sme2_gate_ratio_ci_low"] <= props["sme2_gate_ratio"] <= \
        props["sme2_gate_ratio_ci_high"]
    assert props["sme2_gate_threshold_pct"] == 10
    assert props["sme2_gate_baseline_sessions"] == 3 and props["sme2_gate_current_blocks"] == 2
    assert props["sme2_gate_reason"] == j.reason
    assert "sme2_gate_changed_since_baseline" not in props
    nc = dict(junit_properties(judge_levels([], [1.0])))
    assert nc["sme2_gate_status"] == "not_compared" and "sme2_gate_ratio" not in nc
    cat = junit_properties(judge_levels([[1.0]], [1.0], category="Data Movement"))
    assert cat[0] == ("sme2_gate_Data_Movement_status", "cannot_tell")
    changed = dict(junit_properties(replace(j, changed_since_baseline=("model source",))))
    assert changed["sme2_gate_changed_since_baseline"] == "model source"
