"""Which blocks go together: one function per question, for every report.

A block (:class:`~pytest_sme2.results.BlockResult`) is one runner process's timed runs. The
questions the reports ask, and the one answer each gets here:

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
from dataclasses import dataclass
from typing import Any

from pytest_sme2.results import BlockResult, ComparisonRecord


def comparison_record(c: ComparisonRecord | Mapping[str, Any]) -> ComparisonRecord:
    """A comparison as its record; a comparison's JSON document (as it travels on a test
    report) goes through the one loader."""
    return c if isinstance(c, ComparisonRecord) else ComparisonRecord.from_json(c)


@dataclass
class BenchmarkSide:
    """One benchmark as the summary table shows it: a test's name, and the blocks of one
    runner (a matrix setting with its confirmation blocks, or one side of a comparison)."""

    test: str                       # the test's name without its file
    nodeid: str
    blocks: list[BlockResult]
    role: str = ""                  # "base" / "candidate" for the sides of a comparison
    comparison: ComparisonRecord | None = None

    @property
    def first(self) -> BlockResult:
        return self.blocks[0]

    @property
    def runner(self) -> str:
        return self.first.runner_name


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
                    ) -> list[BenchmarkSide]:
    """The session's benchmarks: each test's benchmark, then each comparison's two sides
    (a comparison none of whose blocks on one side is among ``results`` is left out)."""
    results = list(results)
    out = [BenchmarkSide(b[0].name, b[0].nodeid, b) for b in benchmarks_by_test(results)]
    for c in map(comparison_record, comparisons):
        base, cand = comparison_blocks(c, results)
        if base and cand:
            nodeid = c.nodeid or c.name
            out.append(BenchmarkSide(c.name, nodeid, base, "base", c))
            out.append(BenchmarkSide(c.name, nodeid, cand, "candidate", c))
    return out


def device_labels(blocks: Iterable[BlockResult]) -> list[str]:
    """The devices the blocks ran on, as reports name them, in the order they appear."""
    return list(dict.fromkeys(b.device_label for b in blocks))


def sides_per_device(results: Iterable[BlockResult],
                     comparisons: Iterable[ComparisonRecord | Mapping[str, Any]] = ()
                     ) -> dict[str, list[BenchmarkSide]]:
    """:func:`benchmark_sides` per device (devices in the order they first measured); a
    comparison goes with the device of its base blocks."""
    results = list(results)
    comparisons = list(map(comparison_record, comparisons))
    out = {}
    for device in device_labels(results):
        mine = [r for r in results if r.device_label == device]
        ids = {r.nodeid for r in mine}
        out[device] = benchmark_sides(mine, [c for c in comparisons if set(c.base_blocks) & ids])
    return out


def depth_of(b: BlockResult) -> int:
    """An LLM block's context depth (0: an empty KV cache, or not a generation)."""
    return b.generation.depth if b.generation is not None else 0


def point_runners(blocks: Iterable[BlockResult], per_device: bool
                  ) -> dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]]:
    """Blocks by the point they measured — (model, dtype, threads, device label, or "" unless
    ``per_device``, context depth) — then by runner; points, runners and blocks in document
    order."""
    out: dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]] = {}
    for b in blocks:
        key = (b.model, b.dtype, int(b.threads), b.device_label if per_device else "",
               depth_of(b))
        out.setdefault(key, {}).setdefault(b.runner_name, []).append(b)
    return out


def runner_point_devices(blocks: Iterable[BlockResult]
                         ) -> dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]]:
    """Blocks by (model, dtype, threads, runner, context depth), then by device label; in
    document order."""
    out: dict[tuple[str, str, int, str, int], dict[str, list[BlockResult]]] = {}
    for b in blocks:
        key = (b.model, b.dtype, int(b.threads), b.runner_name, depth_of(b))
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
