"""Terminal lines: one per benchmark as it finishes, one table at the end."""

from __future__ import annotations

from typing import Iterable

from pytest_sme2.results import BenchmarkResult

TOP_OPERATORS = 10

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


def analysis_summary(a) -> list[str]:
    """Readable summary of a :class:`pytest_sme2.analysis.summary.Analysis`."""
    e = a.e2e
    lines = [f"{a.source}: {a.runs} runs, {a.warmup} warm-up discarded, {e.n} timed",
             f"Method::execute: median {e.median_ms:.3f} ms, mean {e.mean_ms:.3f}, "
             f"p10 {e.p10_ms:.3f}, p90 {e.p90_ms:.3f}, min {e.min_ms:.3f}, max {e.max_ms:.3f}, "
             f"CV {e.cv_pct:.1f}%, MAD {e.mad_ms:.3f}, outliers {e.outliers} (IQR rule, kept)",
             "", "Categories (mean ms per run; Other = E2E - named):"]
    for cat, ms in a.categories_ms.items():
        pct = 100 * ms / e.mean_ms if e.mean_ms else 0.0
        lines.append(f"  {cat:<14} {ms:9.4f} ms  {pct:5.1f}%")
    lines.append(f"  {'E2E':<14} {e.mean_ms:9.4f} ms")
    o = a.overheads_ms
    lines += ["", f"Overheads: delegate {o['delegate_ms']:.4f} ms, operator call "
                  f"{o['operator_call_ms']:.4f} ms, runtime {o['runtime_ms']:.4f} ms per run",
              "", f"Top operators (of {len(a.operators)}):"]
    for r in a.operators.head(TOP_OPERATORS).itertuples(index=False):
        flags = ("  BOTTLENECK" if r.bottleneck else "") + \
            ("  should be delegated" if r.should_delegate else "")
        where = r.backend if r.delegated else "portable"
        lines.append(f"  {r.mean_ms_per_run:9.4f} ms {r.pct_e2e:5.1f}%  {r.name}  "
                     f"[{r.category}, {where}, instr {r.instruction_id}, "
                     f"{r.calls_per_run:g}/run]{flags}")
    ev = a.evidence
    lines += ["", f"SME2: {ev.sme2} — {ev.reason}"]
    return lines
