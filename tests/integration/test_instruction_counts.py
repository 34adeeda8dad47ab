"""Instructions per Method::execute counted for real: the native runner on real exports under
valgrind. The count must repeat between processes, not depend on how many executions the slope
spans, and grow when the model does more work; a runner killed or failing under valgrind is
named in one line."""

from __future__ import annotations


import pytest

from pytest_sme2.instructions import count as ins
from pytest_sme2.instructions.count import (METHOD_EXECUTE, POOL_LIBRARY, InstructionCountError,
                                              count_generation, count_instructions)
from pytest_sme2.results.generation import Generation
from tests.needs import tool
from tests.unit.instructions.test_instructions import _ShellRunner


@pytest.fixture(scope="module", autouse=True)   # before the module-scoped counts
def _valgrind():
    tool("valgrind", "apt-get install valgrind")

WIDE = "toy_cnn_wide_for_instructions"


@pytest.fixture(scope="module")
def toy_count(toy_export):
    return count_instructions(toy_export.pte, threads=1, inputs=toy_export.inputs)


def test_two_processes_agree_within_1e_4(toy_export, toy_count):
    again = count_instructions(toy_export.pte, threads=1, inputs=toy_export.inputs)
    assert abs(again.per_execute / toy_count.per_execute - 1) < 1e-4, (again, toy_count)


def test_more_executions_do_not_change_the_count_per_execute(toy_export, toy_count):
    longer = count_instructions(toy_export.pte, threads=1, inputs=toy_export.inputs,
                                executions=(2, 6))
    assert longer.executions == 4 and toy_count.executions == 2
    assert abs(longer.per_execute / toy_count.per_execute - 1) < 1e-4, (longer, toy_count)


def test_what_the_count_holds(toy_count):
    c = toy_count
    # toy_cnn fp32 does ~2.6 million instructions per execute (1 thread, valgrind's AVX2 CPU)
    assert 1e6 < c.per_execute < 1e7
    assert len(c.hottest) == 10 and c.hottest == sorted(c.hottest, key=lambda kv: -kv[1])
    assert max(c.per_library, key=c.per_library.get) == "libexecutorch_backend_xnnpack.so"
    assert set(c.excluded) == {POOL_LIBRARY}
    assert c.per_execute == pytest.approx(sum(v for k, v in c.per_library.items()
                                              if k != POOL_LIBRARY))
    # the delegate is one entry (XNNPACK's symbols are hidden in the x86 wheel); the adaptive
    # average pooling that XNNPACK leaves to the runtime is named by its kernel
    assert set(c.per_operator) == {"XnnpackBackend delegate", "_adaptive_avg_pool2d_out"}
    assert c.valgrind and c.wall_s > 0


def test_two_threads_repeat_too(toy_export):
    a, b = (count_instructions(toy_export.pte, threads=2, inputs=toy_export.inputs)
            for _ in range(2))
    assert a.threads == 2 and a.deterministic_note.startswith("2 threads")
    assert abs(a.per_execute / b.per_execute - 1) < 1e-4, (a, b)


def test_a_wider_model_counts_more(export_cache, toy_count):
    from pytest_sme2.programs.export import export_model
    from pytest_sme2_models import register_model

    register_model(WIDE, "pytest_sme2_models.toy_cnn:build", channels=24)
    wide = export_model(WIDE, "fp32", export_cache)
    count = count_instructions(wide.pte, threads=1, inputs=wide.inputs)
    # 16 -> 24 channels: the two 3x3 convolutions between them do 2.25x the work
    assert count.per_execute > 1.5 * toy_count.per_execute


# -- a runner that dies or fails under valgrind -------------------------------------------


def test_a_runner_killed_under_valgrind_names_the_signal(tmp_path, monkeypatch):
    monkeypatch.setattr(ins, "execute_symbol", lambda binary, libs=(): METHOD_EXECUTE)
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0")
    with pytest.raises(InstructionCountError) as e:
        count_instructions(pte, runner=_ShellRunner("echo dying >&2; kill -SEGV $$"),
                           timeout_s=120)
    assert str(e.value) == ("runner 'native' on m.pte was killed by SIGSEGV under valgrind; "
                            "stderr: dying")


def test_a_runner_failing_under_valgrind_gives_its_last_line(tmp_path, monkeypatch):
    monkeypatch.setattr(ins, "execute_symbol", lambda binary, libs=(): METHOD_EXECUTE)
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0")
    with pytest.raises(InstructionCountError) as e:
        count_instructions(pte, runner=_ShellRunner("echo 'm.pte: bad' >&2; exit 1"))
    assert str(e.value) == ("runner 'native' on m.pte under valgrind exited with status 1: "
                            "m.pte: bad")


# -- an LLM's phases (count_generation) --------------------------------------------------------


@pytest.fixture(scope="module")
def llm_count(tiny_llama_8da4w):
    return count_generation(tiny_llama_8da4w, Generation(16, 8))


def test_an_llm_is_counted_per_phase_and_the_counts_repeat(tiny_llama_8da4w, llm_count):
    c = llm_count
    assert c.prefill is not None and (c.prompt_tokens, c.new_tokens) == (16, 8)
    assert c.executions == 2 * 8                       # decode tokens the slope spans
    # One prefill execute of 16 tokens batches its matmuls: cheaper per token than a decode
    # step, dearer than one.
    assert c.per_execute < c.prefill < 16 * c.per_execute
    again = count_generation(tiny_llama_8da4w, Generation(16, 8))
    assert abs(again.per_execute / c.per_execute - 1) < 1e-4, (again, c)
    # The custom-SDPA program's prefill moved by 15 of 10.9M instructions between two runs
    # (1.4e-6): the counts repeat to 1e-5, far under any change the gate calls.
    assert abs(again.prefill / c.prefill - 1) < 1e-5, (again, c)
    assert "XnnpackBackend delegate" in c.per_operator


def test_a_longer_prompt_costs_more_to_prefill_not_per_decode_token(tiny_llama_8da4w,
                                                                    llm_count):
    longer = count_generation(tiny_llama_8da4w, Generation(48, 8))
    assert longer.prefill > 2 * llm_count.prefill
    # decode steps at positions 48.. attend over more keys than at 16..: a little more each
    assert 1.0 <= longer.per_execute / llm_count.per_execute < 1.5
