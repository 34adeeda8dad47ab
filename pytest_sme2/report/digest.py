"""A results document read into what reports talk about: *units* and their *sides*.

A unit is one model/dtype/threads point. A comparison is one unit with two sides (base and
candidate, in that order); benchmarks no comparison claims are grouped into units by
model/dtype/threads with one side per runner. A side pools the benchmarks (blocks) of one
runner: latency with :func:`pytest_sme2.results.pool` (median of block medians), and per-run
means of categories, overheads and operators averaged over blocks, so shares are of the mean
E2E the categories add up to. Operators keep the figures and flags the analysis gave them.

Pure functions over a :class:`~pytest_sme2.results.ResultsDoc`: the markdown report, its charts
and the recommendations all read it through here, so they agree on every number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pytest_sme2.analysis.categories import NAMED_CATEGORIES, OTHER
from pytest_sme2.report import grouping
from pytest_sme2.report.grouping import (Side, comparison_blocks,
                                         point_runners, runner_point_devices, unclaimed)
from pytest_sme2.results import ComparisonRecord, PooledLatency, ResultsDoc, pool
from pytest_sme2.stats import DEFAULT_MARGIN, Interval, verdict

CV_NOISY_PCT = 10.0          # a block whose runs vary more than this is noisy
SHARE_GROWTH_PP = 2.0        # a category's share of E2E "grew" by at least this many points


def category_order(names) -> list[str]:
    """The taxonomy's order, then categories a custom table added (first seen), Other last."""
    names = list(dict.fromkeys(names))
    named = [c for c in NAMED_CATEGORIES if c in names]
    extra = [c for c in names if c not in NAMED_CATEGORIES and c != OTHER]
    return named + extra + ([OTHER] if OTHER in names else [])


@dataclass
class Unit:
    model: str
    dtype: str
    threads: int
    sides: list[Side]
    comparison: ComparisonRecord | None = None
    device: str = ""                # set when the document holds several devices
    depth: int = 0                  # an LLM's context depth

    @property
    def point(self) -> str:
        where = f" on {self.device}" if self.device else ""
        at = f" @ d{self.depth}" if self.depth else ""
        return f"{self.model} {self.dtype} t{self.threads}{at}{where}"

    @property
    def title(self) -> str:
        arrow = " → ".join(s.runner for s in self.sides) if self.comparison else \
            ", ".join(s.runner for s in self.sides)
        return f"{self.point}: {arrow}"

    @property
    def slug(self) -> str:
        sep = "-vs-" if self.comparison else "-"
        at = f"-d{self.depth}" if self.depth else ""
        text = f"{self.model}-{self.dtype}-t{self.threads}{at}-" + sep.join(s.runner
                                                                        for s in self.sides)
        if self.device:
            text += f"-{self.device}"
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)

    @property
    def base(self) -> Side | None:
        return self.sides[0] if self.comparison else None

    @property
    def candidate(self) -> Side | None:
        return self.sides[1] if self.comparison and len(self.sides) > 1 else None

    @property
    def speedup(self) -> Interval | None:
        return self.comparison.speedup if self.comparison else None

    def category_speedup(self, category: str) -> Interval | None:
        return self.comparison.category_speedups.get(category) if self.comparison else None

    def category_change(self, category: str) -> str | None:
        """faster / slower / no significant difference, with the comparison's margin."""
        iv = self.category_speedup(category)
        if iv is None:
            return None
        return verdict(iv, self.comparison.margin if self.comparison else DEFAULT_MARGIN)

    def categories(self) -> list[str]:
        return category_order(c for s in self.sides for c in s.categories_ms)

    @property
    def emulated(self) -> bool:
        """Measured on an emulated CPU: its timings say nothing about speed."""
        if self.comparison and self.comparison.emulated:
            return True
        return any(b.emulated for s in self.sides for b in s.blocks)

    def is_sme2(self) -> bool:
        """A comparison of SME2 off against on: by runner names or differing ``sme2`` labels."""
        return bool(self.comparison) and len(self.sides) > 1 and \
            self.sides[0].sme2_pair(self.sides[1])


def units(doc: ResultsDoc) -> list[Unit]:
    """Comparisons first, in document order; then the other benchmarks by model/dtype/threads
    (and device, when the document holds several: a unit never pools two devices)."""
    several = len(device_labels(doc)) > 1
    out: list[Unit] = []
    for c in doc.comparisons:
        base, candidate = comparison_blocks(c, doc.benchmarks)
        sides = [Side(c.base, base), Side(c.candidate, candidate)]
        device = sides[0].blocks[0].device_label if several and sides[0].blocks else ""
        depth = sides[0].blocks[0].depth if sides[0].blocks else 0
        out.append(Unit(c.model, c.dtype, int(c.threads), sides, c, device, depth))
    points = point_runners(unclaimed(doc.benchmarks, doc.comparisons), per_device=several)
    for (model, dtype, threads, device, depth), runners_ in points.items():
        out.append(Unit(model, dtype, threads,
                        [Side(name, blocks) for name, blocks in runners_.items()],
                        device=device, depth=depth))
    return out


def by_model(us: list[Unit]) -> dict[str, list[Unit]]:
    """Units per model, models in order of first appearance; within a model by dtype (first
    appearance), threads, and a comparison before the plain benchmarks of its point."""
    dtypes = list(dict.fromkeys(u.dtype for u in us))
    out: dict[str, list[Unit]] = {}
    for u in us:
        out.setdefault(u.model, []).append(u)
    for model_units in out.values():
        model_units.sort(key=lambda u: (dtypes.index(u.dtype), u.threads, u.depth,
                                        u.comparison is None))
    return out


def device_labels(doc: ResultsDoc) -> list[str]:
    """The devices the benchmarks ran on, as reports name them, in the order they appear."""
    return grouping.device_labels(doc.benchmarks)


@dataclass(frozen=True)
class DeviceRow:
    """One model/dtype/threads/runner point with its latency on each device (None: not
    measured there)."""

    model: str
    dtype: str
    threads: int
    runner: str
    depth: int
    latency: dict[str, PooledLatency | None]


def devices_side_by_side(doc: ResultsDoc) -> tuple[list[str], list[DeviceRow]]:
    """Latency per model/dtype/threads/runner, one column per device: every block of that
    point on that device pooled (a benchmark's blocks and a comparison's side alike)."""
    labels = device_labels(doc)
    rows = [DeviceRow(*key, latency={d: pool(per[d]) if d in per else None for d in labels})
            for key, per in runner_point_devices(doc.benchmarks).items()]
    return labels, rows


def devices(doc: ResultsDoc) -> list[dict[str, Any]]:
    """The distinct devices the benchmarks ran on (the session's device without benchmarks)."""
    seen: dict[str, dict] = {}
    for b in doc.benchmarks:
        d = b.device.to_dict()
        if d:
            key = "|".join(str(d.get(k)) for k in ("spec", "kind", "serial", "cpu", "abi",
                                                   "sme2"))
            seen.setdefault(key, d)
    if not seen and doc.session.device:
        return [doc.session.device]
    return list(seen.values())


def runners(doc: ResultsDoc) -> list[dict[str, Any]]:
    """Runners that measured something (name, kind, labels, path if the session knows it),
    then runners the session configured but never used."""
    configured = doc.session.runners or {}
    out: dict[str, dict] = {}
    for b in doc.benchmarks:
        name = b.runner_name
        if name not in out:
            info = b.runner.to_dict()
            info.setdefault("name", name)
            conf = configured.get(name) or {}
            if conf.get("path") and "path" not in info:
                info["path"] = conf["path"]
            out[name] = info
    for name, conf in configured.items():
        if name not in out:
            out[name] = {"name": name, **conf, "unused": True}
    return list(out.values())


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
