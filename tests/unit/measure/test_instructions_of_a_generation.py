"""--sme2-measure instructions on an LLM block: instruction counts are per execute of a forward
pass, so a generation is measured in time only and the session says so (it used to count the
program's forward on its export inputs: a number of neither phase)."""

from __future__ import annotations

from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.results import BlockResult
from tests.fakes.results_docs import generation_block


def test_a_generation_is_not_counted_and_the_session_says_why(monkeypatch):
    import pytest_sme2.instructions.count as count

    monkeypatch.setattr(count, "count_instructions", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("a generation must not be counted")))
    session = BenchSession(Sme2Config(devices=("host",)))
    said: list[str] = []
    block = BlockResult.from_json(generation_block("8da8w"))
    try:
        session.count_instructions(block, said.append)
    finally:
        session.close()
    assert block.instructions is None
    assert said == ["tiny_llama 8da8w: instructions are counted per execute of a forward pass; "
                    "an LLM's generation is measured in time only (its phases are not counted "
                    "yet)"]
