"""Terminal lines: one per benchmark or comparison as it finishes, one table at the end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_sme2.analysis.categories import OTHER
from pytest_sme2.results import (BenchmarkResult, ComparisonRecord, Judgement, Startup, pool,
                                 pool_categories, pool_startup)

TOP_OPERATORS = 10
COLUMNS = ("benchmark", "model", "dtype", "threads", "runner", "median ms", "p90 ms", "CV %",
           "runs", "load, 1st ms", "peak, pte MB", "speedup [95% CI]", "top category", "SME2",
           "vs baseline")
_NUMERIC = {3, 5, 6, 7, 8, 9, 10}
EMULATED = " [emulated CPU: timings say nothing about speed]"


def _record(c: ComparisonRecord | Mapping[str, Any]) -> ComparisonRecord:
    """A comparison as its record; a comparison's JSON document (as it travels on a test
    report) goes through the one loader."""
    return c if isinstance(c, ComparisonRecord) else ComparisonRecord.from_json(c)


def benchmark_line(r: BenchmarkResult, device: bool = False) -> str:
    """``device``: name the device too (a session on several)."""
    e = r.e2e
    ev = r.kernel_evidence
    sme2 = f"; SME2 {ev.sme2}" if ev is not None and (ev.traced or ev.sampled) else ""
    where = f" on {r.device_label}" if device else ""
    return (f"sme2: {r.model} {r.dtype} t{r.threads} {r.runner_name}{where}: Method::execute "
            "median "
            f"{e.median_ms:.3f} ms, p90 {e.p90_ms:.3f} ms, CV {e.cv_pct:.1f}%, "
            f"n={e.n} (+{r.warmup} warm-up discarded){sme2}"
            + _instructions(r) + _startup(r.startup) + (EMULATED if r.emulated else ""))


def _sig(v: float | None) -> str:
    """Three significant digits, never in exponent form: 0.362, 16.7, 1234."""
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:#.3g}" if abs(v) >= 1e-3 else f"{v:.3f}"


def _mb(kb: float | int | None) -> str:
    return "-" if kb is None else _sig(kb / 1024)


def startup_cells(s: Startup | None) -> tuple[str, str]:
    """(cold load and first inference in ms, peak resident memory and .pte size in MB)."""
    if s is None:
        return "-", "-"
    pte = None if s.pte_bytes is None else s.pte_bytes / 1024
    return (f"{_sig(s.load_ms)}, {_sig(s.first_inference_ms)}",
            f"{_mb(s.peak_rss_kb)}, {_mb(pte)}")


def _startup(s: Startup | None) -> str:
    """`` | load X ms (n cold), first inference Y ms, peak Z MB`` where measured."""
    if s is None or s.load_ms is None:
        return ""
    peak = f", peak {_mb(s.peak_rss_kb)} MB" if s.peak_rss_kb is not None else ""
    return (f" | load {_sig(s.load_ms)} ms ({s.loads} cold), first inference "
            f"{_sig(s.first_inference_ms)} ms{peak}")


def _instructions(r: BenchmarkResult) -> str:
    """`` | instructions X per execute ...`` where they were counted (--sme2-measure)."""
    if not r.instructions:
        return ""
    from pytest_sme2.instructions.count import format_count

    return f" | instructions {format_count(r.instructions)}"


def cooldown_lines(r: BenchmarkResult, told: bool = False) -> list[str]:
    """The thermal hold's news about a block: that it started hot (the timeout ran out), or,
    unless ``told`` already, that --sme2-cooldown could not be applied on its device."""
    c = r.context.cooldown
    if c is None:
        return []
    if not c.applied:
        return [] if told else [f"sme2: --sme2-cooldown {c.target_c:g} °C cannot be applied: "
                                f"{c.reason}; blocks start without waiting"]
    if not c.hot:
        return []
    block = f" block {r.block}" if r.block is not None else ""
    return [f"sme2: {r.name}{block} ({r.runner_name}) STARTED HOT after waiting "
            f"{c.waited_s:.0f} s: {c.summary()}; measured, kept and flagged"]


def comparison_line(c: ComparisonRecord | Mapping[str, Any], device: str | None = None) -> str:
    """``device``: name the device too (a session on several)."""
    c = _record(c)
    s, out = c.speedup, c.outputs
    outputs = "" if not out else (
        f", outputs equal (max |diff| {out.max_abs_diff:.3g}, relative "
        f"{out.max_rel_diff:.3g})" if out.equal else
        f", OUTPUTS DIFFER (max |diff| {out.max_abs_diff:.3g}, relative "
        f"{out.max_rel_diff:.3g}, tolerance {out.tolerance:.3g})")
    where = f" on {device}" if device else ""
    return (f"sme2: {c.candidate} vs {c.base} on {c.point}{where}: "
            f"speed-up {s.point:.3f}x [{s.low:.3f}, {s.high:.3f}], medians "
            f"{c.base_median_ms:.3f} -> {c.candidate_median_ms:.3f} ms over "
            f"{len(c.base_blocks)} blocks each: {c.verdict}{outputs}"
            + (EMULATED if c.emulated else ""))


def top_category(categories_ms: dict[str, float]) -> str:
    named = {k: v for k, v in categories_ms.items() if k != OTHER}
    if not named or max(named.values()) <= 0:
        return "-"
    cat = max(named, key=named.get)
    total = sum(categories_ms.values())
    return f"{cat} {100 * named[cat] / total:.0f}%" if total > 0 else cat


def baseline_cell(j: Judgement | None) -> str:
    """The gate's judgement in a few characters: status and current/baseline time ratio."""
    if not j:
        return "-"
    if j.status == "not_compared":
        return "foreign (not compared)" if j.foreign else "-"
    r = j.ratio
    word = {"regression": "REGRESSION", "improvement": "faster"}.get(j.status, "ok")
    return f"{word} {r.point:.2f}x [{r.low:.2f}, {r.high:.2f}]"


def _row(name: str, rs: list[BenchmarkResult], speedup: str,
         baseline: Judgement | dict | None = None) -> tuple[str, ...]:
    """One row for a benchmark, or for one side of a comparison: its blocks pooled."""
    r = rs[0]
    p = pool(rs)
    ev = r.kernel_evidence
    return (name, r.model, r.dtype, str(r.threads), r.runner_name, f"{p.median_ms:.3f}",
            f"{p.p90_ms:.3f}", f"{p.cv_pct:.1f}", str(p.n), *startup_cells(pool_startup(rs)),
            speedup, top_category(pool_categories(rs)), ev.sme2 if ev else "-",
            baseline_cell(baseline if baseline is not None else r.judgement)
            + _category_regressions(r.category_judgements)
            + _instructions_cell(r.instructions_judgement)
            + startup_regressions(r.startup_judgements))


def _instructions_cell(j: Judgement | None) -> str:
    """The verdict on instruction counts, where they were judged."""
    if not j or not j.ratio:
        return ""
    word = {"regression": "REGRESSION", "improvement": "fewer"}.get(j.status, "ok")
    return f"; instructions {word} {j.ratio.point:.4f}x"


def startup_regressions(judged: dict[str, Judgement] | None) -> str:
    """Load time or peak memory that regressed against the baseline, appended to the cell."""
    return "".join(f"; {what if j.measure == 'time' else j.measure} REGRESSION "
                   f"{j.ratio.point:.2f}x"
                   for what, j in (judged or {}).items() if j.status == "regression")


def _category_regressions(judged: dict[str, Judgement] | None) -> str:
    """Gated categories that regressed, appended to the end-to-end verdict."""
    return "".join(f"; {c} REGRESSION {j.ratio.point:.2f}x"
                   for c, j in (judged or {}).items() if j.status == "regression")


def _with_blocks(first: BenchmarkResult, results: list[BenchmarkResult]
                 ) -> list[BenchmarkResult]:
    """A benchmark's result and the blocks measured to confirm a suspected regression (same
    test, same setting), so the row shows what the gate judged: all blocks pooled."""
    same = (first.nodeid, first.model, first.dtype, first.threads, first.runner_name)
    return [first] + [r for r in results if r.block is not None and
                      (r.nodeid, r.model, r.dtype, r.threads, r.runner_name) == same]


EMULATED_SUMMARY = ("emulated: measured on an emulated CPU (QEMU); its times and speed-ups say "
                    "nothing about speed — the SME2 column and the outputs are what it proves")


def _rows(results: list[BenchmarkResult],
          comparisons: Iterable[ComparisonRecord]) -> list[tuple[str, ...]]:
    by_id = {r.nodeid: r for r in results}
    rows = [_row(r.name, _with_blocks(r, results), "") for r in results if r.block is None]
    for c in comparisons:
        s = c.speedup
        base = [by_id[n] for n in c.base_blocks if n in by_id]
        cand = [by_id[n] for n in c.candidate_blocks if n in by_id]
        judged = c.baselines or {}
        if base and cand:
            mark = " emulated" if c.emulated else ""
            rows.append(_row(c.name, base, "(base)", judged.get(c.base, {})))
            rows.append(_row(c.name, cand,
                             f"{s.point:.2f}x [{s.low:.2f}, {s.high:.2f}]{mark}",
                             judged.get(c.candidate, {})))
    return rows


def summary_table(results: Iterable[BenchmarkResult],
                  comparisons: Iterable[ComparisonRecord | Mapping[str, Any]] = ()
                  ) -> list[str]:
    """One row per benchmark and per comparison side. Results from several devices get a
    device column, each device's rows together (devices in the order they first measured)."""
    results = list(results)
    comparisons = list(map(_record, comparisons))
    devices = list(dict.fromkeys(r.device_label for r in results))
    columns: tuple[str, ...] = COLUMNS
    numeric = _NUMERIC
    if len(devices) > 1:
        columns, numeric = ("device", *COLUMNS), {i + 1 for i in _NUMERIC}
        rows = [columns]
        for dev in devices:
            mine = [r for r in results if r.device_label == dev]
            ids = {r.nodeid for r in mine}
            rows += [(dev, *row) for row in _rows(mine, [c for c in comparisons
                                                         if set(c.base_blocks) & ids])]
    else:
        rows = [columns] + _rows(results, comparisons)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]

    def fmt(row):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    lines = [fmt(rows[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows[1:]]
    hot = [r for r in results if r.context.started_hot]
    if hot:
        c = hot[0].context.cooldown
        lines.append(f"started hot: {len(hot)} of {len(results)} blocks were above "
                     f"{c.target_c:g} °C or throttling when the {c.timeout_s:g} s cooldown "
                     "ran out (kept; flagged in results.json and report.md)")
    if any(r.emulated for r in results):
        lines.append(EMULATED_SUMMARY)
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
