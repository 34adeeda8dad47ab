"""The report's figures, each declared once: its header, its unit (which names its format), and
the outputs that show it, with its column there. The terminal table, report.md, the GitHub step
summary and the pytest-benchmark JSON read these declarations instead of each keeping its own
row code for them.

:data:`LATENCY` holds a benchmark's pooled latency (:class:`pytest_sme2.results.PooledLatency`,
one attribute per figure, which is also its key in the JSON's ``extra_info``). Adding p99 to the
latency tables is the record's field, its pooling, and one line here::

    Figure("p99_ms", "p99", MS, {TERMINAL: 2.5, JSON: 2.5}),

An output lists a table's figures in the order of its column numbers (:func:`shown`). A header
names the unit (``median ms``, ``CV %``) except where the table says it once above itself
(report.md's latency table is in ms: ``median``) or the figure is a count."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from pytest_sme2 import units

# The outputs.
TERMINAL = "terminal"        # the summary table at the end of a session (report/terminal.py)
MARKDOWN = "markdown"        # report.md and the benchmark pages (report/markdown/)
GITHUB = "github"            # the GitHub Actions step summary (report/github.py)
JSON = "json"                # pytest-benchmark's JSON, extra_info (report/benchmark_json.py)

# The units, each with its one format (pytest_sme2.units).
MS = "ms"
PERCENT = "%"
COUNT = ""
FORMATS: dict[str, Callable[[Any], str]] = {MS: units.ms, PERCENT: units.percent, COUNT: str}


@dataclass(frozen=True)
class Figure:
    """One figure of a table: ``key`` is the record's attribute (and the JSON key),
    ``shown`` maps each output that shows it to its column there (ordering only), and
    ``headers`` gives an output's own name for it where that differs."""

    key: str
    header: str
    unit: str
    shown: Mapping[str, float]
    headers: Mapping[str, str] = field(default_factory=dict)

    def value(self, record: Any) -> Any:
        return getattr(record, self.key)

    def title(self, output: str, table_unit: str = COUNT) -> str:
        """The column header in ``output``: the name, then the unit unless the table says it."""
        name = self.headers.get(output, self.header)
        return name if self.unit in (COUNT, table_unit) else f"{name} {self.unit}"

    def cell(self, record: Any, missing: str | None = None) -> str:
        """The figure formatted for its unit; ``missing`` where it is absent or not finite
        (report.md's "—"), when given."""
        v = self.value(record)
        if missing is not None and (v is None or (isinstance(v, float) and not math.isfinite(v))):
            return missing
        return FORMATS[self.unit](v)


def shown(table: tuple[Figure, ...], output: str) -> list[Figure]:
    """The figures of ``table`` that ``output`` shows, in its column order."""
    return sorted((f for f in table if output in f.shown), key=lambda f: f.shown[output])


# A benchmark's latency: its blocks pooled (results.pooling.pool).
LATENCY: tuple[Figure, ...] = (
    #      key          header    unit     output: column
    Figure("blocks",    "blocks", COUNT,   {MARKDOWN: 1, JSON: 4}),
    Figure("n",         "n",      COUNT,   {MARKDOWN: 2, TERMINAL: 4}, {TERMINAL: "runs"}),
    Figure("median_ms", "median", MS,      {MARKDOWN: 3, TERMINAL: 1, GITHUB: 1, JSON: 1}),
    Figure("mean_ms",   "mean",   MS,      {MARKDOWN: 4}),
    Figure("min_ms",    "min",    MS,      {MARKDOWN: 5}),
    Figure("max_ms",    "max",    MS,      {MARKDOWN: 6}),
    Figure("std_ms",    "std",    MS,      {MARKDOWN: 7}),
    Figure("p90_ms",    "p90",    MS,      {TERMINAL: 2, JSON: 2}),
    Figure("cv_pct",    "CV",     PERCENT, {MARKDOWN: 8, TERMINAL: 3, GITHUB: 2, JSON: 3}),
)
