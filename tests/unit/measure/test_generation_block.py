"""measure/generation.py: which steps a generation block's e2e is made of, token equality as
the outputs check, and which programs are measured as generations."""

from __future__ import annotations

import numpy as np
import pytest

from dataclasses import replace

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure import generation as gen_block
from pytest_sme2.measure.generation import analyze_block, check_tokens, decode_steps
from pytest_sme2.programs.llm.facts import LlmFacts
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.results import Generation, GenerationResult
from tests.unit.analysis.test_generation_analysis import _generation_etdump, _summary


def test_decode_steps_are_the_timed_generations_decode_executes_renumbered():
    events = parse_etdump(_generation_etdump(4, 1, 5))
    steps = decode_steps(events, _summary(generations=4, warmup=1, new=5))
    runs = steps["run"].to_numpy()
    assert sorted(set(runs[runs >= 0])) == list(range(3 * 5))     # 3 timed x 5 steps
    assert (runs == -1).sum() == (events["run"].to_numpy() == -1).sum()   # the load kept
    # Every kept execute is a decode step (200 us), none a prefill (800 us).
    execute = steps[steps["name"] == "Method::execute"]
    assert np.allclose(execute["duration_ms"], 0.2, atol=0.02)


def test_a_token_by_token_prefill_is_left_out_too():
    events = parse_etdump(_generation_etdump(2, 4, 3))
    steps = decode_steps(events, _summary(generations=2, warmup=0, prompt=4, new=3,
                                          dynamic=False))
    execute = steps[steps["name"] == "Method::execute"]
    assert len(execute) == 2 * 3 and np.allclose(execute["duration_ms"], 0.2, atol=0.02)


def test_a_depth_fill_is_no_decode_step():
    events = parse_etdump(_generation_etdump(3, 1, 4, depth_executes=2))
    steps = decode_steps(events, _summary(generations=3, warmup=1, new=4, depth=200,
                                          depth_executes=2))
    execute = steps[steps["name"] == "Method::execute"]
    assert len(execute) == 2 * 4 and np.allclose(execute["duration_ms"], 0.2, atol=0.02)


def test_the_block_analysis_is_of_the_decode_steps(monkeypatch):
    summary = _summary(generations=4, warmup=1, new=5)
    block = analyze_block(parse_etdump(_generation_etdump(4, 1, 5)), summary, source="x",
                          etrecord=None, rules=None, evidence=gen_block.BlockEvidence())
    assert block.decode.e2e.n == 3 * 5
    assert block.decode.e2e.median_ms == pytest.approx(0.2, abs=0.02)
    assert abs(sum(block.decode.categories_ms.values()) - block.decode.e2e.mean_ms) < 1e-9
    assert block.generation.prefill.median_ms == pytest.approx(0.8, abs=0.02)


def test_a_runner_without_the_token_loop_is_one_line():
    with pytest.raises(Sme2Error, match="printed no generation summary"):
        analyze_block(parse_etdump(_generation_etdump(1, 1, 1)), None, source="x.etdump",
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
    # A depth over the context is one line too, before any process starts.
    with pytest.raises(Sme2Error, match=r"llm.pte: depth 512 \+ prompt 64 \+ new 32 tokens "
                                        r"is over the program's limits"):
        gen_block.generation_for(Generation(64, 32, depth=512), llm, 64, 32)
    assert gen_block.generation_for(Generation(16, 8, 100), llm, 64, 32).positions == 124
    # Named as the user named it, with the depth that fits and the documented remedy (issue
    # 49, item 9: the export cache's path and "ask for 128 tokens or fewer" only).
    with pytest.raises(Sme2Error) as e:
        gen_block.generation_for(Generation(64, 32, depth=512), llm, 64, 32, "tiny_llama")
    assert str(e.value) == (
        "tiny_llama: depth 512 + prompt 64 + new 32 tokens is over the program's limits "
        "(max_seq_len 128, max_context_len 128): ask for 128 tokens or fewer in all "
        "(--sme2-context-depth 32 or less fits), or measure a model with a longer cache: "
        "executorch:llama?max_context_len=1024 (tiny_llama's shape) in --sme2-llm-models")
    with pytest.raises(Sme2Error, match=r"or export it with a longer cache \(export_llama "
                                        r"--max_context_length\)"):
        gen_block.generation_for(Generation(64, 32, depth=512), llm, 64, 32, "mine/llm.pte")


@pytest.mark.parametrize("change, says", [
    ({"forward_inputs": (("float32", (1, 3, 8, 8), False),)}, "does not take"),
])
def test_what_a_program_cannot_run_is_one_line_before_running(tmp_path, change, says):
    facts = LlmFacts(methods=("forward", "get_max_seq_len", "use_kv_cache"),
                     forward_inputs=(("int64", (1, 127), True), ("int64", (1,), False)))
    with pytest.raises(Sme2Error, match=says):
        gen_block.check_program(tmp_path / "x.pte", replace(facts, **change), Generation(8, 4))


def test_a_custom_sdpa_program_is_no_longer_refused_by_its_methods(tmp_path):
    # ExecuTorch's production recipe (--use_sdpa_with_kv_cache) runs from the wheel: whether a
    # device can give a runner its custom operators is the device's to say
    # (devices.base.check_operators), not the program's metadata.
    facts = LlmFacts(methods=("forward", "get_max_seq_len", "use_kv_cache"),
                     use_sdpa_with_kv_cache=True,
                     forward_inputs=(("int64", (1, 127), True), ("int64", (1,), False)))
    gen_block.check_program(tmp_path / "x.pte", facts, Generation(8, 4))


class _TracingSamplingDevice:
    """A device like QEMU: every process traced, and sampled when asked; it records the
    requests and writes nothing but the names it would."""

    def __init__(self):
        self.requests = []

    def run(self, runner, request):
        from pytest_sme2.runners.base import RunOutcome

        self.requests.append(request)
        trace = request.etdump.with_name(f"{request.etdump.stem}.kernels.csv")
        return RunOutcome(request.etdump, 0.1, "", "", kernel_trace=trace,
                          kernel_sample=request.kernel_sample)


def _generation_request(tmp_path):
    from pytest_sme2.runners.base import RunRequest

    return RunRequest(pte=tmp_path / "llm.pte", etdump=tmp_path / "sme2_on-block0.etdump",
                      runs=2, warmup=1, generation=Generation(16, 4))


def test_phase_only_processes_keep_the_trace_where_they_are_sampled_too(tmp_path):
    """QEMU traces every process and samples kernels as well (--sme2-sample auto): each phase
    keeps its trace, which alone proves a kernel's absence, beside its samples (the trace was
    dropped when the phase-only processes were sampled)."""
    from pytest_sme2.runners.base import RunOutcome

    device, request = _TracingSamplingDevice(), _generation_request(tmp_path)
    block = RunOutcome(request.etdump, 3.0, "", "", kernel_trace=tmp_path / "block.csv")
    got = gen_block.phase_evidence(None, device, request, block, sample=True)
    assert got.problem is None
    assert got.prefill_trace == tmp_path / "sme2_on-block0.prefill-only.kernels.csv"
    assert got.decode_trace == tmp_path / "sme2_on-block0.decode-only.kernels.csv"
    assert got.prefill_sample == tmp_path / "sme2_on-block0.prefill-only.sampled.csv"
    assert got.decode_sample == tmp_path / "sme2_on-block0.decode-only.sampled.csv"
    traced_only = gen_block.phase_evidence(None, _TracingSamplingDevice(), request, block,
                                           sample=False)
    assert traced_only.prefill_trace and traced_only.decode_sample is None


def test_phase_only_processes_never_write_over_the_blocks_files(tmp_path):
    """Each phase-only process has its own ETDump and samples CSV: ``with_suffix`` on
    ``sme2_on-block0.prefill-only`` gave both phases the block's own ETDump
    (``sme2_on-block0.etdump``, overwritten) and one CSV (the decode's samples read as the
    prefill's)."""
    from pytest_sme2.runners.base import RunOutcome

    device, request = _TracingSamplingDevice(), _generation_request(tmp_path)
    gen_block.phase_evidence(None, device, request, RunOutcome(request.etdump, 3.0, "", ""),
                             sample=True)
    etdumps = [r.etdump for r in device.requests]
    samples = [r.kernel_sample for r in device.requests]
    assert [r.generation for r in device.requests] == [Generation(16, 4).prefill_only(),
                                                       Generation(16, 4).decode_only()]
    assert request.etdump not in etdumps and len(set(etdumps)) == 2
    assert len(set(samples)) == 2 and all(s.name.endswith(".sampled.csv") for s in samples)


def test_sampled_phase_processes_run_enough_generations_of_that_phase(monkeypatch, tmp_path):
    """How many generations a sampled phase-only process runs comes from the runner's own
    timer of that phase (110 ms prefill, 35 ms decode per generation -> 5 and 15 for 0.5 s),
    not from the block's wall time, which counts the process's load: one generation of 16+4
    measured in a 1.5 s process gave the prefill 1 generation and the decode 1 (a handful
    of samples in each phase's kernels on the emulated phone)."""
    from dataclasses import replace as dc_replace

    from pytest_sme2.runners.base import RunOutcome

    summary = dc_replace(_summary(generations=1, warmup=0, new=4), prefill_ms=(110.0,),
                         decode_ms=(35.0,))
    monkeypatch.setattr(gen_block, "parse_summary",
                        lambda stdout: type("S", (), {"generation": summary})())
    request = dc_replace(_generation_request(tmp_path), runs=1, warmup=0)
    block = RunOutcome(request.etdump, 1.5, "", "")
    device = _TracingSamplingDevice()
    gen_block.phase_evidence(None, device, request, block, sample=True)
    assert [r.runs for r in device.requests] == [5, 15]
    assert all(r.timeout_s >= 15 for r in device.requests)
    # A runner without the phase timers: the block's wall time, as before.
    monkeypatch.setattr(gen_block, "parse_summary",
                        lambda stdout: type("S", (), {"generation": None})())
    assert gen_block._sampled_generations(block, request, "decode") == 1


def test_the_decode_steps_kernels_are_the_decode_only_processes(monkeypatch, tmp_path):
    """The block's kernel evidence is of its decode steps: the decode-only process's trace
    and samples where they exist, not the block's whole process (whose trace has the
    prefill's GEMM, an 8da8w prefill's SME2 MOPA kernel shown as the decode's)."""
    summary = _summary(generations=4, warmup=1, new=5)
    whole, decode = tmp_path / "block.kernels.csv", tmp_path / "decode-only.kernels.csv"
    header = "name,isa_family,isa,kind,library,blocks,streaming_blocks\n"
    total = "(all executed blocks),,,total,,100,6\n"
    whole.write_text(header + "kai_run_x_sme2_mopa,SME2,sme2_mopa,kleidiai,libx.so,3,3\n"
                     "kai_run_x_sme2_dot,SME2,sme2_dot,kleidiai,libx.so,3,3\n" + total)
    decode.write_text(header + "kai_run_x_sme2_dot,SME2,sme2_dot,kleidiai,libx.so,3,3\n"
                      + total)
    events = parse_etdump(_generation_etdump(4, 1, 5))
    common = dict(source="x", etrecord=None, rules=None)
    block = analyze_block(events, summary, **common, evidence=gen_block.BlockEvidence(
        True, whole, None, gen_block.PhaseEvidence(decode_trace=decode)))
    assert block.kernel_trace == decode
    names = [k.name for k in block.decode.evidence.executed_kernels]
    assert names == ["kai_run_x_sme2_dot"]
    # No phase-only process (a later block): the block's own trace, all it has.
    later = analyze_block(events, summary, **common,
                          evidence=gen_block.BlockEvidence(True, whole))
    assert later.kernel_trace == whole and len(later.decode.evidence.executed_kernels) == 2


def test_a_damaged_program_is_no_llm_and_its_run_says_what_is_wrong(tmp_path):
    """Found by the fault suite: reading a damaged .pte's methods raised before the runner
    could name the damage (the export cache's damaged-program test)."""
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program at all")
    assert gen_block.generation_for(None, bad, 64, 32) is None
