"""Thread scaling of LLM generations: per phase (prefill, decode), tokens/s at each thread
count of ``--sme2-threads``, the speed-up over 1 thread, the parallel efficiency and where
scaling stops. A pure function over the session's LLM blocks; rendered by
:mod:`pytest_sme2.report.generation`.

A series is one LLM benchmark (device, model, scheme, runner, prompt + new tokens) measured at
two or more thread counts. Its blocks at one count are pooled by
:func:`pytest_sme2.results.pooling.pool_generation` (medians over blocks).

Where scaling stops (:data:`STOP_RULE`): walking the counts upwards, the first count ``t``
whose throughput gain over the previous count ``t'`` is below :data:`MIN_SHARE_OF_IDEAL` of
the ideal gain (``t / t' - 1``: linear scaling) or within the noise (the larger of the two
counts' CVs of the phase's time per generation, and of their spread over blocks).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_sme2.results import BlockResult
from pytest_sme2.results.generation import PHASES
from pytest_sme2.results.pooling import generation_blocks, generations, pool_generation

MIN_SHARE_OF_IDEAL = 0.10
# analysis.kernels' verdicts that say SME2 kernels ran (not imported: it brings pandas)
SME2_RAN = ("proven", "indicated")
STOP_RULE = ("scaling stops at the first thread count whose tokens/s gain over the previous "
             f"count is below {MIN_SHARE_OF_IDEAL:.0%} of the ideal (linear) gain, or within "
             "the noise (the larger CV of the two counts' phase times per generation, or of "
             "their tokens/s over blocks)")


@dataclass(frozen=True)
class ScalingPoint:
    """One thread count of one phase."""

    threads: int
    tokens_per_s: float
    noise_pct: float            # this count's CV of the phase time (or over blocks), in %
    speedup: float | None       # over the series' base count (1 thread when measured)
    efficiency: float | None    # speedup / (threads / base threads)
    cpus: str = ""              # the CPUs it was pinned to ("" : not pinned)


@dataclass(frozen=True)
class PhaseScaling:
    phase: str
    points: tuple[ScalingPoint, ...]
    stops_at: int | None        # the first count that did not pay (None: scales throughout)
    gain_pct: float | None      # that count's gain over the previous one (or the last's)
    ideal_pct: float | None     # the ideal gain at that step
    noise_pct: float | None     # the noise at that step

    @property
    def summary(self) -> str:
        """``stops at 4 threads: +3% over 2 threads (ideal +100%, noise 5%)``."""
        pts = self.points
        if self.stops_at is None:
            return (f"scales through {pts[-1].threads} threads: +{self.gain_pct:.0f}% over "
                    f"{pts[-2].threads} (ideal +{self.ideal_pct:.0f}%, noise "
                    f"{self.noise_pct:.0f}%)")
        prev = next(p.threads for p, q in zip(pts, pts[1:]) if q.threads == self.stops_at)
        return (f"stops at {self.stops_at} threads: {self.gain_pct:+.0f}% over {prev} "
                f"(ideal +{self.ideal_pct:.0f}%, noise {self.noise_pct:.0f}%)")


@dataclass(frozen=True)
class ScalingSeries:
    device: str
    model: str
    dtype: str
    runner: str
    prompt_tokens: int
    new_tokens: int
    base_threads: int           # 1 where measured; else the smallest count
    phases: tuple[PhaseScaling, ...]
    emulated: bool = False
    sme2: bool | None = None    # the device's SME2 (None: could not tell)
    decode_sme2: str = "unknown"  # the decode phase's kernel verdict at the base count

    @property
    def title(self) -> str:
        return (f"{self.model} {self.dtype} {self.runner} on {self.device} "
                f"({self.prompt_tokens} + {self.new_tokens} tokens)")

    def phase(self, name: str) -> PhaseScaling:
        return next(p for p in self.phases if p.phase == name)


def _noise(blocks: Sequence[BlockResult], phase: str, cv: float | None) -> float:
    rates = [g.phase(phase).tokens_per_s for g in generations(blocks)]
    rates = [r for r in rates if r]
    spread = (100 * statistics.stdev(rates) / statistics.mean(rates)) if len(rates) > 1 else 0.0
    return max(cv or 0.0, spread)


def _mask_cpus(mask: str | None) -> str:
    if not mask:
        return ""
    value = int(mask, 16)
    cpus = [c for c in range(value.bit_length()) if value >> c & 1]
    return ",".join(map(str, cpus))


def phase_scaling(phase: str, by_threads: dict[int, Sequence[BlockResult]]) -> PhaseScaling | None:
    """One phase's points and where its scaling stops (``by_threads``: generation blocks per
    thread count); None with fewer than two counts that have a rate."""
    raw = []
    for t in sorted(by_threads):
        fig = pool_generation(by_threads[t]).phase(phase)
        if not fig.tokens_per_s:
            continue
        raw.append((t, fig.tokens_per_s, _noise(by_threads[t], phase, fig.cv_pct),
                    _mask_cpus(by_threads[t][0].cpu_mask)))
    if len(raw) < 2:
        return None
    base_t, base_rate = raw[0][0], raw[0][1]
    points = tuple(ScalingPoint(t, rate, noise, rate / base_rate,
                                rate / base_rate / (t / base_t), cpus)
                   for t, rate, noise, cpus in raw)
    stops_at = gain = ideal = noise = None
    for prev, cur in zip(points, points[1:]):
        gain = 100 * (cur.tokens_per_s / prev.tokens_per_s - 1)
        ideal = 100 * (cur.threads / prev.threads - 1)
        noise = max(prev.noise_pct, cur.noise_pct)
        if gain < MIN_SHARE_OF_IDEAL * ideal or gain <= noise:
            stops_at = cur.threads
            break
    return PhaseScaling(phase, points, stops_at, gain, ideal, noise)


def thread_scaling(blocks: Iterable[BlockResult]) -> list[ScalingSeries]:
    """Every LLM benchmark measured at two or more thread counts, in first-seen order."""
    groups: dict[tuple, dict[int, list[BlockResult]]] = {}
    for b in generation_blocks(blocks):
        g = b.generation
        key = (b.device.label, b.model, b.dtype, b.runner_name, g.prompt_tokens, g.new_tokens)
        groups.setdefault(key, {}).setdefault(b.threads, []).append(b)
    out = []
    for (device, model, dtype, runner, prompt, new), by_threads in groups.items():
        if len(by_threads) < 2:
            continue
        phases = tuple(p for name in PHASES if (p := phase_scaling(name, by_threads)))
        if not phases:
            continue
        base = by_threads[min(by_threads)]
        pooled = pool_generation(base)
        out.append(ScalingSeries(
            device=device, model=model, dtype=dtype, runner=runner, prompt_tokens=prompt,
            new_tokens=new, base_threads=min(by_threads), phases=phases,
            emulated=any(b.emulated for b in base), sme2=base[0].device.sme2,
            decode_sme2=pooled.decode.sme2))
    return out


def shared_unit_note(s: ScalingSeries) -> str:
    """Whether decode scaling stops where the cluster's SME2 unit is shared, or why nothing is
    said. One SME2 unit per cluster is assumed (Arm's C1 clusters, Apple's M4 P-cluster): the
    unit is first shared at 2 threads."""
    if s.emulated:
        return ("emulated CPU: its thread scaling is QEMU's, not the hardware's; nothing is "
                "said about a shared SME2 unit")
    if not s.sme2:
        why = "has no SME2" if s.sme2 is False else "could not tell whether it has SME2"
        return f"{s.device} {why}: no shared SME2 unit to stop decode scaling"
    decode = s.phase("decode") if any(p.phase == "decode" for p in s.phases) else None
    if decode is None:
        return ""
    if s.decode_sme2 not in SME2_RAN:
        return (f"decode ran no SME2 kernels here (verdict: {s.decode_sme2}): its scaling is "
                "not bounded by the SME2 unit")
    first_shared = min((p.threads for p in decode.points if p.threads >= 2), default=None)
    if decode.stops_at is None:
        return (f"decode keeps scaling past {first_shared} threads, where the cluster's SME2 "
                "unit is shared (one unit per cluster assumed)")
    if decode.stops_at == first_shared:
        return (f"decode scaling stops at {decode.stops_at} threads, where the cluster's SME2 "
                "unit is first shared (one unit per cluster assumed)")
    return (f"decode scaling stops at {decode.stops_at} threads, not where the cluster's SME2 "
            f"unit is first shared ({first_shared} threads; one unit per cluster assumed)")
