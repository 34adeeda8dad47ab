"""Numbers as text: one formatter per unit, for the reports, the command line and the gate's
messages (a leaf: no project imports).

Percentages come in four kinds that must not be confused, and each has its own name:
:func:`percent` is a percentage's value alone (a table column headed "%": a share of E2E, a
CV), :func:`share` the same with its sign ("12.3%" of a whole), :func:`change` a signed change
against a base ("+12.3%"), :func:`points` a change of a share in percentage points
("+1.2 pp"); :func:`fraction` writes a relative number (0.123) as a percentage.

Ratios (speed-ups, current/baseline) are ``1.210x``, with their confidence interval
``1.210x [1.150, 1.270]``: 3 decimals where a figure is read (report tables, one-line results),
2 in compact cells (the terminal summary, the gate's one-line verdict, charts). An interval is
anything with ``point``, ``low`` and ``high`` (a :class:`~pytest_sme2.stats.Interval`, or the
mapping results.json stores).

A missing value is the caller's to write ("—" in markdown cells, "-" on the terminal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RATIO_DIGITS = 3            # a ratio where it is read
COMPACT_RATIO_DIGITS = 2    # a ratio in a narrow cell or a one-line verdict
COUNT_RATIO_DIGITS = 4      # a ratio of instruction counts (they do not drift: 0.1% is news)


def ms(v: float) -> str:
    """Milliseconds, 3 decimals, no unit: ``0.111``."""
    return f"{v:.3f}"


def significant(v: float) -> str:
    """Three significant digits, never in exponent form: 0.362, 16.7, 1234 (narrow cells)."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:#.3g}" if abs(v) >= 1e-3 else f"{v:.3f}"


def mb(v: float) -> str:
    """Megabytes, no unit: one decimal, two significant digits below 1 MB (a toy .pte)."""
    return f"{v:.1f}" if abs(v) >= 1 else f"{v:.2g}"


def byte_size(n: float) -> str:
    """A size in bytes with its unit, decimal: ``612 MB``, ``3.1 GB``, ``48 KB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.1f} {unit}" if abs(v) < 10 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def percent(v: float, digits: int = 1) -> str:
    """A percentage's value alone, one decimal (a column headed %): ``12.3``."""
    return f"{v:.{digits}f}"


def share(v: float, digits: int = 1) -> str:
    """A share of a whole (of E2E), one decimal (none in a narrow cell or on a bar): ``12.3%``."""
    return f"{percent(v, digits)}%"


def share_range(values: Iterable[float]) -> str:
    """The shares a finding takes over several cases: ``7.2%``, or ``7.2–8.7%``."""
    values = list(values)
    lo, hi = percent(min(values)), percent(max(values))
    return f"{lo}%" if lo == hi else f"{lo}–{hi}%"


def change(v: float) -> str:
    """A signed percent change against a base: ``+12.3%``, ``-4.0%``."""
    return f"{v:+.1f}%"


def points(v: float) -> str:
    """A share's change in percentage points: ``+1.2 pp``."""
    return f"{v:+.1f} pp"


def fraction(f: float) -> str:
    """A relative number as a percentage (0.123: ``12.3%``); absurd ones (two wildly
    different sessions, Student's t with 1 degree of freedom) read as such: ``>1000%``."""
    return f"{f * 100:.1f}%" if f < 10 else ">1000%"


def plus_minus(pct: float) -> str:
    """An interval's half width in percent of its point: ``±1.2%``."""
    return f"±{pct:.1f}%"


def _bounds(iv: Any) -> tuple[float, float, float]:
    if isinstance(iv, Mapping):
        return iv["point"], iv["low"], iv["high"]
    return iv.point, iv.low, iv.high


def ratio(point: float, digits: int = RATIO_DIGITS) -> str:
    """A ratio: ``1.210x``."""
    return f"{point:.{digits}f}x"


def interval(iv: Any, digits: int = RATIO_DIGITS) -> str:
    """An interval's bounds: ``[1.150, 1.270]``."""
    _, low, high = _bounds(iv)
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def ratio_interval(iv: Any, digits: int = RATIO_DIGITS) -> str:
    """A ratio with its confidence interval: ``1.210x [1.150, 1.270]``."""
    return f"{ratio(_bounds(iv)[0], digits)} {interval(iv, digits)}"


def count(n: float) -> str:
    """A count (instructions), thousands separated: ``2,570,512``."""
    return f"{n:,.0f}"


def tokens_per_s(v: float) -> str:
    """Tokens per second, no unit: thousands separated from 100 on (``4,282``), three
    significant digits below (``12.3``: a large model on a phone)."""
    return f"{v:,.0f}" if abs(v) >= 100 else significant(v)


def calls(v: float) -> str:
    """Calls per run: ``18``, ``0.5``."""
    return f"{v:g}"
