"""What ``pytest-sme2 analyze`` prints for one ETDump: its runs, Method::execute's statistics,
the operator categories (those under the clock's resolution said), overheads, the top
operators and the kernel evidence; an LLM's phases first."""

from __future__ import annotations

from pytest_sme2 import units
from pytest_sme2.report import generation as gen
from pytest_sme2.report.grouping import below_resolution_note
from pytest_sme2.report.terminal import TOP_OPERATORS

def analysis_summary(a, warmup_said: str = "", generation=None) -> list[str]:
    """Readable summary of a :class:`pytest_sme2.analysis.summary.Analysis`; ``warmup_said``:
    where its warm-up count came from; ``generation``: an LLM's phases (a GenerationResult),
    said first, ``a`` then being the analysis of its decode steps."""
    e = a.e2e
    head = [warmup_said] if warmup_said else []
    if generation is not None:
        head += [*gen.generation_analysis_lines(generation), "",
                 "Decode steps of the measured generations (the breakdown a session reports):"]
    lines = [*head, f"{a.source}: {a.runs} runs, {a.warmup} warm-up discarded, {e.n} timed",
             f"Method::execute: median {units.ms(e.median_ms)} ms, "
             f"mean {units.ms(e.mean_ms)}, p10 {units.ms(e.p10_ms)}, "
             f"p90 {units.ms(e.p90_ms)}, min {units.ms(e.min_ms)}, max {units.ms(e.max_ms)}, "
             f"CV {units.percent(e.cv_pct)}%, MAD {units.ms(e.mad_ms)}, "
             f"outliers {e.outliers} (IQR rule, kept)",
             "", "Categories (mean ms per run; Other = E2E - named):"]
    ops = a.operators
    under = ops["below_resolution"].astype(bool)
    unresolved = ops.loc[under, "name"].tolist()
    # A category all of whose operators read 0 is not free: its time is in Other.
    hidden = set(ops.loc[under, "category"]) - set(ops.loc[~under, "category"])
    for cat, ms in a.categories_ms.items():
        pct = 100 * ms / e.mean_ms if e.mean_ms else 0.0
        under = "  (under the clock's resolution: in Other)" if cat in hidden else ""
        lines.append(f"  {cat:<14} {ms:9.4f} ms  {pct:5.1f}%{under}")
    lines.append(f"  {'E2E':<14} {e.mean_ms:9.4f} ms")
    if unresolved:
        lines.append(f"  {below_resolution_note(unresolved)}")
    o = a.overheads_ms
    lines += ["", f"Overheads: delegate {o['delegate_ms']:.4f} ms, operator call "
                  f"{o['operator_call_ms']:.4f} ms, runtime {o['runtime_ms']:.4f} ms per run",
              "", f"Top operators (of {len(a.operators)}):"]
    for r in a.operators.head(TOP_OPERATORS).itertuples(index=False):
        flags = ("  BOTTLENECK" if r.bottleneck else "") + \
            ("  should be delegated" if r.should_delegate else "")
        where = r.backend if r.delegated else "portable"
        time = (f"{'< 1 µs':>12}      " if r.below_resolution
                else f"{r.mean_ms_per_run:9.4f} ms {r.pct_e2e:5.1f}%")
        lines.append(f"  {time}  {r.name}  [{r.category}, {where}, instr {r.instruction_id}, "
                     f"{r.calls_per_run:g}/run]{flags}")
    ev = a.evidence
    lines += ["", f"SME2: {ev.sme2} — {ev.reason}"]
    if ev.shows_sme_level:
        lines.append(f"SME: {ev.sme} — {ev.sme_reason}")
    return lines
