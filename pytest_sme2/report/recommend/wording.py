"""How a recommendation names its figures, cases and operators (one place for the
wording every rule shares)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_sme2.report.digest import Unit
from pytest_sme2.report.grouping import Side
from pytest_sme2.results import OperatorStats
from pytest_sme2.report.recommend.advice import MAX_PATHS


@dataclass(frozen=True)
class Recommendation:
    text: str
    evidence: str               # the figure(s) the text rests on
    rule: str = ""              # which rule produced it (stable id, for tests and filters)




def where_label(unit: Unit, side: Side) -> str:
    return f"{unit.point} {side.runner}"


def focus_sides(unit: Unit) -> list[Side]:
    """Sides whose operators recommendations talk about: the candidate of a comparison (what
    you would ship), every side of plain benchmarks."""
    if unit.comparison:
        return [unit.candidate] if unit.candidate and unit.candidate.blocks else []
    return [s for s in unit.sides if s.blocks]


def paths_text(ops: list[OperatorStats]) -> str:
    """Where operators come from: their module paths, else their op types (code-quoted)."""
    paths = sorted(dict.fromkeys(p for o in ops for p in o.module_paths if p), key=_natural)
    if paths:
        more = f" (+{len(paths) - MAX_PATHS} more)" if len(paths) > MAX_PATHS else ""
        return ", ".join(f"`{p}`" for p in paths[:MAX_PATHS]) + more
    return ", ".join(f"`{t}`" for t in dict.fromkeys(t for o in ops for t in o.op_types if t))


def cases_text(where: Iterable[str]) -> str:
    """"3 cases": a case measured twice (by a benchmark and a comparison) counts once."""
    n = len(set(where))
    return f"{n} case{'' if n == 1 else 's'}"


def _natural(text: str) -> list:
    """Sort key reading digits as numbers: blocks.2 before blocks.10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def by_model(us: list[Unit], apart=lambda u: False) -> tuple[list[list[Unit]], list[Unit]]:
    """Units grouped by model and device (one recommendation per finding of a model, not one
    per dtype, thread count and comparison), and those ``apart`` says tell a story of their
    own."""
    groups: dict[tuple[str, str], list[Unit]] = {}
    for u in us:
        if not apart(u):
            groups.setdefault((u.model, u.device), []).append(u)
    return list(groups.values()), [u for u in us if apart(u)]


def times_text(n: float) -> str:
    return "once" if n == 1 else f"{n:g} times"


def yes_no(v: Any) -> str:
    return {True: "yes", False: "no"}.get(v, "unknown")



def named_unit(unit: Unit) -> str:
    """The unit, a comparison told apart from a benchmark of the same point."""
    if unit.comparison and unit.base and unit.candidate:
        return f"{unit.point} ({unit.base.runner} vs {unit.candidate.runner})"
    return unit.point
