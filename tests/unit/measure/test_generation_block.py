"""measure/generation.py: which steps a generation block's e2e is made of, token equality as
the outputs check, and which programs are measured as generations."""

from __future__ import annotations

import numpy as np
import pytest

from dataclasses import replace

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure import generation as gen_block
from pytest_sme2.measure.generation import analyze_block, check_tokens, decode_steps
from pytest_sme2.programs.llm_facts import LlmFacts
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.results import Generation, GenerationResult
from tests.unit.analysis.test_generation_analysis import _generation_etdump, _summary


def test_decode_steps_are_the_timed_generations_decode_executes_renumbered():
    events = parse_etdump(_generation_etdump(4, 1, 5))
    steps = decode_steps(events, generations=4, warmup=1, prefill_executes=1,
                         decode_executes=5)
    runs = steps["run"].to_numpy()
    assert sorted(set(runs[runs >= 0])) == list(range(3 * 5))     # 3 timed x 5 steps
    assert (runs == -1).sum() == (events["run"].to_numpy() == -1).sum()   # the load kept
    # Every kept execute is a decode step (200 us), none a prefill (800 us).
    execute = steps[steps["name"] == "Method::execute"]
    assert np.allclose(execute["duration_ms"], 0.2, atol=0.02)


def test_a_token_by_token_prefill_is_left_out_too():
    events = parse_etdump(_generation_etdump(2, 4, 3))
    steps = decode_steps(events, generations=2, warmup=0, prefill_executes=4,
                         decode_executes=3)
    execute = steps[steps["name"] == "Method::execute"]
    assert len(execute) == 2 * 3 and np.allclose(execute["duration_ms"], 0.2, atol=0.02)


def test_the_block_analysis_is_of_the_decode_steps(monkeypatch):
    summary = _summary(generations=4, warmup=1, new=5)
    monkeypatch.setattr(gen_block, "parse_summary",
                        lambda stdout: type("S", (), {"generation": summary})())
    block = analyze_block(parse_etdump(_generation_etdump(4, 1, 5)), "", source="x",
                          etrecord=None, rules=None, evidence=gen_block.BlockEvidence())
    assert block.decode.e2e.n == 3 * 5
    assert block.decode.e2e.median_ms == pytest.approx(0.2, abs=0.02)
    assert abs(sum(block.decode.categories_ms.values()) - block.decode.e2e.mean_ms) < 1e-9
    assert block.generation.prefill.median_ms == pytest.approx(0.8, abs=0.02)


def test_a_runner_without_the_token_loop_is_one_line(monkeypatch):
    monkeypatch.setattr(gen_block, "parse_summary",
                        lambda stdout: type("S", (), {"generation": None})())
    with pytest.raises(Sme2Error, match="printed no generation summary"):
        analyze_block(parse_etdump(_generation_etdump(1, 1, 1)), "", source="x.etdump",
                      etrecord=None, rules=None, evidence=gen_block.BlockEvidence())


def test_tokens_are_the_outputs():
    a = GenerationResult(tokens=[5, 6, 7])
    assert check_tokens(a, GenerationResult(tokens=[5, 6, 7])).equal
    differ = check_tokens(a, GenerationResult(tokens=[5, 9, 7, 1]))
    assert not differ.equal and differ.max_abs_diff == 2


def test_which_programs_run_generations(monkeypatch, tmp_path):
    pte = tmp_path / "m.pte"
    llm = tmp_path / "llm.pte"
    facts = LlmFacts(methods=("forward", "get_max_seq_len", "use_kv_cache"), max_seq_len=128,
                     max_context_len=128,
                     forward_inputs=(("int64", (1, 127), True), ("int64", (1,), False)))
    monkeypatch.setattr(gen_block, "facts_of", lambda p: facts if p.name == "llm.pte" else None)
    assert gen_block.generation_for(None, pte, 64, 32) is None           # a forward pass
    with pytest.raises(Sme2Error, match="m.pte: not an LLM program"):
        gen_block.generation_for(Generation(8, 4), pte, 64, 32)
    assert gen_block.generation_for(None, llm, 64, 32) == Generation(64, 32)
    assert gen_block.generation_for(Generation(8, 4), llm, 64, 32) == Generation(8, 4)
    with pytest.raises(Sme2Error, match=r"prompt 120 \+ new 9 tokens is over the program's "
                                        r"limits \(max_seq_len 128, max_context_len 128\)"):
        gen_block.generation_for(Generation(120, 9), llm, 64, 32)


@pytest.mark.parametrize("change, says", [
    ({"use_sdpa_with_kv_cache": True}, "plain attention"),
    ({"forward_inputs": (("float32", (1, 3, 8, 8), False),)}, "does not take"),
])
def test_what_a_program_cannot_run_is_one_line_before_running(tmp_path, change, says):
    facts = LlmFacts(methods=("forward", "get_max_seq_len", "use_kv_cache"),
                     forward_inputs=(("int64", (1, 127), True), ("int64", (1,), False)))
    with pytest.raises(Sme2Error, match=says):
        gen_block.check_program(tmp_path / "x.pte", replace(facts, **change), Generation(8, 4))
