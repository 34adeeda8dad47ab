"""An LLM's block measured as a generation (prefill, then greedy decode), not as one
``Method::execute`` on fixed inputs: when a block is one, the request it runs, the phase-only
evidence processes that prove which kernels each phase ran, and the block's analysis.

A program is an LLM when its own metadata says so (``use_kv_cache`` and ``get_max_seq_len``,
as ExecuTorch's ``export_llama``/``export_llm`` write them) or when the caller asked for a
generation (``sme2_generate``). The block then records:

- ``generation``: per phase (prefill, decode) the time per generation, tokens per second,
  per-token statistics, operator categories and kernel evidence; time to first token; the
  sampled token ids (:class:`pytest_sme2.results.GenerationResult`);
- ``e2e_ms``: every timed decode step's ``Method::execute`` (ms per token), so the gate, the
  comparisons and the reports judge decode speed with the rules they already have; its
  analysis (categories, operators, kernels) is that of the decode steps.

Under QEMU the kernel trace logs each translated block once per process, so one process
cannot tell the phases apart: a prefill-only and a decode-only process run beside the
benchmark's first block (:meth:`RunRequest.phase_only`), traced. Where kernels are sampled
(a phone), those two processes are sampled instead, each long enough to be seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from pytest_sme2.analysis.categories import CategoryRule
from pytest_sme2.analysis.phases import analyze_generation, keep_runs, phase_tags
from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.llm_observer import ObserverStats
from pytest_sme2.analysis.observed_generation import (forwards_only, observed_summary,
                                                      observer_report, report_line,
                                                      timed_generation)
from pytest_sme2.analysis.runner_summary import (GenerationSummary, RunnerSummary,
                                                  parse_summary)
from pytest_sme2.analysis.summary import Analysis, analyze
from pytest_sme2.analysis.traffic import decode_traffic
from pytest_sme2.devices.base import Device
from pytest_sme2.readers.pte_traffic import decode_bytes
from pytest_sme2.results.generation import DecodeTraffic
from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.spec import is_pte
from pytest_sme2.programs.llm.facts import LlmFacts, llm_facts
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.readers.etrecord import ETRecordInfo
from pytest_sme2.results import Generation, GenerationResult, OutputCheck, PhaseStats
from pytest_sme2.runners.base import Runner, RunOutcome, RunRequest

PHASES = ("prefill", "decode")
# CPU time a sampled phase-only process aims for (as a benchmark's evidence process does).
SAMPLE_CPU_S = 0.5
MAX_SAMPLED_GENERATIONS = 2000


@lru_cache(maxsize=64)
def _facts(pte: str, size: int, mtime_ns: int) -> LlmFacts | None:
    try:
        return llm_facts(Path(pte))
    except Sme2Error:   # a damaged program: not an LLM here; its run says what is wrong
        return None


def facts_of(pte: Path) -> LlmFacts | None:
    """What ``pte``'s methods say when it is an LLM (else None): read once per file version
    from the flatbuffer, without the runtime."""
    st = pte.stat()
    return _facts(str(pte), st.st_size, st.st_mtime_ns)




def generation_for(asked: Generation | None, pte: Path, prompt_tokens: int,
                   new_tokens: int, model: str = "") -> Generation | None:
    """The generation a block runs: the one asked for, else the session's
    (``--sme2-prompt-tokens``, ``--sme2-new-tokens``) for a program that is an LLM, else None
    (a forward pass on fixed inputs). What the program's own methods show it cannot run is
    one line here, before any process starts; ``model``: the model as the user named it
    (the line names it rather than the export cache's file)."""
    facts = facts_of(pte)
    if asked is None and facts is None:
        return None
    if facts is None:
        raise Sme2Error(f"{pte}: not an LLM program (its metadata has no use_kv_cache and "
                        "get_max_seq_len methods): measure it with sme2_bench, or export it "
                        "with a KV cache (ExecuTorch's export_llama -kv)")
    generation = asked or Generation(prompt_tokens, new_tokens)
    if generation.new_tokens < 1:
        raise Sme2Error(f"{pte}: an LLM is measured by its decode steps: ask for 1 or more "
                        f"new tokens, not {generation.new_tokens}")
    check_program(pte, facts, generation, model)
    return generation


def longer_cache(model: str) -> str:
    """How to get a longer KV cache for ``model`` (docs/llms.md, at context depth)."""
    if is_pte(model):
        return "export it with a longer cache (export_llama --max_context_length)"
    return ("measure a model with a longer cache: executorch:llama?max_context_len=1024 "
            "(tiny_llama's shape) in --sme2-llm-models")


def check_program(pte: Path, facts: LlmFacts, generation: Generation, model: str = "") -> None:
    """One line for what the program says it cannot do: a forward that does not take
    (tokens, input_pos), a generation over its limits. Limits the file does not give are the
    runner's to check. (Custom attention operators are the device's and runner's to judge:
    :func:`pytest_sme2.devices.base.check_operators`.)"""
    if facts.forward_inputs and not facts.takes_tokens_and_pos:
        raise Sme2Error(f"{pte}: forward does not take (tokens int64[1, n], input_pos "
                        "int64[1]), the interface the generation loop drives")
    context = facts.max_context_len or facts.max_seq_len
    if context and generation.positions > context:
        depth = f"depth {generation.depth} + " if generation.depth else ""
        room = context - generation.prompt_tokens - generation.new_tokens
        fits = (f" (--sme2-context-depth {room} or less fits)"
                if generation.depth and room >= 0 else "")
        raise Sme2Error(f"{model or pte}: {depth}prompt {generation.prompt_tokens} + new "
                        f"{generation.new_tokens} tokens is over the program's limits "
                        f"(max_seq_len {facts.max_seq_len}, max_context_len "
                        f"{facts.max_context_len}): ask for {context} tokens or fewer in all"
                        f"{fits}, or {longer_cache(model or str(pte))}")


@dataclass(frozen=True)
class PhaseEvidence:
    """The kernel evidence of the phase-only processes: traces (QEMU) or samples (a phone),
    each phase's file or None, and why one is missing."""

    prefill_trace: Path | None = None
    decode_trace: Path | None = None
    prefill_sample: Path | None = None
    decode_sample: Path | None = None
    problem: str | None = None


def phase_evidence(runner: Runner, device: Device, request: RunRequest, outcome: RunOutcome,
                   sample: bool) -> PhaseEvidence:
    """Run the prefill-only and decode-only processes when the block's own process was traced
    (``outcome.kernel_trace``) or kernels are sampled (``sample``); a failure is kept as
    ``problem``, never raised: the measured block stands."""
    if outcome.kernel_trace is None and not sample:
        return PhaseEvidence()
    files: dict[str, Path | None] = {}
    try:
        for phase in PHASES:
            one = request.phase_only(phase)
            files_of = phase_files(request.etdump, phase)
            one = replace(one, etdump=files_of["etdump"], outputs=None,
                          kernel_trace=None, kernel_sample=None)
            if sample:
                one = replace(one, runs=_sampled_generations(outcome, request, phase),
                              kernel_sample=files_of["sample"],
                              timeout_s=max(request.timeout_s, 10 * outcome.wall_s))
            got = device.run(runner, one)
            # A device that traces (QEMU) traces every process, a sampled one too: keep both,
            # the trace being what proves a kernel's absence.
            files[f"{phase}_trace"] = got.kernel_trace
            if sample:
                files[f"{phase}_sample"] = got.kernel_sample
    except Sme2Error as e:
        return PhaseEvidence(**files, problem=f"phase-only evidence process failed: {e}")
    return PhaseEvidence(**files)


def phase_files(etdump: Path, phase: str) -> dict[str, Path]:
    """A phase-only process's files beside the block's ETDump (``sme2_on-block0.etdump``):
    ``sme2_on-block0.prefill-only.etdump`` and ``sme2_on-block0.prefill-only.sampled.csv``,
    never the block's own names (``Path.with_suffix`` would take ``.prefill-only`` for the
    suffix and give both phases the block's ETDump)."""
    stem = f"{etdump.stem}.{phase}-only"
    return {"etdump": etdump.with_name(f"{stem}.etdump"),
            "sample": etdump.with_name(f"{stem}.sampled.csv")}


def _sampled_generations(outcome: RunOutcome, request: RunRequest, phase: str) -> int:
    """Phase-only generations enough for about ``SAMPLE_CPU_S`` in the phase: judged by the
    runner's own timer of that phase per generation in the block just measured (its summary's
    ``prefill_ms``/``decode_ms``), else by the block's wall time per generation (which counts
    the process's start and load, and both phases: far too few generations where loading
    dominates, as on an emulated phone, whose phases then got a few samples each)."""
    summary = parse_summary(outcome.stdout).generation
    timed = () if summary is None else (summary.prefill_ms if phase == "prefill"
                                        else summary.decode_ms)
    timed = tuple(t for t in timed if t > 0)
    if timed:
        per = float(np.median(timed)) / 1000.0
    else:
        per = outcome.wall_s / max(request.executions, 1) * (0.5 if phase == "prefill" else 1.0)
    return min(MAX_SAMPLED_GENERATIONS, max(1, math.ceil(SAMPLE_CPU_S / max(per, 1e-6))))


@dataclass(frozen=True)
class GenerationBlock:
    """A generation block's analyses: ``decode`` (the decode steps, for the block's e2e,
    categories, operators and kernel evidence) and ``generation`` (both phases)."""

    decode: Analysis
    generation: GenerationResult
    # The kernel evidence files the decode analysis read (see analyze_block).
    kernel_trace: Path | None = None
    kernel_sample: Path | None = None


@dataclass(frozen=True)
class BlockEvidence:
    """What a block's kernel evidence is made of: SME2 as its process saw it, the process's
    own trace or samples, and the phase-only processes'."""

    device_sme2: bool | None = None
    kernel_trace: Path | None = None
    kernel_sample: Path | None = None
    phases: PhaseEvidence = PhaseEvidence()
    device_sme: bool | None = None      # SME as the process saw it (the SME level's verdict)


@dataclass(frozen=True)
class Observed:
    """A generation ExecuTorch's llama_main ran (it prints a PyTorchObserver report, not our
    summary): its ETDump cut to the timed generation, our summary of it, and its report."""

    events: pd.DataFrame        # the timed generation's forwards, numbered 0..
    process_events: pd.DataFrame    # every forward of the process (its start-up's)
    summary: RunnerSummary
    report: ObserverStats
    warmup: int                 # warm-up generations it ran before (--warmup: one)

    def record(self) -> dict[str, float | int | None]:
        """Its report's figures, for ``GenerationResult.runner_report``."""
        r = self.report
        return {"runner": "llama_main", "load_ms": r.load_ms, "prefill_ms": r.prefill_ms,
                "decode_ms": r.decode_ms, "ttft_ms": r.ttft_ms,
                "prefill_tokens_per_s": r.prefill_tokens_per_s,
                "decode_tokens_per_s": r.decode_tokens_per_s,
                "prompt_tokens": r.prompt_tokens, "generated_tokens": r.generated_tokens}


def observed_generation(request: RunRequest, stdout: str, runner: str) -> Observed:
    """:mod:`pytest_sme2.analysis.observed_generation` on a llama_main's process (the devices
    refuse one that wrote no ETDump, quoting its report: runners.binary.missing_etdump)."""
    pte, etdump = request.pte, request.etdump
    report = observer_report(stdout, f"runner {runner!r}")
    if not etdump.is_file():        # a device returned without one: say what it measured
        raise Sme2Error(f"runner {runner!r} wrote no ETDump ({etdump.name}); its own report: "
                        f"{report_line(report)}")
    facts = facts_of(pte)
    dynamic = facts is None or bool(facts.enable_dynamic_shape) or facts.use_kv_cache is False
    summary = observed_summary(report, dynamic, facts.max_seq_len if facts else None)
    g = summary.generation
    assert g is not None
    events = read_etdump(etdump)
    return Observed(timed_generation(events, g.executes_per_generation, str(etdump)),
                    forwards_only(events), summary, report, 1 if request.warmup > 0 else 0)


def analyze_block(events: pd.DataFrame, summary: GenerationSummary | None, *, source: str,
                  etrecord: ETRecordInfo | None, rules: Sequence[CategoryRule] | None,
                  evidence: BlockEvidence) -> GenerationBlock:
    """The generation's per-phase analysis, and the ordinary analysis of its timed decode
    steps (one run per step). The decode steps' kernels are the decode-only process's where
    one ran (``phases``): the block's own trace or samples cover its whole process, the
    prefill's kernels too (an 8da8w prefill's SME2 GEMM shown as the decode's)."""
    phases = evidence.phases
    kernel_trace = phases.decode_trace or evidence.kernel_trace
    kernel_sample = phases.decode_sample or evidence.kernel_sample
    if summary is None:
        raise Sme2Error(f"{source}: the runner printed no generation summary: it did not run "
                        "the token loop (a runner without --generate?)")
    sme2, sme = evidence.device_sme2, evidence.device_sme
    generation = analyze_generation(
        events, summary, source=source, rules=rules,
        prefill=KernelSources(sme2, trace=phases.prefill_trace, sample=phases.prefill_sample,
                              device_sme=sme),
        decode=KernelSources(sme2, trace=phases.decode_trace, sample=phases.decode_sample,
                             device_sme=sme))
    if summary.decode_executes < 1:
        raise Sme2Error(f"{source}: a generation without decode steps (new tokens 0) has "
                        "nothing to time per token; ask for 1 or more")
    decode = analyze(decode_steps(events, summary, source),
                     warmup=0, source=source, etrecord=etrecord, rules=rules,
                     kernels=KernelSources(sme2, trace=kernel_trace, sample=kernel_sample,
                                           device_sme=sme))
    return GenerationBlock(decode, generation, kernel_trace, kernel_sample)


def with_traced_phases(timed: GenerationResult, traced: GenerationResult) -> GenerationResult:
    """The untraced generations' times per phase with the traced generations' categories and
    kernel evidence (their own Other: the traced phase's time less the named categories)."""
    def phase(t: PhaseStats, tr: PhaseStats) -> PhaseStats:
        return replace(t, categories_ms=tr.categories_ms, kernel_evidence=tr.kernel_evidence)

    return replace(timed, prefill=phase(timed.prefill, traced.prefill),
                   decode=phase(timed.decode, traced.decode))


def decode_steps(events: pd.DataFrame, loop: GenerationSummary,
                 source: str = "ETDump") -> pd.DataFrame:
    """The events of the timed generations' decode steps, one run per step numbered from 0
    in order, with the program's load block (run -1) kept; a depth fill's executes are not
    decode steps (they belong to no generation: ``phase_tags``)."""
    run = events["run"].to_numpy()
    executes = int(np.unique(run[run >= 0]).size)
    gen_of, is_prefill = phase_tags(executes, loop.generations, loop.prefill_executes,
                                    loop.decode_executes, source, loop.depth_executes)
    # Execute blocks are numbered 0.. in order (the analysis checked there are no gaps).
    return keep_runs(events, np.flatnonzero((gen_of >= loop.warmup) & ~is_prefill))


def check_tokens(base: GenerationResult, candidate: GenerationResult) -> OutputCheck:
    """Two runners' generations agree when they sampled the same token ids (greedy decoding
    of the same prompt); ``max_abs_diff`` counts the positions that differ."""
    a, b = base.tokens, candidate.tokens
    differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
    return OutputCheck(float(differ), 0.0, differ == 0, max_rel_diff=differ / max(len(a), 1))


def traffic_of(device: Device, pte: Path, ptd: Path | None, g: GenerationResult,
               emulated: bool) -> DecodeTraffic | None:
    """What each decode step of ``g`` reads, with the device's copy bandwidth (issue 38);
    None on an emulated device (the report says why) or when the program cannot tell."""
    if emulated:
        return None
    try:
        read = decode_bytes(pte, ptd, g.max_context_len)
    except Sme2Error:
        return None
    bw = device.copy_bandwidth()
    return decode_traffic(read, g, bw.gbps if bw is not None else None,
                          bw.source if bw is not None else "this device measures none")
