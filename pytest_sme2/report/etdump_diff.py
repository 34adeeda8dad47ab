"""``pytest-sme2 compare``'s output from an :class:`pytest_sme2.analysis.diff.EtdumpDiff`: the
report's recommendations on it (:func:`with_recommendations`: the same rules as a session's
report, run on a one-comparison results document built from the two analyses; the analysis
computes the diff, the report advises on it), then a few terminal lines and a markdown file."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_sme2 import units
from pytest_sme2.analysis.diff import ADDED, REMOVED, EtdumpDiff, OperatorDelta
from pytest_sme2.analysis.summary import Analysis
from pytest_sme2.report.grouping import below_resolution_note
from pytest_sme2.report.recommend import recommendations
from pytest_sme2.report.recommend.runtime import ETDUMP_RUNNER_KIND, RUNS_OPTION_LABEL
from pytest_sme2.units import COMPACT_RATIO_DIGITS

# -- recommendations ------------------------------------------------------------------------

POINT_MODEL = "ETDumps"
# How the rules name the one comparison of the document below (Unit.point), and how it reads
# in an offline comparison instead.
_POINT = f"{POINT_MODEL}  t0"
_HERE = "these ETDumps"


def with_recommendations(diff: EtdumpDiff, base: Analysis, candidate: Analysis,
                         runs_options: tuple[str, str] = ("", "")) -> EtdumpDiff:
    """``diff`` with the report's recommendations. No device facts: rules that need them (the
    device reports no SME2...) say 'unknown'; no outputs: the output check is skipped.
    ``runs_options``: what set each ETDump's measured runs ("": not recorded beside it)."""
    doc = {"schema": "pytest-sme2/results/1", "session": {},
           "benchmarks": [_block(base, diff.base_name, runs_options[0]),
                          _block(candidate, diff.candidate_name, runs_options[1])],
           "comparisons": [{
               "model": POINT_MODEL, "dtype": "", "threads": 0, "base": diff.base_name,
               "candidate": diff.candidate_name, "base_median_ms": base.e2e.median_ms,
               "candidate_median_ms": candidate.e2e.median_ms,
               "speedup": diff.speedup.to_dict(),
               "category_speedups": {c.category: c.speedup.to_dict() if c.speedup else None
                                     for c in diff.categories},
               "outputs": None, "verdict": diff.verdict, "margin": diff.margin,
               "base_blocks": [f"compare::{diff.base_name}"],
               "candidate_blocks": [f"compare::{diff.candidate_name}"]}]}
    recs = [{"rule": r.rule, "text": _offline(r.text), "evidence": r.evidence.replace(
        f"{_POINT} ", "")} for r in recommendations(doc)]
    return replace(diff, recommendations=recs)


def _offline(text: str) -> str:
    """A rule's sentence about the document's one case, said of the two ETDumps."""
    return text.replace(f"on {_POINT} ", "on ").replace(f" on {_POINT}", "").replace(
        _POINT, _HERE)


def _block(a: Analysis, runner: str, runs_option: str) -> dict[str, Any]:
    doc = a.to_json()
    timed = [float(v) for v in a.timed_e2e]
    doc.pop("schema", None)
    doc.pop("source", None)
    doc.update({"nodeid": f"compare::{runner}", "model": POINT_MODEL, "dtype": "", "threads": 0,
                "runner": runner, "runner_info": {
                    "name": runner, "kind": ETDUMP_RUNNER_KIND,
                    "labels": {RUNS_OPTION_LABEL: runs_option} if runs_option else {}},
                "device": {}, "runs": len(timed), "warmup": a.warmup, "e2e_ms": timed,
                "median_ms": a.e2e.median_ms, "p90_ms": a.e2e.p90_ms, "cv_pct": a.e2e.cv_pct,
                "etdump": a.source, "pte": "", "export_key": ""})
    return doc


# -- rendering --------------------------------------------------------------------------------

TOP_CHANGES = 5
MAX_MD_OPERATORS = 40


def _change(v: float | None) -> str:
    """A percent change, candidate against base."""
    return "n/a" if v is None else units.change(v)


def _speedup(iv) -> str:
    return "n/a" if iv is None else units.ratio_interval(iv, COMPACT_RATIO_DIGITS)


def compare_lines(d: EtdumpDiff) -> list[str]:
    """A few readable lines for the terminal."""
    lines = [
        f"{d.base_name}: {d.base_source}, {d.base_runs} timed runs, median "
        f"{units.ms(d.base_median_ms)} ms (CV {units.percent(d.base_cv_pct)}%)",
        f"{d.candidate_name}: {d.candidate_source}, {d.candidate_runs} timed runs, median "
        f"{units.ms(d.candidate_median_ms)} ms (CV {units.percent(d.candidate_cv_pct)}%)",
        f"speed-up {d.candidate_name} vs {d.base_name}: {units.ratio_interval(d.speedup)} "
        f"95% over runs — {d.verdict}",
        f"  note: {d.note}",
        "categories (ms per run, candidate - base): " + ", ".join(
            f"{c.category} {c.delta_ms:+.3f} ({_change(c.delta_pct)})"
            for c in d.categories if c.base_ms or c.candidate_ms),
    ]
    matched = [o for o in d.operators if o.status not in (ADDED, REMOVED)]
    timed = [o for o in matched if not o.below_resolution]
    if timed:
        lines.append("largest operator changes: " + "; ".join(
            f"{o.name} {o.delta_ms:+.3f} ms ({_change(o.delta_pct)})"
            for o in timed[:TOP_CHANGES]))
    unresolved = [o.name for o in matched if o.below_resolution]
    if unresolved:
        lines.append(f"in both: {below_resolution_note(unresolved)}")
    if d.added or d.removed:
        lines.append(f"operators only in {d.candidate_name}: {len(d.added)}, only in "
                     f"{d.base_name}: {len(d.removed)}")
    for b, c in d.kleidiai_changes:
        lines.append(f"KleidiAI: {b} -> {c}")
    if not d.kleidiai_changes and (d.kleidiai_base or d.kleidiai_candidate):
        lines.append(f"KleidiAI packed ops: {d.base_name} {len(d.kleidiai_base)}, "
                     f"{d.candidate_name} {len(d.kleidiai_candidate)}")
    if d.bottlenecks:
        lines.append("bottlenecks (>5% of E2E): " + ", ".join(
            f"{o.name} ({units.share(o.base_pct_e2e)} -> {units.share(o.candidate_pct_e2e)})"
            for o in d.bottlenecks[:TOP_CHANGES]))
    for r in d.recommendations:
        lines.append(f"recommendation: {r['text']}")
    return lines


def _cell(s: str | None) -> str:
    return "—" if s is None else f"`{s}`".replace("|", "\\|")


def _op_row(o: OperatorDelta) -> str:
    return (f"| {_cell(o.base_name)} | {_cell(o.candidate_name)} | {o.instruction_id} | "
            f"{o.category} | {o.base_ms:.4f} | {o.candidate_ms:.4f} | {o.delta_ms:+.4f} | "
            f"{_change(o.delta_pct)} | {'under 1 µs' if o.below_resolution else o.status} |")


def render_markdown(d: EtdumpDiff) -> str:
    b, c = d.base_name, d.candidate_name
    out = [f"# ETDump comparison: {b} → {c}", "",
           f"- {b}: `{d.base_source}` — {d.base_runs} timed runs ({d.warmup} warm-up "
           f"dropped), median {units.ms(d.base_median_ms)} ms, "
           f"CV {units.percent(d.base_cv_pct)}%",
           f"- {c}: `{d.candidate_source}` — {d.candidate_runs} timed runs, median "
           f"{units.ms(d.candidate_median_ms)} ms, CV {units.percent(d.candidate_cv_pct)}%", "",
           "## Speed-up", "",
           f"**{units.ratio(d.speedup.point)}** ({b} median / {c} median of Method::execute "
           f"per run), 95% bootstrap interval over runs {units.interval(d.speedup)}: "
           f"{d.verdict}.", "", f"> {d.note}", "",
           "## Operator Category Breakdown", "",
           "Mean ms per timed run (Other = E2E − named categories); speed-up: ratio of "
           "per-run medians, bootstrap over runs.", "",
           f"| category | {b} ms | {c} ms | Δ ms | Δ % | {b} % E2E | {c} % E2E | speed-up |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for x in d.categories:
        if not (x.base_ms or x.candidate_ms):
            continue                      # a category neither trace has
        out.append(f"| {x.category} | {x.base_ms:.4f} | {x.candidate_ms:.4f} | "
                   f"{x.delta_ms:+.4f} | {_change(x.delta_pct)} | "
                   f"{units.percent(x.base_share_pct)} | "
                   f"{units.percent(x.candidate_share_pct)} | {_speedup(x.speedup)} |")
    out += ["", "## Operators", "",
            "Matched by delegate instruction, operator name without `#n`, and occurrence; "
            "ms per run.", "",
            f"| {b} | {c} | instr | category | {b} ms | {c} ms | Δ ms | Δ % | status |",
            "|---|---|--:|---|--:|--:|--:|--:|---|"]
    shown = d.operators[:MAX_MD_OPERATORS]
    out += [_op_row(o) for o in shown]
    if len(d.operators) > len(shown):
        out.append(f"\n{len(d.operators) - len(shown)} more in the JSON (`--json`).")
    unresolved = [o.name for o in d.operators if o.below_resolution]
    if unresolved:
        out += ["", f"{below_resolution_note(unresolved)} (status `under 1 µs` above)."]
    out += ["", "## KleidiAI packed paths", ""]
    if d.kleidiai_changes:
        out += [f"- `{x}` → `{y}`" for x, y in d.kleidiai_changes]
    else:
        out.append("No operator changed between a plain and a KleidiAI packed datatype.")
    out += [f"- {b}: {len(d.kleidiai_base)} packed ops; kernel evidence {d.evidence_base}",
            f"- {c}: {len(d.kleidiai_candidate)} packed ops; kernel evidence "
            f"{d.evidence_candidate}", "", "## Bottleneck Identification", "",
            "Operators above 5% of E2E on either side."]
    if d.bottlenecks:
        out += ["", f"| operator | instr | category | where | {b} % E2E | {c} % E2E |",
                "|---|--:|---|---|--:|--:|"]
        out += [f"| {_cell(o.name)} | {o.instruction_id} | {o.category} | "
                f"{'delegated' if o.delegated else 'portable'} | "
                f"{units.percent(o.base_pct_e2e)} | {units.percent(o.candidate_pct_e2e)} |"
                for o in d.bottlenecks]
    else:
        out += ["", "No operator above 5% of E2E."]
    out += ["", "## Recommendations", ""]
    if d.recommendations:
        out += [f"- {r['text']} _({r['evidence']})_" for r in d.recommendations]
    else:
        out.append("None: no rule of the report fired on these two traces.")
    return "\n".join(out) + "\n"
