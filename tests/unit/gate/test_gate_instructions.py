"""The regression gate on instruction counts (--sme2-measure instructions, issue 13): synthetic
baselines keyed ``measure="instructions"``, one value per session."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.fakes.baselines import bench_result as _result

from pytest_sme2.baselines.key import BaselineKey
from pytest_sme2.baselines.store import load, save
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.gate.levels import (CANNOT_TELL, INSTRUCTIONS, NO_CHANGE, NOT_COMPARED,
                                     PREFILL_INSTRUCTIONS, REGRESSION, judge_levels)
from pytest_sme2.gate.rule import evaluate
from pytest_sme2.gate.junit import junit_properties
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
    assert report.instructions.status == NO_CHANGE and not report.regressions
    assert report.failure(AT_2) is None


def test_below_3_sessions_the_floor_is_small_for_instructions_only(tmp_path):
    _record(tmp_path, [COUNT])                              # one session: drift unmeasured
    j = evaluate([_counted(COUNT * 1.05)], tmp_path, AT_2).instructions
    assert j.status == REGRESSION and j.noise_floor_pct == 0.1
    assert noise_floor([[1.0, 1.01]])[0] >= UNMEASURED_DRIFT     # time's floor unchanged
    t = judge_levels([[1.0, 1.01]], [1.05], 2)
    assert t.noise_floor_pct == 25.0 and t.status == CANNOT_TELL and t.measure == "time"


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


# -- an LLM: instructions per decode token and per prefill (count_generation) ----------------

PREFILL_COUNT = 18_260_002.0


def _generation_counted(per_token: float, prefill: float | None):
    r = _counted(per_token)
    r.instructions = {**r.instructions.to_dict(), "prefill": prefill, "prompt_tokens": 64,
                      "new_tokens": 32} if prefill else r.instructions
    return r


def _record_llm(folder, prefills):
    for i, p in enumerate(prefills):
        r = _generation_counted(COUNT, p)
        save([r], folder, session_id=f"s{i}", commit=False)
        save([r], folder, session_id=f"s{i}", commit=False, measure=INSTRUCTIONS)


def test_an_llm_baseline_keeps_its_prefill_counts_beside_the_decode_ones(tmp_path):
    _record_llm(tmp_path, [PREFILL_COUNT, PREFILL_COUNT + 1])
    key = BaselineKey.from_result(_counted(COUNT), measure=INSTRUCTIONS)
    base = load(tmp_path / key.filename)
    assert [s.blocks for s in base.sessions] == [[[COUNT]], [[COUNT]]]
    assert [s.prefill_instructions for s in base.sessions] == [[PREFILL_COUNT],
                                                               [PREFILL_COUNT + 1]]
    time_key = BaselineKey.from_result(_counted(COUNT))
    assert "prefill_instructions" not in (tmp_path / time_key.filename).read_text()


def test_a_prefill_regression_fails_while_decode_is_unchanged(tmp_path):
    _record_llm(tmp_path, [PREFILL_COUNT, PREFILL_COUNT + 1, PREFILL_COUNT - 1])
    report = evaluate([_generation_counted(COUNT, PREFILL_COUNT * 1.04)], tmp_path, AT_2)
    decode, prefill = report.instructions, report.phases[PREFILL_INSTRUCTIONS]
    assert decode.status == NO_CHANGE
    assert decode.reason.startswith("decode (per token) instructions")
    assert prefill.status == REGRESSION and prefill.measure == PREFILL_INSTRUCTIONS
    assert prefill.reason.startswith("prefill instructions 4.0% more")
    failure = report.failure(AT_2)
    assert failure and "prefill instructions 4.0% more" in failure
    block = _generation_counted(COUNT, PREFILL_COUNT)
    report.record_on(block)
    assert block.phase_judgements["prefill_instructions"].status == REGRESSION
    assert block.to_json()["baseline_phases"]["prefill_instructions"]["status"] == REGRESSION
    # property names are one word each: CI systems split on spaces (it read
    # "sme2_gate_prefill instructions_status", and "sme2_gate_load time_status" before)
    props = dict(junit_properties(prefill))
    assert props["sme2_gate_prefill_instructions_status"] == REGRESSION
    assert all(" " not in k for k in props)
    load = dict(junit_properties(replace(prefill, measure="time to first token")))
    assert "sme2_gate_time_to_first_token_ratio" in load


def test_an_instruction_baseline_without_prefill_is_not_compared_with_the_fix(tmp_path):
    _record(tmp_path, [COUNT] * 3)                          # counted before phases were
    report = evaluate([_generation_counted(COUNT, PREFILL_COUNT)], tmp_path, AT_2)
    prefill = report.phases[PREFILL_INSTRUCTIONS]
    assert prefill.status == NOT_COMPARED
    assert prefill.reason == ("the instruction baseline records no prefill; record it again "
                              "with --sme2-measure instructions --save-baseline")
    assert report.instructions.status == NO_CHANGE and report.failure(AT_2) is None


def test_a_generation_is_counted_per_phase_by_the_session(monkeypatch):
    """The session hands an LLM block's prompt and new tokens to count_generation."""
    import pytest_sme2.instructions.count as count
    import pytest_sme2.measure.session as session_module
    from pytest_sme2.measure.session import BenchSession
    from pytest_sme2.results import BlockResult
    from pytest_sme2.results.generation import Generation
    from tests.fakes.results_docs import generation_block

    calls = []
    monkeypatch.setattr(session_module, "native_runner", lambda progress=None: "the host build")
    monkeypatch.setattr(count, "count_instructions", lambda *a, **k: pytest.fail(
        "a generation is not counted as one forward pass"))
    monkeypatch.setattr(count, "count_generation",
                        lambda pte, g, **k: calls.append((g, k["threads"], k["runner"])) or "n")
    session = BenchSession(devices=("host",))
    block = BlockResult.from_json(generation_block("8da8w"))
    try:
        session.count_instructions(block)
    finally:
        session.close()
    g = block.generation
    assert calls == [(Generation(g.prompt_tokens, g.new_tokens), block.threads,
                      "the host build")]
    assert block.instructions == "n"

    # At depth: one line, timed only (the prefill-only processes would count the fill).
    deep, lines = BlockResult.from_json(generation_block("8da8w", depth=512)), []
    session = BenchSession(devices=("host",))
    try:
        session.count_instructions(deep, lines.append)
    finally:
        session.close()
    assert deep.instructions is None and len(calls) == 1
    assert lines == ["tiny_llama 8da8w at depth 512: instructions are counted at depth 0 only; "
                     "this benchmark is timed"]
