"""Terminal lines: one per benchmark as it finishes, one table at the end."""

from __future__ import annotations

from typing import Iterable

from pytest_sme2.results import BenchmarkResult

COLUMNS = ("benchmark", "model", "dtype", "threads", "runner", "median ms", "p90 ms", "CV %",
           "runs")


def benchmark_line(r: BenchmarkResult) -> str:
    e = r.e2e
    return (f"sme2: {r.model} {r.dtype} t{r.threads} {r.runner_name}: Method::execute median "
            f"{e.median_ms:.3f} ms, p90 {e.p90_ms:.3f} ms, CV {e.cv_pct:.1f}%, "
            f"n={e.n} (+{r.warmup} warm-up discarded)")


def _row(r: BenchmarkResult) -> tuple[str, ...]:
    e = r.e2e
    return (r.nodeid.split("::")[-1], r.model, r.dtype, str(r.threads), r.runner_name,
            f"{e.median_ms:.3f}", f"{e.p90_ms:.3f}", f"{e.cv_pct:.1f}", str(e.n))


def summary_table(results: Iterable[BenchmarkResult]) -> list[str]:
    rows = [COLUMNS] + [_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    numeric = {3, 5, 6, 7, 8}

    def fmt(row):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    lines = [fmt(rows[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(row) for row in rows[1:]]
    return lines
