"""An LLM's instructions per phase (count_generation): four processes (prefill only and the
whole generation, at two generation counts), prefill by the slope of the first pair, decode by
the slope of the difference over the decode tokens. Synthetic costs with known phases here; the
real native runner under valgrind on a real export: tests/integration/test_instruction_counts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.instructions import count as ins
from pytest_sme2.instructions.callgrind import Costs
from pytest_sme2.instructions.count import count_generation, format_count
from pytest_sme2.results.generation import Generation
from pytest_sme2.results.instructions import InstructionCount
from tests.unit.instructions.test_instructions import _ShellRunner

XNN = ("/x/lib/libexecutorch_backend_xnnpack.so", "0x00000000000ffcc0")
EXPAND = ("/x/lib/libexecutorch_kernels_optimized.so", "torch::executor::native::expand_copy_out")
POOL = ("/x/lib/libexecutorch_threadpool.so", "pthreadpool_parallelize")
PREFILL, DECODE, FIRST = 18_000_000, 2_900_000, 1_234_567   # FIRST: the first generation's extra


def _process(generations: int, new_tokens: int) -> tuple[Costs, Costs]:
    """A process's (calling thread, workers) costs: every generation prefills and decodes
    ``new_tokens`` tokens; the first costs FIRST more; the pool spins a varying amount."""
    xnn = FIRST + generations * (PREFILL + new_tokens * (DECODE - 400_000))
    expand = generations * new_tokens * 400_000
    main = Costs({XNN: xnn, EXPAND: expand, POOL: generations * (17 + 3 * new_tokens)}, {})
    return main, Costs()


def test_costs_add_function_by_function():
    a = Costs({XNN: 1, EXPAND: 2}, {XNN: {EXPAND: 5}}, 1)
    b = Costs({XNN: 10, POOL: 3}, {XNN: {EXPAND: 1, POOL: 2}}, 2)
    s = a + b
    assert s.self_cost == {XNN: 11, EXPAND: 2, POOL: 3}
    assert s.calls == {XNN: {EXPAND: 6, POOL: 2}} and s.threads == 2
    assert a.self_cost == {XNN: 1, EXPAND: 2}         # neither side is changed


@pytest.fixture
def four_processes(monkeypatch):
    """count_generation with the processes' costs made from their requests, as callgrind would
    give them; records the requests."""
    seen = []

    def profiles(pte, requests, runner, timeout_s, keep_dir, progress):
        seen.extend(requests)
        return [_process(r.runs, r.generation.new_tokens) for r in requests], 0.5, "3.19.0"

    monkeypatch.setattr(ins, "_profiles", profiles)
    return seen


def test_prefill_and_decode_come_apart_and_the_first_generation_cancels(four_processes,
                                                                        tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    c = count_generation(pte, Generation(64, 32), runner=_ShellRunner("true"))
    assert [(r.generation.arg, r.runs, r.warmup) for r in four_processes] == [
        ("64,0", 2, 0), ("64,0", 4, 0), ("64,32", 2, 0), ("64,32", 4, 0)]
    assert c.prefill == PREFILL
    assert c.per_execute == DECODE                     # per decode token
    assert c.executions == 2 * 32 and (c.prompt_tokens, c.new_tokens) == (64, 32)
    assert c.per_operator == {}                        # no calls from execute_instruction here
    assert c.hottest[0][0].endswith("[libexecutorch_backend_xnnpack.so]")
    assert c.excluded == {"libexecutorch_threadpool.so": 3}   # per decode token
    assert c.prefill is not None and "per decode token" in c.method
    assert InstructionCount.from_dict(c.to_dict()) == c


def test_no_decode_step_counts_the_prefill(four_processes, tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    c = count_generation(pte, Generation(16, 0), runner=_ShellRunner("true"))
    assert c.prefill == c.per_execute == PREFILL and c.new_tokens == 0
    assert format_count(c).startswith("18,000,000 per prefill of 16 tokens (1,125,000 per "
                                      "prompt token) (1 thread(s), ")


def test_a_count_at_depth_is_one_line_not_a_wrong_prefill(tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    with pytest.raises(ins.InstructionCountError, match="at context depth 512 are not counted"):
        count_generation(pte, Generation(16, 4, 512), runner=_ShellRunner("true"))


def test_the_terminal_line_names_both_phases(four_processes, tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    line = format_count(count_generation(pte, Generation(64, 32), runner=_ShellRunner("true")))
    assert line.startswith("2,900,000 per decode token, 18,000,000 per prefill of 64 tokens "
                           "(281,250 per prompt token) (1 thread(s), decode slope over 64 "
                           "token(s), ")
    assert line.endswith("(decode)")


def test_a_forward_pass_count_reads_as_before():
    c = InstructionCount(per_execute=1000, executions=2, method="callgrind", threads=1,
                         hottest=[("f [a.so]", 1000.0)], per_library={}, deterministic_note="")
    assert c.prefill is None
    assert format_count(c).startswith("1,000 instructions per execute (1 thread(s), slope over "
                                      "2 execution(s)")
    assert not {"prefill", "prompt_tokens", "new_tokens"} & set(c.to_dict())


def test_a_missing_model_is_one_line(tmp_path):
    with pytest.raises(ins.InstructionCountError, match=r"nope.pte: model file not found"):
        count_generation(Path(tmp_path / "nope.pte"), Generation(8, 4))
