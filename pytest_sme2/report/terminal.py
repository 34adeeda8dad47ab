"""Terminal lines: one per benchmark or comparison as it finishes, one table at the end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_sme2 import units
from pytest_sme2.analysis.categories import OTHER
from pytest_sme2.units import COMPACT_RATIO_DIGITS, COUNT_RATIO_DIGITS
from pytest_sme2.report import generation as gen
from pytest_sme2.analysis.scaling import thread_scaling
from pytest_sme2.report.columns import LATENCY, TERMINAL, shown
from pytest_sme2.report.grouping import Side, comparison_record
from pytest_sme2.report.view import Source, view_of
from pytest_sme2.report.machine_notes import (block_notes, comparison_notes,  # noqa: F401
                                              mixed, session_lines)
from pytest_sme2.report.precision_notes import precision_lines
from pytest_sme2.report.unresolved_notes import unresolved_lines  # noqa: F401 (the summary's)
from pytest_sme2.results import (BlockResult, ComparisonRecord, Judgement, Startup,
                                 pool_generation)
from pytest_sme2.results.records import KernelEvidence
from pytest_sme2.instructions.count import format_count

TOP_OPERATORS = 10
_LATENCY = shown(LATENCY, TERMINAL)
COLUMNS = ("benchmark", "model", "dtype", "threads", "runner",
           *(f.title(TERMINAL) for f in _LATENCY), "load, 1st ms", "peak, pte MB",
           "speedup [95% CI]", "top category", "SME2", "vs baseline")
_NUMERIC = {3, *range(5, 5 + len(_LATENCY) + 2)}     # threads, the latency, load and peak
EMULATED = " [emulated CPU: timings say nothing about speed]"
MIXED_MARK = "*"
MIXED_SUMMARY = ("* its runs or blocks fell into several machine speeds: that median is a "
                 "mixture's (the benchmark's line and report.md say which speeds)")


def benchmark_line(r: BlockResult, device: bool = False) -> str:
    """``device``: name the device too (a session on several). An LLM measured as a
    generation says its phases instead of ``Method::execute``."""
    if r.generation is not None:
        return generation_line(r, device)
    e = r.e2e
    ev = r.kernel_evidence
    sme2 = f"; {_levels(ev)}" if ev is not None and (ev.traced or ev.sampled) else ""
    where = f" on {r.device_label}" if device else ""
    return (f"sme2: {r.model} {r.dtype} t{r.threads} {r.runner_name}{where}: Method::execute "
            "median "
            f"{units.ms(e.median_ms)} ms, p90 {units.ms(e.p90_ms)} ms, "
            f"CV {units.percent(e.cv_pct)}%, "
            f"n={e.n} (+{r.warmup} warm-up discarded){sme2}"
            + _outputs(r) + _timing(r) + _instructions(r) + _startup(r.startup)
            + _machine(r) + (EMULATED if r.emulated else ""))


def _machine(r: BlockResult) -> str:
    """`` | its runs fell into two speeds: ...: its median is a mixture's``, and the probe's
    move during them."""
    return "".join(f" | {note}" for note in block_notes(r))


def _levels(ev: KernelEvidence) -> str:
    """``SME2 proven``; where the SME level is known, both: ``SME: proven (SME1 kernels:
    kai_..._sme_mopa, ...); SME2: absent``."""
    return ev.levels if ev.shows_sme_level else f"SME2 {ev.sme2}"


def _verdict_cell(ev: KernelEvidence | None) -> str:
    """The summary table's SME2 cell: the verdict, and the SME level's when it ran or may
    have (``absent (SME proven)`` on a device with SME but no SME2)."""
    if ev is None:
        return "-"
    return ev.sme2 + (f" (SME {ev.sme})" if ev.shows_sme_level and
                      ev.sme in ("proven", "indicated", "mixed") else "")


def _tok_s(v: float | None) -> str:
    return "-" if v is None else units.tokens_per_s(v)


def _ms(v: float | None) -> str:
    return "-" if v is None else units.ms(v)


def generation_line(r: BlockResult, device: bool = False) -> str:
    """An LLM's generation as it finishes: ``prefill N tok/s, decode N tok/s (per token
    median x ms, p90 y ms), TTFT z ms``, its timed generations and each phase's SME2 verdict
    where kernels were traced or sampled."""
    g = pool_generation([r])
    assert g is not None
    pre, dec = g.prefill, g.decode
    where = f" on {r.device_label}" if device else ""
    verdicts = [f"{p.phase} {_verdict_cell(p.evidence)}" for p in g.phases
                if p.evidence is not None and (p.evidence.traced or p.evidence.sampled)]
    sme2 = f"; SME2 {', '.join(verdicts)}" if verdicts else ""
    return (f"sme2: {r.model} {r.dtype} t{r.threads} {r.runner_name}{where}: generation of "
            f"{g.prompt_tokens} prompt + {g.new_tokens} new tokens{_at_depth(r)} "
            f"({g.tests}): prefill "
            f"{_tok_s(pre.tokens_per_s)} tok/s, decode {_tok_s(dec.tokens_per_s)} tok/s "
            f"(per token median {_ms(dec.token_median_ms)} ms, p90 {_ms(dec.token_p90_ms)} ms), "
            f"TTFT {_ms(g.ttft_ms)} ms, n={pre.generations} generations "
            f"(+{r.warmup} warm-up discarded){sme2}"
            + (f" | {note}" if (note := gen.rates_note(dec)) else "")
            + _outputs(r) + _timing(r) + _instructions(r) + _startup(r.startup)
            + _machine(r) + (EMULATED if r.emulated else ""))


def _at_depth(r: BlockResult) -> str:
    """`` at depth 512 (the KV cache filled first: 91.1 ms, in no phase)``; nothing at depth
    0."""
    if not r.depth:
        return ""
    g = r.generation
    took = f": {_ms(g.depth_ms)} ms" if g.depth_ms is not None else ""
    return f" at depth {g.depth} (the KV cache filled first{took}, in no phase)"


def _outputs(r: BlockResult) -> str:
    """`` | NOT FINITE: ...`` where the outputs (sampled logits) held NaN or inf."""
    problem = r.context.output_problem
    return f" | NOT FINITE: {problem}" if problem else ""


def _timing(r: BlockResult) -> str:
    """`` | operator tracing adds +52% here ...`` where tracing cost more than
    LOUD_OVERHEAD_PCT, or where the latency could only be timed through the tracer."""
    t = r.timing
    if t is None or r.emulated:     # emulated times say nothing, what tracing adds neither
        return ""
    if not t.untraced:
        return f" | timed through the operator tracer ({r.runner_name} cannot run without it)"
    note = t.terminal_note(r.e2e.p90_ms)
    return f" | {note}" if note else ""


def _sig(v: float | None) -> str:
    """Three significant digits (narrow cells), "-" when not measured."""
    return "-" if v is None else units.significant(v)


def _mb(kb: float | int | None) -> str:
    return "-" if kb is None else _sig(kb / 1024)


def startup_cells(s: Startup | None) -> tuple[str, str]:
    """(cold load and first inference in ms, peak resident memory and .pte size in MB, and
    its .ptd's after a ``+`` when its weights live apart)."""
    if s is None:
        return "-", "-"
    pte = None if s.pte_bytes is None else s.pte_bytes / 1024
    ptd = "" if s.ptd_bytes is None else f"+{_mb(s.ptd_bytes / 1024)}"
    return (f"{_sig(s.load_ms)}, {_sig(s.first_inference_ms)}",
            f"{_mb(s.peak_rss_kb)}, {_mb(pte)}{ptd}")


def _startup(s: Startup | None) -> str:
    """`` | load X ms (n cold), first inference Y ms, peak Z MB`` where measured."""
    if s is None or s.load_ms is None:
        return ""
    peak = f", peak {_mb(s.peak_rss_kb)} MB" if s.peak_rss_kb is not None else ""
    return (f" | load {_sig(s.load_ms)} ms ({s.loads} cold), first inference "
            f"{_sig(s.first_inference_ms)} ms{peak}")


def _instructions(r: BlockResult) -> str:
    """`` | instructions X per execute ...`` where they were counted (--sme2-measure)."""
    if not r.instructions:
        return ""

    return f" | instructions {format_count(r.instructions)}"


def cooldown_lines(r: BlockResult, told: bool = False) -> list[str]:
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
    c = comparison_record(c)
    s, out = c.speedup, c.outputs
    outputs = "" if not out else (
        f", outputs equal (max |diff| {out.max_abs_diff:.3g}, relative "
        f"{out.max_rel_diff:.3g})" if out.equal else
        f", OUTPUTS DIFFER (max |diff| {out.max_abs_diff:.3g}, relative "
        f"{out.max_rel_diff:.3g}, tolerance {out.tolerance:.3g})")
    where = f" on {device}" if device else ""
    return (f"sme2: {c.candidate} vs {c.base} on {c.point}{where}: "
            f"speed-up {units.ratio_interval(s)}, medians "
            f"{units.ms(c.base_median_ms)} -> {units.ms(c.candidate_median_ms)} ms over "
            f"{len(c.base_blocks)} blocks each: {c.verdict}{outputs}"
            + (EMULATED if c.emulated else ""))


def side_evidence_lines(c: ComparisonRecord, results: Iterable[BlockResult]) -> list[str]:
    """Under a comparison's line, what each side's kernel evidence says where kernels were
    traced or sampled: ``sme2:   sme_on: SME: proven (SME1 kernels: ...); SME2: absent`` (an
    LLM's per phase)."""
    lines = []
    for runner, ids in ((c.base, c.base_blocks), (c.candidate, c.candidate_blocks)):
        r = next((b for b in results if b.runner_name == runner and b.nodeid in ids), None)
        if r is None:
            continue
        said = [f"{phase} {_levels(ev)}".lstrip() for phase, ev in r.evidence_per_phase
                if ev is not None and (ev.traced or ev.sampled)]
        if said:
            lines.append(f"sme2:   {runner}: {' | '.join(said)}")
    return lines


def top_category(categories_ms: dict[str, float]) -> str:
    named = {k: v for k, v in categories_ms.items() if k != OTHER}
    if not named or max(named.values()) <= 0:
        return "-"
    cat = max(named, key=named.get)
    total = sum(categories_ms.values())
    return f"{cat} {units.share(100 * named[cat] / total, 0)}" if total > 0 else cat


def baseline_cell(j: Judgement | None) -> str:
    """The gate's judgement in a few characters: status and current/baseline time ratio."""
    if not j:
        return "-"
    if j.status == "not_compared":
        return "foreign (not compared)" if j.foreign else "-"
    word = {"regression": "REGRESSION", "improvement": "faster",
            "cannot_tell": "CANNOT TELL"}.get(j.status, j.word)
    pairs = f" ({j.current_blocks} pairs)" if j.against != "baseline" and j.current_blocks \
        else ""
    return f"{word} {units.ratio_interval(j.ratio, COMPACT_RATIO_DIGITS)}{pairs}"


def _row(side: Side, speedup: str, baseline: Judgement | dict | None = None
         ) -> tuple[str, ...]:
    """One row for a benchmark, or for one side of a comparison: its blocks pooled."""
    r = side.first
    ev = r.kernel_evidence
    latency = [f.cell(side.latency) for f in _LATENCY]
    if mixed(side.blocks):      # the median of a mixture never stands without its mark
        latency[0] += MIXED_MARK
    return (side.test, r.model, r.dtype, str(r.threads), r.runner_name,
            *latency, *startup_cells(side.startup),
            speedup, top_category(side.categories_ms), _verdict_cell(ev),
            baseline_cell(baseline if baseline is not None else r.judgement)
            + _category_regressions(r.category_judgements)
            + _instructions_cell(r.instructions_judgement)
            + startup_regressions(r.startup_judgements))


def _compact(ratio: float) -> str:
    return units.ratio(ratio, COMPACT_RATIO_DIGITS)


def _instructions_cell(j: Judgement | None) -> str:
    """The verdict on instruction counts, where they were judged."""
    if not j or not j.ratio:
        return ""
    word = {"regression": "REGRESSION", "improvement": "fewer",
            "cannot_tell": "CANNOT TELL"}.get(j.status, j.word)
    return f"; instructions {word} {units.ratio(j.ratio.point, COUNT_RATIO_DIGITS)}"


def startup_regressions(judged: dict[str, Judgement] | None) -> str:
    """Load time or peak memory that regressed against the baseline, appended to the cell."""
    return "".join(f"; {what if j.measure == 'time' else j.measure} REGRESSION "
                   f"{_compact(j.ratio.point)}"
                   for what, j in (judged or {}).items() if j.status == "regression")


def _category_regressions(judged: dict[str, Judgement] | None) -> str:
    """Gated categories that regressed, appended to the end-to-end verdict."""
    return "".join(f"; {c} REGRESSION {_compact(j.ratio.point)}"
                   for c, j in (judged or {}).items() if j.status == "regression")


EMULATED_SUMMARY = ("emulated: measured on an emulated CPU (QEMU); its times and speed-ups say "
                    "nothing about speed — the SME2 column and the outputs are what it proves")


def _rows(sides: Iterable[Side]) -> list[tuple[str, ...]]:
    """One row per forward pass's benchmark and comparison side: its blocks pooled, so a
    benchmark's row shows what the gate judged (its confirmation blocks too)."""
    rows = []
    for side in sides:
        c = side.comparison
        baseline = (c.baselines or {}).get(side.runner, {}) if c is not None else None
        rows.append(_row(side, _speedup_cell(side), baseline))
    return rows


def _speedup_cell(side: Side) -> str:
    """A comparison side's speed-up: ``(base)``, or the candidate's interval; "" for a
    test's benchmark."""
    c = side.comparison
    if c is None:
        return ""
    if side.role == "base":
        return "(base)"
    return units.ratio_interval(c.speedup, COMPACT_RATIO_DIGITS) + (" emulated" if c.emulated
                                                                     else "")


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]], numeric: set[int]
           ) -> list[str]:
    """A header, a rule and the rows, each column as wide as its widest cell; numbers to
    the right."""
    widths = [max(len(row[i]) for row in (columns, *rows)) for i in range(len(columns))]

    def fmt(row):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return [fmt(columns), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def summary_table(source: Source) -> list[str]:
    """One row per benchmark and per comparison side (an LLM's in the generation table under
    it, once). Results from several devices get a device column, each device's rows together
    (devices in the order they first measured)."""
    view = view_of(source)
    results, per_device = view.results, view.per_device(view.forward_sides)
    columns: tuple[str, ...] = COLUMNS
    numeric = _NUMERIC
    several = len(per_device) > 1
    if several:
        columns, numeric = ("device", *COLUMNS), {i + 1 for i in _NUMERIC}
    rows = [(dev, *row) if several else row for dev, sides in per_device.items()
            for row in _rows(sides)]
    lines = _table(columns, rows, numeric) if rows else []
    hot = [r for r in results if r.context.started_hot]
    if hot:
        c = hot[0].context.cooldown
        lines.append(f"started hot: {len(hot)} of {len(results)} blocks were above "
                     f"{c.target_c:g} °C or throttling when the {c.timeout_s:g} s cooldown "
                     "ran out (kept; flagged in results.json and report.md)")
    broken = [r for r in results if r.context.output_problem and r.block is None]
    if broken:
        lines.append(f"not finite: {len(broken)} benchmark(s) computed NaN or inf "
                     f"({', '.join(r.name for r in broken[:3])}"
                     f"{', ...' if len(broken) > 3 else ''}): their timings are not the "
                     "model's (flagged in results.json and report.md; --sme2-strict-outputs "
                     "fails them)")
    if any(r.emulated for r in results):
        lines.append(EMULATED_SUMMARY)
    if any(mixed(side.blocks) for side in view.forward_sides):
        lines.append(MIXED_SUMMARY)
    llms = generation_table(view.per_device(view.generation_sides))
    return (lines + (llms if lines else llms[1:]) + gen.bandwidth_lines(results)
            + gen.attention_lines(results) + gen.runner_stats_lines(results)
            + gen.scaling_terminal_lines(thread_scaling(results)) + precision_lines(results))


GENERATION_COLUMNS = ("benchmark", "runner", "scheme", "threads", "tests", "prefill tok/s",
                      "decode tok/s", "decode/token ms", "p90 ms", "TTFT ms", "load, 1st ms",
                      "peak, pte MB", "decode speedup [95% CI]", "SME2 prefill", "SME2 decode",
                      "vs baseline")
GENERATION_NUMERIC = {GENERATION_COLUMNS.index(c) for c in (
    "threads", "prefill tok/s", "decode tok/s", "decode/token ms", "p90 ms", "TTFT ms",
    "load, 1st ms", "peak, pte MB")}
_PER_TOKEN = GENERATION_COLUMNS.index("decode/token ms")
RATES_MARK = ("* its decode steps ran at several machine speeds: the per-token median and the "
              "decode rate differ; believe the rate, a whole generation's time (the benchmark's "
              "line says how far apart)")


def _phase_verdicts(r: BlockResult, baseline: Judgement | None = None) -> str:
    """The gate's verdicts on a generation: decode per token (the block's own, or the
    comparison side's), then prefill and TTFT (``phase_judgements``)."""
    judged = gen.phase_judgements(r)
    if baseline is not None:
        judged["decode"] = baseline
    counted = judged.pop("prefill_instructions", None)   # counts: the count's own cell
    cells = [f"{phase} {baseline_cell(j)}" for phase, j in judged.items()
             if baseline_cell(j) != "-"]
    cells += [f"{phase} {_instructions_cell(j).removeprefix('; ')}" for phase, j in
              (("decode", r.instructions_judgement), ("prefill", counted))
              if _instructions_cell(j)]
    return "; ".join(cells) or "-"


def generation_row(name: str, side: Side) -> tuple[str, ...]:
    """A generation side's figures as :data:`GENERATION_COLUMNS` cells."""
    g = side.generation
    assert g is not None, "a generation row is a generation side's"
    r = side.first
    pre, dec = g.prefill, g.decode
    c = side.comparison
    baseline = (c.baselines or {}).get(side.runner) or None if c is not None else None
    return (name, r.runner_name, r.dtype, str(r.threads), g.tests,
            _tok_s(pre.tokens_per_s), _tok_s(dec.tokens_per_s),
            _ms(dec.token_median_ms) + ("*" if gen.rates_note(dec) else ""),
            _ms(dec.token_p90_ms), _ms(g.ttft_ms), *startup_cells(side.startup),
            _speedup_cell(side), _verdict_cell(pre.evidence), _verdict_cell(dec.evidence),
            _phase_verdicts(r, baseline))


def generation_table(per_device: Mapping[str, list[Side]]) -> list[str]:
    """The LLMs measured as a generation, one row per benchmark and comparison side, under
    the summary table; nothing when there are none."""
    several = len(per_device) > 1
    rows = [((dev,) if several else ()) + generation_row(side.test, side)
            for dev, sides in per_device.items() for side in sides]
    if not rows:
        return []
    columns = (("device",) if several else ()) + GENERATION_COLUMNS
    numeric = {i + several for i in GENERATION_NUMERIC}
    marked = [RATES_MARK] if any(r[_PER_TOKEN + several].endswith("*") for r in rows) else []
    return (["", "generation (LLMs: prefill + decode, medians over the timed generations)"]
            + _table(columns, rows, numeric) + marked)
