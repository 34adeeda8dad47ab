"""The one pooling of a benchmark's blocks: latency over blocks, categories per block."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_sme2.results.latency import LatencyStats
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.block import BlockResult
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
    return Startup(pte_bytes=found[0].pte_bytes,
                   processes=[p for s in found for p in s.processes],
                   load_source=found[0].load_source, memory_source=found[0].memory_source,
                   problem="; ".join(dict.fromkeys(s.problem for s in found if s.problem)))
