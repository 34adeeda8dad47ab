"""Rules about what a model's graph makes the runtime do besides its compute, each one finding
per operator or per model across the cases it is in: operators the model keeps outside the
delegate (:func:`find_portable_ops`), and the data movement that surfaces once convolution and
GEMM get faster, transposes, converts and copies by family (:func:`find_data_movement`). Both
quote their advice tables from :mod:`.advice`; what removes them is a change to the model or its
export."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_sme2 import units
from pytest_sme2.analysis.categories import CONVOLUTION, DATA_MOVEMENT, GEMM
from pytest_sme2.stats import FASTER
from pytest_sme2.report.digest import SHARE_GROWTH_PP, Unit
from pytest_sme2.report.grouping import Side
from pytest_sme2.results import OperatorStats
from pytest_sme2.report.recommend.advice import (DATA_FAMILY_PCT, DATA_MOVEMENT_PCT, MAX_PATHS,
                                                 DATA_FAMILIES, portable_advice)
from pytest_sme2.report.recommend.wording import (Recommendation, by_model, cases_text, focus_sides,
                                                  paths_text, times_text, where_label)


# -- operators outside the delegate ----------------------------------------------------------

def find_portable_ops(us: list[Unit]) -> list[Recommendation]:
    """One recommendation per operator a model keeps outside the delegate (by name and advice):
    an operator that runs once per transformer block, in every dtype and thread count, is one
    finding. Found where one of its rows is a bottleneck; its figures then count every
    portable row of that name in the case."""
    groups: dict[tuple, list[tuple[Unit, Side, list[OperatorStats]]]] = {}
    for unit in us:
        for side in focus_sides(unit):
            rows: dict[tuple[str, str], list[OperatorStats]] = {}
            for o in side.operators:
                if not o.delegated:
                    rows.setdefault((o.name, portable_advice(o)), []).append(o)
            for (name, advice), ops in rows.items():
                if any(o.should_delegate for o in ops):
                    key = (unit.model, unit.device, name, advice)
                    groups.setdefault(key, []).append((unit, side, ops))
    found = [_portable_recommendation(key[2], key[3], cases) for key, cases in groups.items()]
    return [r for _, r in sorted(found, key=lambda pr: -pr[0])]


def _portable_recommendation(name: str, advice: str,
                             cases: list[tuple[Unit, Side, list[OperatorStats]]]
                             ) -> tuple[float, Recommendation]:
    figures = []
    for unit, side, ops in cases:
        pct = sum(o.pct_e2e for o in ops)
        figures.append((pct, sum(o.mean_ms_per_run for o in ops),
                        sum(o.calls_per_run for o in ops), where_label(unit, side)))
    where = paths_text([o for _, _, ops in cases for o in ops])
    where = f" ({where})" if where else ""
    calls = sorted({c for _, _, c, _ in figures})
    calls_text = times_text(calls[0]) if len(calls) == 1 else f"{calls[0]:g}-{calls[-1]:g} times"
    top = max(figures)

    def fig(pct, ms, n, at):
        return (f"{units.share(pct)} of E2E, {units.ms(ms)} ms and {n:g} "
                f"call{'' if n == 1 else 's'} per "
                f"run, portable ({at})")

    if len(figures) == 1:
        text = (f"`{name}` runs {calls_text} per inference outside the delegate{where} and "
                f"takes {units.share(top[0])} of E2E on {top[3]} — {advice}.")
        return top[0], Recommendation(text, f"{name}: {fig(*top)}", "portable-op")
    model = cases[0][0].model
    text = (f"`{name}` runs {calls_text} per inference outside the delegate{where} in "
            f"{cases_text(at for *_, at in figures)} of {model} and takes "
            f"{units.share_range([f[0] for f in figures])} of "
            f"E2E (most: {units.share(top[0])} on {top[3]}) — {advice}.")
    evidence = f"{name}: " + "; ".join(fig(*f) for f in sorted(figures, reverse=True))
    return top[0], Recommendation(text, evidence, "portable-op")


# -- data movement ---------------------------------------------------------------------------

def _family(name: str) -> str:
    for family, pattern, _ in DATA_FAMILIES:
        if re.search(pattern, name, re.IGNORECASE):
            return family
    return "other data movement"


@dataclass(frozen=True)
class _Movement:
    """Data movement on one side of a unit: its share of E2E, and the families of operators
    above DATA_FAMILY_PCT with their operators (same-named ones merged), largest first."""
    unit: Unit
    side: Side
    share: float
    families: list[tuple[str, float, list[tuple[str, float, int]]]]

    @property
    def where(self) -> str:
        return where_label(self.unit, self.side)

    @property
    def figure(self) -> str:
        moved = self.side.categories_ms.get(DATA_MOVEMENT, 0)
        return (f"Data Movement {units.share(self.share)} of E2E ({units.ms(moved)} of "
                f"{units.ms(self.side.breakdown_ms)} ms)")


def _movement(unit: Unit, side: Side) -> _Movement:
    by_family: dict[str, dict[str, list[float]]] = {}
    for o in side.operators:
        if o.category == DATA_MOVEMENT:
            by_family.setdefault(_family(o.name), {}).setdefault(o.name, []).append(o.pct_e2e)
    families = []
    for family, names in by_family.items():
        pct = sum(sum(v) for v in names.values())
        if pct > DATA_FAMILY_PCT:
            ops = sorted(((n, sum(v), len(v)) for n, v in names.items()), key=lambda t: -t[1])
            families.append((family, pct, ops))
    families.sort(key=lambda f: -f[1])
    return _Movement(unit, side, side.share(DATA_MOVEMENT), families)


def _family_clause(family: str, pct: float, ops: list[tuple[str, float, int]],
                   up_to: str = "", at: str = "") -> str:
    # Operators named alike (XNNPACK numbers them per delegate) are one entry with a count;
    # those that round to 0.0% say nothing.
    named = [o for o in ops if o[1] >= 0.05] or ops[:1]
    where = "; ".join(f"`{n}` ({units.share(p)}{f' over {k} operators' if k > 1 else ''})"
                      for n, p, k in named[:MAX_PATHS])
    advice = {f: a for f, _, a in DATA_FAMILIES}.get(family)
    return (f"{family} operators take {up_to}{units.share(pct)} of E2E"
            f"{f' (on {at})' if at else ''} — "
            + (advice.format(where=where) if advice else f"see {where}"))


def find_data_movement(us: list[Unit]) -> list[Recommendation]:
    # A comparison whose candidate moves a larger share of data than its base tells its own
    # story (the next bottleneck once compute got faster); the others are cases of the model.
    groups, comparisons = by_model(us, _movement_grew)
    out = []
    for unit in comparisons:
        out += [_movement_recommendation(m) for side in focus_sides(unit)
                if _worth_a_look(m := _movement(unit, side))]
    for group in groups:
        found = [m for unit in group for side in focus_sides(unit)
                 if _worth_a_look(m := _movement(unit, side))]
        if len(found) == 1:
            out.append(_movement_recommendation(found[0]))
        elif found:
            out.append(_movements_recommendation(found))
    return out


def _movement_grew(unit: Unit) -> bool:
    if not (unit.comparison and unit.base and unit.base.blocks and unit.candidate):
        return False
    return unit.candidate.share(DATA_MOVEMENT) - unit.base.share(DATA_MOVEMENT) \
        >= SHARE_GROWTH_PP


def _worth_a_look(m: _Movement) -> bool:
    return m.share >= DATA_MOVEMENT_PCT or bool(m.families)


def _movement_recommendation(m: _Movement) -> Recommendation:
    unit = m.unit
    head = f"Data Movement takes {units.share(m.share)} of E2E on {m.where}"
    fig = m.figure
    if unit.comparison and unit.base and unit.base.blocks:
        before = unit.base.share(DATA_MOVEMENT)
        if m.share - before >= SHARE_GROWTH_PP:
            faster = [c for c in (CONVOLUTION, GEMM) if unit.category_change(c) == FASTER]
            head += f", up from {units.share(before)} on {unit.base.runner}"
            fig += f", {units.share(before)} on {unit.base.runner}"
            if faster:
                head += (f": with {' and '.join(faster)} faster, moving data is what is left — "
                         "the next bottleneck")
    clauses = [_family_clause(*f) for f in m.families] or [
        "no single kind of data movement stands out; see the bottleneck table for the "
        "operators"]
    return Recommendation(f"{head}. " + "; ".join(clauses) + ".", fig, "data-movement")


def _movements_recommendation(found: list[_Movement]) -> Recommendation:
    """One model's data movement over several cases: the range, and each family where it is
    largest."""
    top = max(found, key=lambda m: m.share)
    head = (f"Data Movement takes {units.share_range([m.share for m in found])} of E2E in "
            f"{cases_text(m.where for m in found)} of {top.unit.model} "
            f"(most: {units.share(top.share)} on "
            f"{top.where})")
    largest: dict[str, tuple[float, list[tuple[str, float, int]], _Movement]] = {}
    for m in found:
        for family, pct, ops in m.families:
            if family not in largest or pct > largest[family][0]:
                largest[family] = (pct, ops, m)
    clauses = [_family_clause(family, pct, ops, "up to ", "" if m is top else m.where)
               for family, (pct, ops, m) in sorted(largest.items(), key=lambda kv: -kv[1][0])]
    clauses = clauses or ["no single kind of data movement stands out; see the bottleneck "
                          "tables for the operators"]
    evidence = "; ".join(f"{m.figure} on {m.where}" for m in sorted(found, key=lambda m:
                                                                   -m.share))
    return Recommendation(f"{head}. " + "; ".join(clauses) + ".", evidence, "data-movement")
