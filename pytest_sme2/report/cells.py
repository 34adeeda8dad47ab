"""Markdown table cells: the report's numbers (:mod:`pytest_sme2.units`, one formatter per unit)
with "—" where a value is missing, as the filters and globals of the report templates and the
cells the section rows are made of."""

from __future__ import annotations

from typing import Any

from pytest_sme2 import units
from pytest_sme2.report.digest import finite

MISSING = "—"

def fmt_ms(v: Any) -> str:
    return units.ms(v) if finite(v) else MISSING


def fmt_tokens_per_s(v: Any) -> str:
    return units.tokens_per_s(v) if finite(v) else MISSING


def fmt_mb(v: Any) -> str:
    return units.mb(v) if finite(v) else MISSING


def fmt_percent(v: Any) -> str:
    """A percentage's value (a share of E2E, a CV) in a column headed %."""
    return units.percent(v) if finite(v) else MISSING


def fmt_ratio(iv: Any) -> str:
    return units.ratio(iv.point) if iv is not None else MISSING


def fmt_interval(iv: Any) -> str:
    return units.interval(iv) if iv is not None else MISSING


def fmt_ratio_interval(iv: Any) -> str:
    return units.ratio_interval(iv) if iv is not None else MISSING


def fmt_points(v: Any) -> str:
    """A share's change, in percentage points."""
    return units.points(v) if finite(v) else MISSING


def cell(v: Any) -> str:
    """Text safe in a markdown table cell: pipes escaped, no line breaks."""
    return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ") \
        .replace("\n", " ")


def code(v: Any) -> str:
    """A code span safe in a table cell (operator names: ``__`` must not turn bold)."""
    text = str(v).replace("\r", " ").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def fmt_calls(v: Any) -> str:
    return units.calls(v) if finite(v) else MISSING


def th(*columns: Any) -> str:
    """Header and separator lines; a column named ``>x`` is right-aligned (numbers). List
    arguments spread into several columns."""
    cols = _flat(columns)
    names = [c[1:] if c.startswith(">") else c for c in cols]
    seps = ["---:" if c.startswith(">") else "---" for c in cols]
    return tr(*[cell(n) for n in names]) + "\n" + tr(*seps)


def tr(*cells: Any) -> str:
    """One table row; list arguments spread into several cells. Cells arrive escaped."""
    return "| " + " | ".join(_flat(cells)) + " |"


def _flat(items) -> list[str]:
    out: list[str] = []
    for c in items:
        if isinstance(c, (list, tuple)):
            out.extend(str(x) for x in c)
        else:
            out.append(str(c))
    return out


def ms_pct_cells(pairs) -> list[str]:
    return [x for ms, pct in pairs for x in (fmt_ms(ms), fmt_percent(pct))]


def op_cells(ops) -> list[str]:
    return ms_pct_cells((o.mean_ms_per_run, o.pct_e2e) if o else (None, None) for o in ops)


def e2e_cells(totals) -> list[str]:
    return ms_pct_cells((t, 100.0 if t else None) for t in totals)


def value_text(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return ", ".join(f"{k}={value_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(value_text(x) for x in v)
    return str(v)
