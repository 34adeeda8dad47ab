"""What every report says about an LLM measured as a generation (issue 30): its per-phase
figures pooled over a side's blocks, the kernels each phase ran and their ISA family (read from
their names by :mod:`pytest_sme2.analysis.isa`), and the one sentence per quantization scheme
that says which kernels reached which phase.

A generation block (``BlockResult.generation`` set) keeps a forward pass's fields: ``e2e_ms``
holds decode time per token (each timed decode step), and its analysis is of the decode
executes. The prefill and the time to first token are only in ``generation``. The kernel
sentences are built from the evidence the session collected (executed, sampled or logged
kernels), never from a table of what a scheme is expected to run.

Pure: records in, plain values out; the terminal, report.md, the GitHub summary and the
recommendations format them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_sme2.analysis.isa import PhaseKernel, kernel_phrase, phase_kernels
from pytest_sme2.results import BlockResult, Judgement
from pytest_sme2.results.generation import DECODE, PHASES, PREFILL, GenerationResult, PhaseStats
from pytest_sme2.results.records import KernelEvidence

TOKENS_SHOWN = 8      # the first generated token ids a report shows


def is_generation(r: BlockResult) -> bool:
    return r.generation is not None


def generation_blocks(results: Iterable[BlockResult]) -> list[BlockResult]:
    return [r for r in results if r.generation is not None]


# -- figures pooled over a side's blocks -----------------------------------------------------

def _median(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return statistics.median(kept) if kept else None


@dataclass
class PhaseFigures:
    """One phase of a side's blocks: each figure the median over blocks (one block: its own),
    as :func:`pytest_sme2.results.pool` takes the median of block medians."""

    phase: str
    tokens: int = 0
    executes: int = 0
    generations: int = 0            # timed generations, all blocks
    median_ms: float | None = None  # the phase's time per generation
    p90_ms: float | None = None
    cv_pct: float | None = None
    tokens_per_s: float | None = None
    token_median_ms: float | None = None
    token_p90_ms: float | None = None
    token_cv_pct: float | None = None
    categories_ms: dict[str, float] = field(default_factory=dict)   # mean over blocks
    evidence: KernelEvidence | None = None      # the first block's that has any

    @property
    def sme2(self) -> str:
        return self.evidence.sme2 if self.evidence is not None else "unknown"


@dataclass
class GenerationFigures:
    """A side's generation: its phases, time to first token and the first block's tokens."""

    prompt_tokens: int
    new_tokens: int
    dynamic_shape: bool
    blocks: int
    prefill: PhaseFigures
    decode: PhaseFigures
    ttft_ms: float | None = None
    generation_ms: float | None = None
    tokens: list[int] = field(default_factory=list)
    max_context_len: int | None = None

    def phase(self, name: str) -> PhaseFigures:
        return self.prefill if name == PREFILL else self.decode

    @property
    def phases(self) -> tuple[PhaseFigures, PhaseFigures]:
        return self.prefill, self.decode


def _phase(name: str, stats: Sequence[PhaseStats]) -> PhaseFigures:
    first = stats[0]
    categories: dict[str, float] = {}
    for s in stats:
        for cat, ms in s.categories_ms.items():
            categories[cat] = categories.get(cat, 0.0) + ms / len(stats)
    return PhaseFigures(
        phase=name, tokens=first.tokens, executes=first.executes,
        generations=sum(s.generations for s in stats),
        median_ms=_median(s.median_ms for s in stats), p90_ms=_median(s.p90_ms for s in stats),
        cv_pct=_median(s.cv_pct for s in stats),
        tokens_per_s=_median(s.tokens_per_s for s in stats),
        token_median_ms=_median(s.token_median_ms for s in stats),
        token_p90_ms=_median(s.token_p90_ms for s in stats),
        token_cv_pct=_median(s.token_cv_pct for s in stats), categories_ms=categories,
        evidence=next((s.kernel_evidence for s in stats if s.kernel_evidence is not None),
                      None))


def figures(blocks: Sequence[BlockResult]) -> GenerationFigures | None:
    """The generation of a side's blocks, pooled; None when none of them is a generation."""
    gens: list[GenerationResult] = [b.generation for b in blocks if b.generation is not None]
    if not gens:
        return None
    g = gens[0]
    return GenerationFigures(
        prompt_tokens=g.prompt_tokens, new_tokens=g.new_tokens, dynamic_shape=g.dynamic_shape,
        blocks=len(gens), prefill=_phase(PREFILL, [x.prefill for x in gens]),
        decode=_phase(DECODE, [x.decode for x in gens]),
        ttft_ms=_median(x.ttft_ms for x in gens),
        generation_ms=_median(x.generation_ms for x in gens), tokens=list(g.tokens),
        max_context_len=g.max_context_len)


def phase_judgements(r: BlockResult) -> dict[str, Judgement]:
    """The gate's verdicts on a generation's phases: decode per token (the block's own
    end-to-end verdict), prefill and time to first token (``phase_judgements``)."""
    out: dict[str, Judgement] = {}
    if r.judgement is not None:
        out[DECODE] = r.judgement
    for name, j in (r.phase_judgements or {}).items():
        out[name] = j
    return out


def tokens_text(tokens: Sequence[int], shown: int = TOKENS_SHOWN) -> str:
    """The first generated ids: ``292 396 17 … (33 ids)``."""
    head = " ".join(str(t) for t in tokens[:shown])
    return f"{head} … ({len(tokens)} ids)" if len(tokens) > shown else head or "-"


# -- kernels per phase -----------------------------------------------------------------------

@dataclass(frozen=True)
class SchemeKernels:
    """What one scheme's generation ran per phase, on one side (runner)."""

    scheme: str
    model: str
    runner: str
    device: str
    phrases: dict[str, str | None]     # phase -> kernel_phrase
    verdicts: dict[str, str]           # phase -> SME2 verdict

    def sentence(self, name_runner: bool = False, name_model: bool = False) -> str:
        who = self.scheme
        if name_model:
            who = f"{self.model} {who}"
        if name_runner:
            who = f"{who} on {self.runner}"
        pre, dec = self.phrases.get(PREFILL), self.phrases.get(DECODE)
        if pre and dec and pre == dec:
            ran = f"ran {pre} in prefill and decode"
        else:
            parts = [f"{p} in {ph}" for ph, p in ((PREFILL, pre), (DECODE, dec)) if p]
            ran = "ran " + " and ".join(parts) if parts else "named no kernels"
            missing = [ph for ph, p in ((PREFILL, pre), (DECODE, dec)) if not p]
            if parts and missing:
                ran += f" (no kernels named for {' or '.join(missing)})"
        return f"{who} {ran}"


def scheme_kernels(results: Iterable[BlockResult]) -> list[SchemeKernels]:
    """One record per (model, scheme, runner, device) generation, in the order they ran."""
    seen: dict[tuple[str, str, str, str], list[BlockResult]] = {}
    for r in generation_blocks(results):
        seen.setdefault((r.model, r.dtype, r.runner_name, r.device_label), []).append(r)
    out = []
    for (model, scheme, runner, device), blocks in seen.items():
        f = figures(blocks)
        assert f is not None
        out.append(SchemeKernels(scheme, model, runner, device,
                                 {p: kernel_phrase(f.phase(p).evidence) for p in PHASES},
                                 {p: f.phase(p).sme2 for p in PHASES}))
    return out


def kernel_sentences(results: Iterable[BlockResult]) -> list[str]:
    """One sentence per scheme (and runner, model, where several) on what each phase ran,
    only where a phase's evidence names kernels."""
    found = [s for s in scheme_kernels(results) if any(s.phrases.values())]
    runners = len({s.runner for s in found}) > 1
    models = len({s.model for s in found}) > 1
    devices = len({s.device for s in found}) > 1
    out = []
    for s in found:
        text = s.sentence(name_runner=runners, name_model=models)
        out.append(text + (f" ({s.device})" if devices else ""))
    return out


# -- report.md's Generation section ----------------------------------------------------------

def _share(ms: float | None, total: float | None) -> float | None:
    return 100.0 * ms / total if ms is not None and total else None


def kernels_cell(kernels: Sequence[PhaseKernel]) -> str:
    """A markdown cell listing kernels: ``name`` (family, how known), one per line."""
    from pytest_sme2.report.cells import MISSING, code

    return "<br>".join(f"{code(k.name)} ({k.family}, {k.how})" for k in kernels) or MISSING


def report_rows(us) -> list[dict]:
    """One entry per LLM benchmark and runner (a report unit's side whose blocks are a
    generation): plain values for ``report.md.j2``'s Generation section."""
    from pytest_sme2.report.digest import category_order

    out = []
    for u in us:
        for side in u.sides:
            g = figures(side.blocks)
            if g is None:
                continue
            pre, dec = g.prefill, g.decode
            pre_total = sum(pre.categories_ms.values()) or None
            dec_total = sum(dec.categories_ms.values()) or None
            cats = category_order(list(pre.categories_ms) + [c for c in dec.categories_ms
                                                             if c not in pre.categories_ms])
            out.append({
                "title": f"{u.point} {side.runner}", "scheme": u.dtype,
                "emulated": any(b.emulated for b in side.blocks),
                "prompt_tokens": g.prompt_tokens, "new_tokens": g.new_tokens,
                "prefill_how": ("one execute" if g.dynamic_shape
                                else f"{pre.executes} one-token executes"),
                "generations": pre.generations, "blocks": g.blocks,
                "phases": [vars(p) for p in g.phases],
                "ttft_ms": g.ttft_ms, "generation_ms": g.generation_ms,
                "tokens": tokens_text(g.tokens),
                "categories": [(c, pre.categories_ms.get(c),
                                _share(pre.categories_ms.get(c), pre_total),
                                dec.categories_ms.get(c),
                                _share(dec.categories_ms.get(c), dec_total))
                               for c in cats],
                "kernels": [{"phase": p.phase, "verdict": p.sme2,
                             "reason": p.evidence.reason if p.evidence else
                             "no kernel evidence was collected for this phase",
                             "phrase": kernel_phrase(p.evidence),
                             "cell": kernels_cell(phase_kernels(p.evidence))}
                            for p in g.phases],
            })
    return out


def summary_lines(us) -> list[str]:
    """report.md's Summary: one line per LLM benchmark and runner."""
    from pytest_sme2.report.cells import fmt_ms, fmt_tokens_per_s

    out = []
    for u in us:
        for side in u.sides:
            g = figures(side.blocks)
            if g is None:
                continue
            emulated = " (emulated CPU: says nothing about speed)" if any(
                b.emulated for b in side.blocks) else ""
            out.append(f"{u.point} {side.runner} (LLM, {g.prompt_tokens} + {g.new_tokens} "
                       f"tokens): prefill {fmt_tokens_per_s(g.prefill.tokens_per_s)} tok/s, "
                       f"decode {fmt_tokens_per_s(g.decode.tokens_per_s)} tok/s (per token "
                       f"median {fmt_ms(g.decode.token_median_ms)} ms, p90 "
                       f"{fmt_ms(g.decode.token_p90_ms)} ms), TTFT {fmt_ms(g.ttft_ms)} ms"
                       f"{emulated}.")
    return out
