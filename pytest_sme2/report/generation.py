"""The rows every report shows of an LLM measured as a generation (issue 30): report.md's
Generation section and Summary lines, the kernels cell, the token ids, the verdicts per phase.

A generation block (``BlockResult.generation`` set) keeps a forward pass's fields: ``e2e_ms``
holds decode time per token (each timed decode step), and its analysis is of the decode
executes. The prefill and the time to first token are only in ``generation``. The figures are
pooled by :func:`pytest_sme2.results.pooling.pool_generation`; the kernels each phase ran, and
the phrase saying so, are read from their names by :mod:`pytest_sme2.analysis.isa`, from the
evidence the session collected, never from a table of what a scheme is expected to run.

An LLM measured at two or more thread counts gets the thread scaling section (issue 38): one
table per benchmark, per phase tokens/s, speed-up over the base count and parallel efficiency,
then where each phase's scaling stops and what the SME2 unit has to do with it. The figures are
:func:`pytest_sme2.analysis.scaling.thread_scaling`'s; this module only lays them out, for
report.md (:func:`scaling_markdown_lines`) and the terminal (:func:`scaling_terminal_lines`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from pytest_sme2.analysis.isa import PhaseKernel, kernel_phrase, phase_kernels
from pytest_sme2.analysis.machine_state import STRADDLE
from pytest_sme2.analysis.scaling import (MIN_SHARE_OF_IDEAL, STOP_RULE, ScalingSeries,
                                          shared_unit_note)
from pytest_sme2.analysis.traffic import bandwidth_line
from pytest_sme2.programs.llm.forms import ATTENTION_NOTE, pairs_of_forms
from pytest_sme2.report.cells import MISSING, code, fmt_ms, fmt_tokens_per_s
from pytest_sme2.report.digest import Unit, category_order
from pytest_sme2.report.grouping import Side
from pytest_sme2.results import BlockResult, GenerationFigures, Judgement
from pytest_sme2.results.generation import DECODE, PHASES, GenerationResult, PhaseStats
from pytest_sme2.results.pooling import generation_blocks, generations, pool_generation

TOKENS_SHOWN = 8      # the first generated token ids a report shows


def phase_judgements(r: BlockResult) -> dict[str, Judgement]:
    """The gate's verdicts on a generation's phases: decode per token (the block's own
    end-to-end verdict), prefill and time to first token (``phase_judgements``)."""
    out: dict[str, Judgement] = {}
    if r.judgement is not None:
        out[DECODE] = r.judgement
    for name, j in (r.phase_judgements or {}).items():
        out[name] = j
    return out


def tokens_text(tokens: Sequence[int], shown: int = TOKENS_SHOWN) -> str:
    """The first generated ids: ``292 396 17 … (33 ids)``."""
    head = " ".join(str(t) for t in tokens[:shown])
    return f"{head} … ({len(tokens)} ids)" if len(tokens) > shown else head or "-"


# -- kernels per phase -----------------------------------------------------------------------

# -- report.md's Generation section ----------------------------------------------------------

def _share(ms: float | None, total: float | None) -> float | None:
    return 100.0 * ms / total if ms is not None and total else None


def kernels_cell(kernels: Sequence[PhaseKernel]) -> str:
    """A markdown cell listing kernels: ``name`` (family, how known), one per line."""
    return "<br>".join(f"{code(k.name)} ({k.family}, {k.how})" for k in kernels) or MISSING


def _generations(us) -> Iterator[tuple[Unit, Side, GenerationFigures]]:
    """Each report unit's side whose blocks are a generation, with its generation pooled."""
    for u in us:
        for side in u.sides:
            if side.generation is not None:
                yield u, side, side.generation


def report_rows(us) -> list[dict]:
    """One entry per LLM benchmark and runner (a report unit's side whose blocks are a
    generation): plain values for ``report.md.j2``'s Generation section."""
    out = []
    for u, side, g in _generations(us):
        pre, dec = g.prefill, g.decode
        pre_total = sum(pre.categories_ms.values()) or None
        dec_total = sum(dec.categories_ms.values()) or None
        cats = category_order(list(pre.categories_ms) + [c for c in dec.categories_ms
                                                         if c not in pre.categories_ms])
        out.append({
            "title": f"{u.point} {side.runner}", "scheme": u.dtype,
            "emulated": any(b.emulated for b in side.blocks),
            "prompt_tokens": g.prompt_tokens, "new_tokens": g.new_tokens,
            "depth": g.depth, **_fill(side.blocks),
            "tests": {p.phase: g.bench_name(p.phase) for p in g.phases},
            "prefill_how": ("one execute" if g.dynamic_shape
                            else f"{pre.executes} one-token executes"),
            "generations": pre.generations, "blocks": g.blocks,
            "phases": [vars(p) for p in g.phases],
            "ttft_ms": g.ttft_ms, "generation_ms": g.generation_ms,
            "tokens": tokens_text(g.tokens),
            "categories": [(c, pre.categories_ms.get(c),
                            _share(pre.categories_ms.get(c), pre_total),
                            dec.categories_ms.get(c),
                            _share(dec.categories_ms.get(c), dec_total))
                           for c in cats],
            "kernels": [{"phase": p.phase, "verdict": p.sme2,
                         "reason": p.evidence.reason if p.evidence else
                         "no kernel evidence was collected for this phase",
                         "phrase": kernel_phrase(p.evidence),
                         "cell": kernels_cell(phase_kernels(p.evidence))}
                        for p in g.phases],
        })
    return out


def _fill(blocks) -> dict:
    """The depth fill per generation: its executes (the first generation block's) and its
    time (the median of the blocks' medians, ms; None where none was measured)."""
    gens = generations(blocks)
    times = sorted(g.depth_ms for g in gens if g.depth_ms is not None)
    return {"depth_executes": gens[0].depth_executes if gens else 0,
            "depth_ms": times[(len(times) - 1) // 2] if times else None}


def rates_note(p: PhaseStats) -> str:
    """Where a phase's per-token median and its rate (the median generation's tokens over its
    time) point two ways, more than :data:`STRADDLE` apart, as when its steps ran at two
    machine speeds: which to believe and why. "" where they agree (a steady machine: within a
    few %), or where the phase has no one-token executes."""
    if not p.token_median_ms or not p.tokens_per_s:
        return ""
    step_rate = 1e3 / p.token_median_ms
    apart = max(step_rate / p.tokens_per_s, p.tokens_per_s / step_rate)
    if apart <= STRADDLE:
        return ""
    return (f"{p.phase}: the per-token median ({fmt_ms(p.token_median_ms)} ms, "
            f"{fmt_tokens_per_s(step_rate)} tok/s) and the median generation's rate "
            f"({fmt_tokens_per_s(p.tokens_per_s)} tok/s) are {apart:.2f}x apart: its steps ran "
            "at several machine speeds; believe the rate, a whole generation's time as a user "
            "waits for it (the per-token median is the commonest step's speed)")


def summary_lines(us) -> list[str]:
    """report.md's Summary: one line per LLM benchmark and runner."""
    out = []
    for u, side, g in _generations(us):
        emulated = " (emulated CPU: says nothing about speed)" if any(
            b.emulated for b in side.blocks) else ""
        out.append(f"{u.point} {side.runner} (LLM, {g.tests}): prefill "
                   f"{fmt_tokens_per_s(g.prefill.tokens_per_s)} tok/s, decode "
                   f"{fmt_tokens_per_s(g.decode.tokens_per_s)} tok/s (per token median "
                   f"{fmt_ms(g.decode.token_median_ms)} ms, p90 "
                   f"{fmt_ms(g.decode.token_p90_ms)} ms), TTFT {fmt_ms(g.ttft_ms)} ms"
                   f"{emulated}." + (f" Note: {note}." if (note := rates_note(g.decode))
                                     else ""))
    return out


def bandwidth_lines(blocks: Iterable[BlockResult]) -> list[str]:
    """Decode against the memory-bandwidth limit, one line per LLM benchmark (device, model,
    scheme, threads, runner, context depth): ``tiny_llama 8da8w t1 native on host: decode reads
    ...``, ``... on host at depth 512: ...``."""
    groups: dict[tuple, list[BlockResult]] = {}
    for b in generation_blocks(blocks):
        groups.setdefault((b.device.label, b.model, b.dtype, b.threads, b.runner_name,
                           b.generation.depth), []).append(b)
    out = []
    for (device, model, dtype, threads, runner, depth), bs in groups.items():
        g = pool_generation(bs)
        traffic = next((b.generation.traffic for b in bs if b.generation.traffic), None)
        line = bandwidth_line(traffic, g.decode.tokens_per_s,
                              any(b.emulated for b in bs))
        at = f" at depth {depth}" if depth else ""
        if line:
            out.append(f"{model} {dtype} t{threads} {runner} on {device}{at}: {line}")
    return out


def generation_analysis_lines(g: GenerationResult) -> list[str]:
    """``pytest-sme2 analyze`` on an LLM's ETDump: each phase apart (never one median over
    prefill and decode executes), per generation and per token, with its categories."""
    lines = [f"Generation: {g.generations} of {g.prompt_tokens} prompt + {g.new_tokens} new "
             f"tokens ({g.bench_name('prefill')}, {g.bench_name('decode')}), {g.warmup} warm-up "
             "dropped; per phase, over the generations:"]
    for p in (g.prefill, g.decode):
        if not p.executes:
            continue
        token = ("" if p.token_median_ms is None else
                 f"; per token median {fmt_ms(p.token_median_ms)} ms, p90 "
                 f"{fmt_ms(p.token_p90_ms)} ms")
        cats = ", ".join(f"{c} {fmt_ms(p.categories_ms[c])}" for c in
                         category_order(p.categories_ms) if p.categories_ms.get(c))
        lines.append(f"  {p.phase}: {p.executes} execute(s), median {fmt_ms(p.median_ms)} ms "
                     f"per generation ({fmt_tokens_per_s(p.tokens_per_s)} tok/s), p90 "
                     f"{fmt_ms(p.p90_ms)} ms, CV {p.cv_pct:.1f}%{token}")
        if cats:
            lines.append(f"    categories (ms per generation): {cats}")
    return lines


# -- ExecuTorch's own runner, by its stats, beside our clock ---------------------------------

STATS_NOTE = ("ExecuTorch's TextLLMRunner keeps its stats in whole milliseconds "
              "(extension/llm/runner/stats.h: ms timestamps): a phase under 1 ms reads 0 ms "
              "and has no rate (—), and a phase of a few ms is off by up to 1 ms (a 2 ms decode "
              "reads 1 to 3 ms: half to 1.5 times its rate); our clock (ns) times the same "
              "executes, the native runner's its own")
STATS_COLUMNS = ("benchmark", "scheme", "tests", "figures from", "prefill ms", "prefill tok/s",
                 "decode ms", "decode tok/s", "TTFT ms")


def _stats_row(model: str, dtype: str, tests: str, source: str, report: dict) -> dict:
    return {"benchmark": model, "scheme": dtype, "tests": tests, "source": source,
            "prefill_ms": report.get("prefill_ms"),
            "prefill_tokens_per_s": report.get("prefill_tokens_per_s"),
            "decode_ms": report.get("decode_ms"),
            "decode_tokens_per_s": report.get("decode_tokens_per_s"),
            "ttft_ms": report.get("ttft_ms")}


def _clock_row(model: str, dtype: str, tests: str, source: str, g) -> dict:
    return {"benchmark": model, "scheme": dtype, "tests": tests, "source": source,
            "prefill_ms": g.prefill.median_ms, "prefill_tokens_per_s": g.prefill.tokens_per_s,
            "decode_ms": g.decode.median_ms, "decode_tokens_per_s": g.decode.tokens_per_s,
            "ttft_ms": g.ttft_ms}


def runner_stats_rows(blocks: Iterable[BlockResult]) -> list[dict]:
    """Per benchmark that ExecuTorch's TextLLMRunner ran: its own stats (whole ms), our clock
    around its executes, and the native runner's clock on the same program, device, threads
    and token counts where the session has it. Medians over the timed generations."""
    groups: dict[tuple, dict[str, list[BlockResult]]] = {}
    for b in generation_blocks(blocks):
        g = b.generation
        key = (b.device.label, b.model, b.dtype, b.threads, g.prompt_tokens, g.new_tokens,
               g.depth)
        groups.setdefault(key, {}).setdefault(b.runner_name, []).append(b)
    out = []
    for (device, model, dtype, threads, *_), sides in groups.items():
        for runner, bs in sides.items():
            reports = [b.generation.runner_report for b in bs if b.generation.runner_report
                       and b.generation.runner_report.get("runner") == "text_llm_runner"]
            if not reports:
                continue
            g = pool_generation(bs)
            name = f"{model} t{threads} on {device}"
            out.append(_stats_row(name, dtype, g.tests, f"{runner}: its own stats (whole ms)",
                                  reports[0]))
            out.append(_clock_row(name, dtype, g.tests, f"{runner}: our clock around its "
                                  "executes", g))
            native = [b for r, nbs in sides.items() for b in nbs
                      if b.runner.kind == "native" and r != runner]
            if native:
                out.append(_clock_row(name, dtype, g.tests, f"{native[0].runner_name}: its "
                                      "clock around each execute", pool_generation(native)))
    return out


def runner_stats_lines(blocks: Iterable[BlockResult]) -> list[str]:
    """The terminal's table of :func:`runner_stats_rows`, and what whole ms do to it."""
    rows = runner_stats_rows(blocks)
    if not rows:
        return []
    table = [STATS_COLUMNS] + [
        (r["benchmark"], r["scheme"], r["tests"], r["source"], fmt_ms(r["prefill_ms"]),
         fmt_tokens_per_s(r["prefill_tokens_per_s"]), fmt_ms(r["decode_ms"]),
         fmt_tokens_per_s(r["decode_tokens_per_s"]), fmt_ms(r["ttft_ms"])) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(STATS_COLUMNS))]

    def fmt(row) -> str:
        return "  ".join(str(c).rjust(w) if i >= 4 else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return (["", "ExecuTorch's own LLM runner (TextLLMRunner), by its stats and by our clock",
             fmt(table[0]), "  ".join("-" * w for w in widths)]
            + [fmt(r) for r in table[1:]] + [STATS_NOTE])


# -- the two attention forms of one model ----------------------------------------------------

def attention_lines(blocks: Iterable[BlockResult]) -> list[str]:
    """One line when the session measured a model in both attention forms (``tiny_llama`` and
    ``tiny_llama_plain``; ``executorch:llama?...`` with and without ``attention=plain``): the
    weights are the same, so the difference between their rows is the attention."""
    pairs = pairs_of_forms({b.model for b in generation_blocks(blocks)})
    return [ATTENTION_NOTE.format(custom=custom, plain=plain) for custom, plain in pairs]


# -- thread scaling --------------------------------------------------------------------------

SCALING_INTRO = ("Each LLM benchmark measured at two or more `--sme2-threads` counts: per "
                 "phase, tokens/s (median over blocks), the speed-up over the smallest count "
                 "(1 thread when measured) and the parallel efficiency (speed-up / thread "
                 f"ratio). Where scaling stops: {STOP_RULE}.")


def _scaling_rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def _scaling_rows(s: ScalingSeries) -> list[tuple[str, ...]]:
    """threads, CPUs, then per phase: tok/s, speed-up, efficiency."""
    counts = sorted({p.threads for ph in s.phases for p in ph.points})
    rows = []
    for t in counts:
        cells: list[str] = [str(t)]
        cpus = next((p.cpus for ph in s.phases for p in ph.points if p.threads == t), "")
        cells.append(cpus or "any")
        for name in PHASES:
            ph = next((x for x in s.phases if x.phase == name), None)
            p = next((q for q in ph.points if q.threads == t), None) if ph else None
            cells += ([_scaling_rate(p.tokens_per_s), f"{p.speedup:.2f}x",
                       f"{p.efficiency:.0%}"] if p is not None else ["-", "-", "-"])
        rows.append(tuple(cells))
    return rows


SCALING_HEADER = ("threads", "CPUs", "prefill tok/s", "speed-up", "efficiency",
                  "decode tok/s", "speed-up", "efficiency")


def _scaling_findings(s: ScalingSeries) -> list[str]:
    lines = [f"{ph.phase}: {ph.summary}" for ph in s.phases]
    note = shared_unit_note(s)
    return lines + ([note] if note else [])


def scaling_markdown_lines(series: Sequence[ScalingSeries]) -> list[str]:
    """report.md's Thread scaling section; nothing when no benchmark has two counts."""
    if not series:
        return []
    out = ["## Thread scaling", "", SCALING_INTRO, ""]
    for s in series:
        out += [f"### {s.title}", "",
                "| " + " | ".join(SCALING_HEADER) + " |",
                "|" + "|".join("---:" if i != 1 else "---"
                               for i in range(len(SCALING_HEADER))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in _scaling_rows(s)]
        out += [""] + [f"- {line}" for line in _scaling_findings(s)] + [""]
    return out


def scaling_terminal_lines(series: Sequence[ScalingSeries]) -> list[str]:
    """The terminal's thread scaling tables, under the generation table."""
    if not series:
        return []
    out = ["", "thread scaling (LLMs: tokens/s per phase, speed-up over the smallest count, "
               f"efficiency; stops: gain < {MIN_SHARE_OF_IDEAL:.0%} of ideal or within noise)"]
    for s in series:
        table = [SCALING_HEADER, *_scaling_rows(s)]
        widths = [max(len(r[i]) for r in table) for i in range(len(SCALING_HEADER))]
        fmt = ("  ".join(c.ljust(w) if i == 1 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in table)
        out += [s.title, *fmt] + [f"  {line}" for line in _scaling_findings(s)]
    return out
