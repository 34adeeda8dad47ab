"""Which blocks go together: one function per question, for every report.

A block (:class:`~pytest_sme2.results.BlockResult`) is one runner process's timed runs; a
:class:`Side` is one runner's blocks as every report shows them, pooled once. The questions the
reports ask, and the one answer each gets here:

- :func:`comparison_blocks`: which blocks are each side of a comparison (the blocks its record
  names, in its order, then the side's confirmation blocks the record does not name).
- :func:`confirmation_blocks` / :func:`benchmarks_by_test`: which blocks are one test's benchmark:
  its first block and the blocks measured to confirm a suspected regression (same test, same
  setting, same device), so its figures are what the gate judged.
- :func:`benchmark_sides`: the session's benchmarks as the terminal summary, the
  pytest-benchmark JSON and the GitHub step summary list them: each test's benchmark, then each
  comparison's two sides. :func:`sides_per_device` splits them by device (the terminal's
  several-device table).
- :func:`point_runners`: which blocks measured one runner at one model/dtype/threads point (and
  device): the markdown report's units pool them across tests.
- :func:`runner_point_devices`: which blocks measured one runner at one point on each device (the
  report's devices side by side).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from pytest_sme2.analysis.categories import op_name
from pytest_sme2.results import (BlockResult, ComparisonRecord, DeviceFacts, GenerationFigures,
                                 KernelEvidence, OperatorStats, PooledLatency, RunnerInfo,
                                 Startup, mean_per_block, pool, pool_categories, pool_evidence,
                                 pool_generation, pool_operators, pool_startup)


def comparison_record(c: ComparisonRecord | Mapping[str, Any]) -> ComparisonRecord:
    """A comparison as its record; a comparison's JSON document (as it travels on a test
    report) goes through the one loader."""
    return c if isinstance(c, ComparisonRecord) else ComparisonRecord.from_json(c)


def below_resolution_note(names: list[str]) -> str:
    """The line naming operators whose every event read 0 (their clock counts whole
    microseconds): their time is not 0, it is in Other."""
    counts: dict[str, int] = {}
    for name in names:
        op = op_name(name)
        counts[op] = counts.get(op, 0) + 1
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
    return (f"{len(names)} operator(s) ran under their clock's resolution (XNNPACK times its "
            f"operators in whole microseconds; every event read 0), so their time is in Other: "
            f"{listed}")


@dataclass(eq=False)
class Side:
    """One runner's blocks as every report shows them: a test's benchmark (its first block
    and confirmation blocks), one side of a comparison, or one runner at a report.md unit's
    point pooled over tests. Its figures are pooled on first use, by
    :mod:`pytest_sme2.results.pooling`: latency over blocks (median of block medians), and
    per-run means of categories, overheads and operators over blocks, so shares are of the mean
    E2E the categories add up to."""

    runner: str
    blocks: list[BlockResult]
    info: RunnerInfo | None = None          # name, kind, labels; None: the first block's
    test: str = ""                  # the test's name without its file; "": pooled over tests
    nodeid: str = ""
    role: str = ""                  # "base" / "candidate" for the sides of a comparison
    comparison: ComparisonRecord | None = None

    def __post_init__(self) -> None:
        if self.info is None:
            self.info = self.blocks[0].runner if self.blocks else RunnerInfo(self.runner)

    @property
    def first(self) -> BlockResult:
        return self.blocks[0]

    @property
    def labels(self) -> dict[str, str]:
        return self.info.labels if self.info else {}

    def sme2_pair(self, other: Side) -> bool:
        """Whether this side and ``other`` are SME2 off against on: by runner names, or by
        differing ``sme2`` labels."""
        if any("sme2" in s.runner.lower() for s in (self, other)):
            return True
        return len({str(s.labels.get("sme2", "unknown")).lower() for s in (self, other)}) > 1

    @cached_property
    def latency(self) -> PooledLatency | None:
        """The blocks' latency pooled; None without blocks."""
        return pool(self.blocks) if self.blocks else None

    @cached_property
    def categories_ms(self) -> dict[str, float]:
        return pool_categories(self.blocks)

    @cached_property
    def overheads_ms(self) -> dict[str, float]:
        return mean_per_block([b.analysis.overheads_ms for b in self.blocks])

    @cached_property
    def operators(self) -> list[OperatorStats]:
        return pool_operators(self.blocks)

    @cached_property
    def evidence(self) -> KernelEvidence | None:
        return pool_evidence(self.blocks)

    @cached_property
    def startup(self) -> Startup | None:
        """Load time and memory over the blocks' cold processes; None where not measured."""
        return pool_startup(self.blocks)

    @cached_property
    def generation(self) -> GenerationFigures | None:
        """An LLM's generation pooled per phase; None for a forward pass."""
        return pool_generation(self.blocks)

    @property
    def resolution_note(self) -> str | None:
        """Where operators ran under their clock's resolution, the line saying so."""
        names = [o.name for o in self.operators if o.below_resolution]
        return below_resolution_note(names) if names else None

    @property
    def device(self) -> DeviceFacts | None:
        return self.blocks[0].device if self.blocks else None

    @property
    def runs(self) -> int | None:
        return self.blocks[0].runs if self.blocks else None

    @property
    def e2e_mean_ms(self) -> float:
        """Mean E2E ms per timed run (mean of the block means)."""
        return self.latency.mean_ms if self.latency else 0.0

    @property
    def breakdown_ms(self) -> float:
        """What the categories and operator shares add up to: the mean of the blocks' traced
        runs' E2E where the latency was timed apart from them, else the timed mean."""
        found = [b.breakdown_e2e_ms for b in self.blocks]
        return sum(found) / len(found) if found else 0.0

    @property
    def tracing(self) -> str | None:
        """report.md's line on what operator tracing added (the first block's record, the
        overhead as the median over blocks), None where nothing says."""
        timings = [b.timing for b in self.blocks if b.timing is not None]
        if not timings:
            return None
        if self.blocks[0].emulated:
            return ("the breakdown below is from traced runs (an emulated CPU: what tracing "
                    "added to its times says nothing)")
        found = sorted(t.overhead_pct for t in timings if t.overhead_pct is not None)
        if not found:
            return timings[0].breakdown_line()
        return replace(timings[0], overhead_pct=found[len(found) // 2]).breakdown_line()

    @property
    def verdict(self) -> str | None:
        """The kernel-evidence verdict, None without evidence."""
        return self.evidence.sme2 if self.evidence else None

    def share(self, category: str) -> float:
        """Percent of E2E spent in ``category``."""
        ms = self.categories_ms.get(category, 0.0)
        return 100.0 * ms / self.breakdown_ms if self.breakdown_ms > 0 else 0.0

    def thermal(self) -> tuple[float, float] | None:
        """Hottest zone before the first block and after the last (degrees C), if recorded."""
        before = [max(b.context.thermal_before.values()) for b in self.blocks
                  if b.context.thermal_before]
        after = [max(b.context.thermal_after.values()) for b in self.blocks
                 if b.context.thermal_after]
        if not before or not after:
            return None
        return before[0], max(after)


def comparison_blocks(c: ComparisonRecord, blocks: Iterable[BlockResult]
                      ) -> tuple[list[BlockResult], list[BlockResult]]:
    """The base and the candidate blocks of ``c`` among ``blocks``, in the comparison's order
    (blocks it names that are not there are left out)."""
    blocks = list(blocks)
    by_id = {b.nodeid: b for b in blocks}
    return (_side(c.base_blocks, by_id, blocks), _side(c.candidate_blocks, by_id, blocks))


def _side(names: Sequence[str], by_id: Mapping[str, BlockResult],
          blocks: list[BlockResult]) -> list[BlockResult]:
    """One side's blocks: those the record names, then the blocks the gate measured after the
    comparison to confirm that side's verdict (blocks of the same test named apart from it,
    same setting and device), which the record does not name."""
    named = [by_id[n] for n in names if n in by_id]
    if not named:
        return named
    seen = set(names)
    first = named[0]
    more = [b for b in blocks if b.nodeid not in seen and b.benchmark == first.benchmark
            and b.nodeid != b.benchmark and _setting(b)[1:] == _setting(first)[1:]]
    return named + more


def _setting(b: BlockResult) -> tuple:
    return b.nodeid, b.model, b.dtype, b.threads, b.runner_name, b.device_label


def confirmation_blocks(first: BlockResult, blocks: Iterable[BlockResult]
                        ) -> list[BlockResult]:
    """The blocks measured to confirm ``first``'s verdict: same test, setting and device."""
    same = _setting(first)
    return [b for b in blocks if b.block is not None and _setting(b) == same]


def benchmarks_by_test(blocks: Sequence[BlockResult]) -> list[list[BlockResult]]:
    """Each test's benchmark: a first block, then its confirmation blocks; in the order the
    first blocks were recorded (the blocks of comparisons are no test's first block)."""
    return [[b] + confirmation_blocks(b, blocks) for b in blocks if b.block is None]


def benchmark_sides(results: Iterable[BlockResult],
                    comparisons: Iterable[ComparisonRecord | Mapping[str, Any]] = ()
                    ) -> list[Side]:
    """The session's benchmarks: each test's benchmark, then each comparison's two sides
    (a comparison none of whose blocks on one side is among ``results`` is left out)."""
    results = list(results)
    out = [Side(b[0].runner_name, b, test=b[0].name, nodeid=b[0].nodeid)
           for b in benchmarks_by_test(results)]
    for c in map(comparison_record, comparisons):
        base, cand = comparison_blocks(c, results)
        if base and cand:
            out += [Side(blocks[0].runner_name, blocks, test=c.name, nodeid=c.nodeid or c.name,
                         role=role, comparison=c)
                    for role, blocks in (("base", base), ("candidate", cand))]
    return out


def device_labels(blocks: Iterable[BlockResult]) -> list[str]:
    """The devices the blocks ran on, as reports name them, in the order they appear."""
    return list(dict.fromkeys(b.device_label for b in blocks))


def forward_and_generations(sides: Iterable[Side]) -> tuple[list[Side], list[Side]]:
    """``sides`` split, each part in order: the forward passes (a row of latency each) and the
    LLMs measured as a generation (a row of phases each). The one place a renderer's sides
    are asked which they are; a comparison's two sides are always of one kind."""
    forward: list[Side] = []
    generations: list[Side] = []
    for side in sides:
        (forward if side.generation is None else generations).append(side)
    return forward, generations


def sides_per_device(sides: Iterable[Side], devices: Iterable[str]) -> dict[str, list[Side]]:
    """``sides`` (:func:`benchmark_sides`) per device, devices in the order given (every one
    of them, even without a side); a comparison's two sides go with its base side's device.
    The sides are the same objects, so each pools its blocks once whichever table shows it."""
    out: dict[str, list[Side]] = {d: [] for d in devices}
    device = ""
    for side in sides:
        if side.role != "candidate":
            device = side.first.device_label
        out.setdefault(device, []).append(side)
    return out


def point_runners(blocks: Iterable[BlockResult], per_device: bool
                  ) -> dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]]:
    """Blocks by the point they measured — (model, dtype, threads, device label, or "" unless
    ``per_device``, context depth) — then by runner; points, runners and blocks in document
    order."""
    out: dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]] = {}
    for b in blocks:
        key = (b.model, b.dtype, int(b.threads), b.device_label if per_device else "",
               b.depth)
        out.setdefault(key, {}).setdefault(b.runner_name, []).append(b)
    return out


def runner_point_devices(blocks: Iterable[BlockResult]
                         ) -> dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]]:
    """Blocks by (model, dtype, threads, runner, context depth), then by device label; in
    document order."""
    out: dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]] = {}
    for b in blocks:
        key = (b.model, b.dtype, int(b.threads), b.runner_name, b.depth)
        out.setdefault(key, {}).setdefault(b.device_label, []).append(b)
    return out


def unclaimed(blocks: Iterable[BlockResult], comparisons: Iterable[ComparisonRecord]
              ) -> list[BlockResult]:
    """The blocks no comparison claims: a test's benchmarks (a comparison side's confirmation
    blocks are that side's, see :func:`comparison_blocks`)."""
    blocks = list(blocks)
    claimed = {b.nodeid for c in comparisons for side in comparison_blocks(c, blocks)
               for b in side}
    claimed |= {n for c in comparisons for n in (*c.base_blocks, *c.candidate_blocks)}
    return [b for b in blocks if b.nodeid not in claimed]
