"""A results document read into what reports talk about: *units* and their *sides*.

A unit is one model/dtype/threads point. A comparison is one unit with two sides (base and
candidate, in that order); benchmarks no comparison claims are grouped into units by
model/dtype/threads with one side per runner. A side pools the benchmarks (blocks) of one
runner: latency over all their timed runs, and per-run means of categories, overheads and
operators averaged over blocks, so shares are of the mean E2E the categories add up to.

Pure functions over the JSON document (``results.results_document``): the markdown report, its
charts and the recommendations all read it through here, so they agree on every number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from pytest_sme2.analysis.categories import NAMED_CATEGORIES, OTHER
from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.analysis.operators import BOTTLENECK_PCT
from pytest_sme2.compare import DEFAULT_MARGIN, SAME, verdict
from pytest_sme2.stats import Interval

CV_NOISY_PCT = 10.0          # a block whose runs vary more than this is noisy
SHARE_GROWTH_PP = 2.0        # a category's share of E2E "grew" by at least this many points
EVIDENCE_ORDER = ("proven", "indicated", "unknown", "absent")


def category_order(names) -> list[str]:
    """The taxonomy's order, then categories a custom table added (first seen), Other last."""
    names = list(dict.fromkeys(names))
    named = [c for c in NAMED_CATEGORIES if c in names]
    extra = [c for c in names if c not in NAMED_CATEGORIES and c != OTHER]
    return named + extra + ([OTHER] if OTHER in names else [])


@dataclass
class Side:
    """One runner's benchmarks (blocks) in a unit."""

    runner: str
    info: dict[str, Any]                    # name, kind, labels (runner_info)
    blocks: list[dict[str, Any]]
    e2e: dict[str, Any] | None = None       # pooled latency statistics of all timed runs
    e2e_mean_ms: float = 0.0                # mean over blocks of their E2E mean
    categories_ms: dict[str, float] = field(default_factory=dict)
    overheads_ms: dict[str, float] = field(default_factory=dict)
    operators: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        return self.info.get("labels") or {}

    @property
    def device(self) -> dict[str, Any]:
        return self.blocks[0].get("device") or {} if self.blocks else {}

    @property
    def block_cvs(self) -> list[float]:
        return [b["e2e"]["cv_pct"] for b in self.blocks if b.get("e2e")]

    @property
    def runs(self) -> int | None:
        return self.blocks[0].get("runs") if self.blocks else None

    @property
    def warmup(self) -> int | None:
        return self.blocks[0].get("warmup") if self.blocks else None

    def share(self, category: str) -> float:
        """Percent of E2E spent in ``category``."""
        ms = self.categories_ms.get(category, 0.0)
        return 100.0 * ms / self.e2e_mean_ms if self.e2e_mean_ms > 0 else 0.0

    def thermal(self) -> tuple[float, float] | None:
        """Hottest zone before the first block and after the last (degrees C), if recorded."""
        before = [max(b["thermal_before"].values()) for b in self.blocks
                  if isinstance(b.get("thermal_before"), dict) and b["thermal_before"]]
        after = [max(b["thermal_after"].values()) for b in self.blocks
                 if isinstance(b.get("thermal_after"), dict) and b["thermal_after"]]
        if not before or not after:
            return None
        return before[0], max(after)


@dataclass
class Unit:
    model: str
    dtype: str
    threads: int
    sides: list[Side]
    comparison: dict[str, Any] | None = None

    @property
    def point(self) -> str:
        return f"{self.model} {self.dtype} t{self.threads}"

    @property
    def title(self) -> str:
        arrow = " → ".join(s.runner for s in self.sides) if self.comparison else \
            ", ".join(s.runner for s in self.sides)
        return f"{self.point}: {arrow}"

    @property
    def slug(self) -> str:
        sep = "-vs-" if self.comparison else "-"
        text = f"{self.model}-{self.dtype}-t{self.threads}-" + sep.join(s.runner
                                                                        for s in self.sides)
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)

    @property
    def base(self) -> Side | None:
        return self.sides[0] if self.comparison else None

    @property
    def candidate(self) -> Side | None:
        return self.sides[1] if self.comparison and len(self.sides) > 1 else None

    @property
    def speedup(self) -> Interval | None:
        return interval(self.comparison.get("speedup")) if self.comparison else None

    def category_speedup(self, category: str) -> Interval | None:
        if not self.comparison:
            return None
        return interval((self.comparison.get("category_speedups") or {}).get(category))

    def category_change(self, category: str) -> str | None:
        """faster / slower / no significant difference, with the comparison's margin."""
        iv = self.category_speedup(category)
        if iv is None:
            return None
        return verdict(iv, (self.comparison or {}).get("margin", DEFAULT_MARGIN))

    def categories(self) -> list[str]:
        return category_order(c for s in self.sides for c in s.categories_ms)

    def is_sme2(self) -> bool:
        """A comparison of SME2 off against on: by runner names or differing ``sme2`` labels."""
        if not self.comparison or len(self.sides) < 2:
            return False
        if any("sme2" in s.runner.lower() for s in self.sides):
            return True
        states = [str(s.labels.get("sme2", "unknown")).lower() for s in self.sides]
        return states[0] != states[1]

    def same(self) -> bool:
        return bool(self.comparison) and self.comparison.get("verdict") == SAME


def interval(d: dict[str, Any] | None) -> Interval | None:
    if not d:
        return None
    return Interval(float(d["point"]), float(d["low"]), float(d["high"]),
                    float(d.get("confidence", 0.95)))


def _runner(b: dict[str, Any]) -> str:
    return str(b.get("runner") or (b.get("runner_info") or {}).get("name") or "?")


def _pooled_e2e(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    samples = [v for b in blocks for v in (b.get("e2e_ms") or [])]
    if len(blocks) == 1 and blocks[0].get("e2e"):
        return dict(blocks[0]["e2e"])
    if samples and all(b.get("e2e_ms") for b in blocks):
        return latency_stats(samples).to_dict()
    stats = [b["e2e"] for b in blocks if b.get("e2e")]
    if not stats:
        return None
    # Blocks without their samples: what can be said without them, nothing invented.
    return {"n": sum(s["n"] for s in stats),
            "median_ms": _median([s["median_ms"] for s in stats]),
            "mean_ms": sum(s["mean_ms"] for s in stats) / len(stats),
            "min_ms": min(s["min_ms"] for s in stats), "max_ms": max(s["max_ms"] for s in stats),
            "std_ms": None, "cv_pct": None}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _mean_dict(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: sum(float(d.get(k, 0.0)) for d in dicts) / len(dicts) for k in keys} \
        if dicts else {}


def _operators(blocks: list[dict[str, Any]], e2e_mean_ms: float) -> list[dict[str, Any]]:
    """Operators by (name, instruction), ms per run averaged over blocks (absent = 0)."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for b in blocks:
        for op in b.get("operators") or []:
            key = (op["name"], int(op.get("instruction_id", -1)))
            m = merged.setdefault(key, {**op, "ms": 0.0, "calls": [], "module_paths": list(
                op.get("module_paths") or []), "op_types": list(op.get("op_types") or [])})
            m["ms"] += float(op.get("mean_ms_per_run", 0.0))
            m["calls"].append(float(op.get("calls_per_run", 0.0)))
    out = []
    n = max(len(blocks), 1)
    for m in merged.values():
        ms = m.pop("ms") / n
        calls = m.pop("calls")
        pct = 100.0 * ms / e2e_mean_ms if e2e_mean_ms > 0 else 0.0
        delegated = bool(m.get("delegated"))
        out.append({**m, "mean_ms_per_run": ms, "calls_per_run": sum(calls) / len(calls),
                    "pct_e2e": pct, "delegated": delegated,
                    "bottleneck": pct > BOTTLENECK_PCT,
                    "should_delegate": pct > BOTTLENECK_PCT and not delegated})
    out.sort(key=lambda o: -o["mean_ms_per_run"])
    return out


def _evidence(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    evs = [b["kernel_evidence"] for b in blocks if b.get("kernel_evidence")]
    if not evs:
        return {}
    verdicts = [str(e.get("sme2", "unknown")) for e in evs]
    kernels: dict[str, dict] = {}
    for e in evs:
        for k in e.get("kernels") or []:
            kernels.setdefault(k["name"], k)
    packed = list(dict.fromkeys(op for e in evs for op in e.get("kleidiai_ops") or []))
    executed = _executed(evs)
    if len(set(verdicts)) == 1:
        return {"sme2": verdicts[0], "reason": evs[0].get("reason", ""), "kleidiai_ops": packed,
                "kernels": list(kernels.values()), "executed_kernels": executed}
    counts = ", ".join(f"{v} in {verdicts.count(v)}" for v in dict.fromkeys(verdicts))
    return {"sme2": "mixed", "reason": f"blocks disagree: {counts} of {len(verdicts)} blocks",
            "kleidiai_ops": packed, "kernels": list(kernels.values()),
            "executed_kernels": executed}


def _executed(evs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Kernels that executed in any block (a traced device), executed block counts summed;
    None when no block was traced."""
    traced = [e["executed_kernels"] for e in evs if e.get("executed_kernels") is not None]
    if not traced:
        return None
    out: dict[str, dict[str, Any]] = {}
    for kernels in traced:
        for k in kernels:
            row = out.setdefault(k["name"], {**k, "blocks": 0})
            row["blocks"] += int(k.get("blocks") or 0)
    return sorted(out.values(), key=lambda k: (k.get("isa_family", ""), k["name"]))


def make_side(runner: str, blocks: list[dict[str, Any]],
              info: dict[str, Any] | None = None) -> Side:
    info = info or (blocks[0].get("runner_info") if blocks else None) or {"name": runner}
    side = Side(runner=runner, info=info, blocks=blocks)
    if not blocks:
        return side
    side.e2e = _pooled_e2e(blocks)
    means = [b["e2e"]["mean_ms"] for b in blocks if b.get("e2e")]
    side.e2e_mean_ms = sum(means) / len(means) if means else 0.0
    side.categories_ms = _mean_dict([b.get("categories_ms") or {} for b in blocks])
    side.overheads_ms = _mean_dict([b.get("overheads_ms") or {} for b in blocks])
    side.operators = _operators(blocks, side.e2e_mean_ms)
    side.evidence = _evidence(blocks)
    return side


def units(doc: dict[str, Any]) -> list[Unit]:
    """Comparisons first, in document order; then the other benchmarks by model/dtype/threads."""
    benchmarks = doc.get("benchmarks") or []
    by_id = {b.get("nodeid"): b for b in benchmarks}
    claimed: set[str] = set()
    out: list[Unit] = []
    for c in doc.get("comparisons") or []:
        sides = []
        for role in ("base", "candidate"):
            ids = c.get(f"{role}_blocks") or []
            claimed.update(ids)
            blocks = [by_id[i] for i in ids if i in by_id]
            sides.append(make_side(str(c[role]), blocks))
        out.append(Unit(c["model"], c["dtype"], int(c["threads"]), sides, c))
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for b in benchmarks:
        if b.get("nodeid") in claimed:
            continue
        key = (b["model"], b["dtype"], int(b["threads"]))
        groups.setdefault(key, {}).setdefault(_runner(b), []).append(b)
    for (model, dtype, threads), runners in groups.items():
        out.append(Unit(model, dtype, threads,
                        [make_side(name, blocks) for name, blocks in runners.items()]))
    return out


def devices(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The distinct devices the benchmarks ran on (the session's device without benchmarks)."""
    seen: dict[str, dict] = {}
    for b in doc.get("benchmarks") or []:
        d = b.get("device") or {}
        if d:
            key = "|".join(str(d.get(k)) for k in ("kind", "serial", "cpu", "abi", "sme2"))
            seen.setdefault(key, d)
    if not seen and (doc.get("session") or {}).get("device"):
        return [doc["session"]["device"]]
    return list(seen.values())


def runners(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Runners that measured something (name, kind, labels, path if the session knows it),
    then runners the session configured but never used."""
    configured = (doc.get("session") or {}).get("runners") or {}
    out: dict[str, dict] = {}
    for b in doc.get("benchmarks") or []:
        name = _runner(b)
        if name not in out:
            info = dict(b.get("runner_info") or {"name": name})
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
