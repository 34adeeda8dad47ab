"""Operators a model keeps outside the delegate: one finding per operator and advice, for
every case it is in."""

from __future__ import annotations


from pytest_sme2 import units
from pytest_sme2.report.digest import Unit
from pytest_sme2.report.grouping import Side
from pytest_sme2.results import OperatorStats
from pytest_sme2.report.recommend.advice import portable_advice
from pytest_sme2.report.recommend.wording import (Recommendation, cases_text, focus_sides,
                                                  paths_text, times_text, where_label)


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


# Families of data movement, each with what usually removes it.
