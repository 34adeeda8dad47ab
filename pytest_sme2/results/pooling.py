"""The one pooling of a benchmark's blocks, for every report, the history and bisect: latency
over blocks, categories and operators per block, kernel evidence, an LLM's generation per
phase."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_sme2.results.timing import LatencyStats
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.block import BlockResult
from pytest_sme2.results.generation import (BLOCK_PHASES, DECODE, PREFILL, GenerationResult,
                                            PhaseStats, llama_bench_name)
from pytest_sme2.results.records import (KernelEvidence, LoggedKernel, OperatorStats,
                                         TracedKernel)
from pytest_sme2.results.startup import Startup

# -- pooling blocks --------------------------------------------------------------------------

@dataclass(frozen=True)
class PooledLatency:
    """A benchmark's blocks (runner processes) as one set of figures. The block is the unit
    of replication, as in comparisons and the regression gate: ``median_ms`` is the median of
    the block medians, ``p90_ms``, ``std_ms`` and ``cv_pct`` the median over blocks of each
    block's own; ``mean_ms`` the mean of the block means (what the categories add up to);
    ``min_ms``/``max_ms`` over all runs; ``n`` every timed run. One block: its own figures."""

    median_ms: float
    p90_ms: float
    std_ms: float
    cv_pct: float
    mean_ms: float
    min_ms: float
    max_ms: float
    n: int
    blocks: int
    block_medians_ms: tuple[float, ...]


def pool(blocks: Iterable[BlockResult | LatencyStats]) -> PooledLatency:
    """The one pooling of a benchmark's blocks, used by the terminal table, report.md and the
    comparisons' medians."""
    stats = [b.e2e if isinstance(b, BlockResult) else b for b in blocks]
    if not stats:
        raise Sme2Error("no blocks to pool")
    medians = tuple(s.median_ms for s in stats)
    return PooledLatency(
        median_ms=statistics.median(medians),
        p90_ms=statistics.median(s.p90_ms for s in stats),
        std_ms=statistics.median(s.std_ms for s in stats),
        cv_pct=statistics.median(s.cv_pct for s in stats),
        mean_ms=statistics.fmean(s.mean_ms for s in stats),
        min_ms=min(s.min_ms for s in stats), max_ms=max(s.max_ms for s in stats),
        n=sum(s.n for s in stats), blocks=len(stats), block_medians_ms=medians)


def mean_per_block(values: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the mean over blocks (a block without the key counts 0), keys in first-seen
    order. Blocks' categories pooled so are shares of :attr:`PooledLatency.mean_ms`."""
    keys = list(dict.fromkeys(k for d in values for k in d))
    return {k: sum(float(d.get(k, 0.0)) for d in values) / len(values) for k in keys} \
        if values else {}


def pool_categories(blocks: Sequence[BlockResult]) -> dict[str, float]:
    """Mean ms per run of each operator category over a benchmark's blocks."""
    return mean_per_block([b.categories_ms for b in blocks])


def pool_startup(blocks: Iterable[BlockResult]) -> Startup | None:
    """The blocks of one side of a comparison as one startup record: every block is a cold
    process, so their processes pool."""
    found = [b.startup for b in blocks if b.startup is not None]
    if not found:
        return None
    return Startup(pte_bytes=found[0].pte_bytes, ptd_bytes=found[0].ptd_bytes,
                   processes=[p for s in found for p in s.processes],
                   load_source=found[0].load_source, memory_source=found[0].memory_source,
                   problem="; ".join(dict.fromkeys(s.problem for s in found if s.problem)))


def pool_operators(blocks: list[BlockResult]) -> list[OperatorStats]:
    """Operators by (name, instruction) over blocks: the analysis' per-run figures averaged
    (a block without the operator counts 0) and its flags where it set them in at least half
    of the blocks; largest first."""
    rows: dict[tuple[str, int], list[OperatorStats]] = {}
    for b in blocks:
        for op in b.operators:
            rows.setdefault((op.name, op.instruction_id), []).append(op)
    n = max(len(blocks), 1)
    out = []
    for ops in rows.values():
        if len(ops) == n == 1:
            out.append(ops[0])
            continue
        out.append(replace(
            ops[0], mean_ms_per_run=sum(o.mean_ms_per_run for o in ops) / n,
            pct_e2e=sum(o.pct_e2e for o in ops) / n,
            calls_per_run=sum(o.calls_per_run for o in ops) / len(ops),
            bottleneck=2 * sum(o.bottleneck for o in ops) >= n,
            should_delegate=2 * sum(o.should_delegate for o in ops) >= n,
            below_resolution=len(ops) == n and all(o.below_resolution for o in ops)))
    out.sort(key=lambda o: -o.mean_ms_per_run)
    return out


def pool_evidence(blocks: list[BlockResult]) -> KernelEvidence | None:
    """One side's kernel evidence: the first verdict where every block agrees, else "mixed"
    with the count of each; kernels logged, executed (block counts summed) and sampled over
    the blocks."""
    evs = [b.kernel_evidence for b in blocks if b.kernel_evidence]
    if not evs:
        return None
    verdicts = [e.sme2 for e in evs]
    kernels: dict[str, LoggedKernel] = {}
    for e in evs:
        for k in e.kernels:
            kernels.setdefault(k.name, k)
    traced = [e for e in evs if e.traced]
    executed: dict[str, TracedKernel] = {}      # executed in any block, block counts summed
    for e in traced:
        for k in e.executed_kernels:
            seen = executed.get(k.name)
            executed[k.name] = replace(seen, blocks=seen.blocks + k.blocks) if seen else k
    merged = KernelEvidence(
        sme2=verdicts[0], reason=evs[0].reason,
        kleidiai_ops=list(dict.fromkeys(op for e in evs for op in e.kleidiai_ops)),
        kernels=list(kernels.values()),
        executed_kernels=sorted(executed.values(), key=lambda k: (k.isa_family, k.name)),
        streaming_sme_blocks=sum(e.streaming_sme_blocks or 0 for e in traced) if traced
        else None,
        kernel_trace_source=evs[0].kernel_trace_source,
        sme=evs[0].sme if len({e.sme for e in evs}) == 1 else "mixed",
        sme_reason=evs[0].sme_reason,
        # One evidence process per side: its samples are every block's.
        **next(({"sampled_kernels": e.sampled_kernels, "samples_total": e.samples_total,
                 "kernel_sample_source": e.kernel_sample_source} for e in evs if e.sampled),
               {}))
    if len(set(verdicts)) == 1:
        return merged
    counts = ", ".join(f"{v} in {verdicts.count(v)}" for v in dict.fromkeys(verdicts))
    return replace(merged, sme2="mixed",
                   reason=f"blocks disagree: {counts} of {len(verdicts)} blocks")


def probe_levels(blocks: Iterable[BlockResult]) -> list[float]:
    """Each probed block's machine-state probe level (µs), in block order."""
    return [b.probe.level for b in blocks if b.probe is not None and b.probe.before_us]


def pool_probe(blocks: Iterable[BlockResult]) -> float | None:
    """The machine's speed over a benchmark's blocks as the probe saw it: the median of their
    levels (µs); None where none was probed."""
    levels = probe_levels(blocks)
    return float(statistics.median(levels)) if levels else None


# -- an LLM's generation --------------------------------------------------------------------

def _median(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return statistics.median(kept) if kept else None


@dataclass
class PhaseFigures:
    """One phase of a side's blocks: each figure the median over blocks (one block: its own),
    as :func:`pool` takes the median of block medians."""

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
    depth: int = 0          # tokens in the KV cache before the prompt (filled untimed)

    def phase(self, name: str) -> PhaseFigures:
        return self.prefill if name == PREFILL else self.decode

    def bench_name(self, name: str) -> str:
        """llama-bench's name of phase ``name``: ``pp64``, ``tg32 @ d512``."""
        return llama_bench_name(name, self.phase(name).tokens, self.depth)

    @property
    def tests(self) -> str:
        """Both phases' names: ``pp64, tg32``; ``pp64 @ d512, tg32 @ d512``."""
        return f"{self.bench_name(PREFILL)}, {self.bench_name(DECODE)}"

    @property
    def phases(self) -> tuple[PhaseFigures, PhaseFigures]:
        return self.prefill, self.decode


def _phase(name: str, stats: Sequence[PhaseStats]) -> PhaseFigures:
    first = stats[0]
    return PhaseFigures(
        phase=name, tokens=first.tokens, executes=first.executes,
        generations=sum(s.generations for s in stats),
        median_ms=_median(s.median_ms for s in stats), p90_ms=_median(s.p90_ms for s in stats),
        cv_pct=_median(s.cv_pct for s in stats),
        tokens_per_s=_median(s.tokens_per_s for s in stats),
        token_median_ms=_median(s.token_median_ms for s in stats),
        token_p90_ms=_median(s.token_p90_ms for s in stats),
        token_cv_pct=_median(s.token_cv_pct for s in stats),
        categories_ms=mean_per_block([s.categories_ms for s in stats]),
        evidence=next((s.kernel_evidence for s in stats if s.kernel_evidence is not None),
                      None))


def generation_blocks(blocks: Iterable[BlockResult]) -> list[BlockResult]:
    """The blocks that are an LLM's generation, in order (the one filter every reader of
    generations uses)."""
    return [b for b in blocks if b.generation is not None]


def generations(blocks: Iterable[BlockResult]) -> list[GenerationResult]:
    """The generations of :func:`generation_blocks`, in order."""
    return [b.generation for b in generation_blocks(blocks)]


def pool_generation(blocks: Sequence[BlockResult]) -> GenerationFigures | None:
    """The generation of a benchmark's (or a comparison side's) blocks, pooled; None when none
    of them is a generation."""
    gens = generations(blocks)
    if not gens:
        return None
    g = gens[0]
    return GenerationFigures(
        prompt_tokens=g.prompt_tokens, new_tokens=g.new_tokens, dynamic_shape=g.dynamic_shape,
        blocks=len(gens), prefill=_phase(PREFILL, [x.prefill for x in gens]),
        decode=_phase(DECODE, [x.decode for x in gens]),
        ttft_ms=_median(x.ttft_ms for x in gens),
        generation_ms=_median(x.generation_ms for x in gens), tokens=list(g.tokens),
        max_context_len=g.max_context_len, depth=g.depth)


def block_phases(blocks: Sequence[BlockResult]) -> dict[str, list[float]]:
    """Each phase of :data:`~pytest_sme2.results.generation.BLOCK_PHASES` every block timed
    (prefill, time to first token), with its value per block in block order; {} for forward
    passes or where a block lacks the phase."""
    out: dict[str, list[float]] = {}
    for key in BLOCK_PHASES:
        values = [b.block_phase(key) or 0.0 for b in blocks]
        if blocks and all(values):
            out[key] = values
    return out
