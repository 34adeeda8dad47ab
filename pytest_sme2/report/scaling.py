"""The thread scaling section (issue 38): one table per LLM benchmark measured at two or more
thread counts, per phase tokens/s, speed-up over the base count and parallel efficiency, then
where each phase's scaling stops and what the SME2 unit has to do with it. The figures are
:func:`pytest_sme2.analysis.scaling.thread_scaling`'s; this module only lays them out, for
report.md (:func:`markdown_lines`) and the terminal (:func:`terminal_lines`)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sme2.analysis.scaling import (MIN_SHARE_OF_IDEAL, STOP_RULE, ScalingSeries,
                                          shared_unit_note)
from pytest_sme2.results.generation import PHASES

INTRO = ("Each LLM benchmark measured at two or more `--sme2-threads` counts: per phase, "
         "tokens/s (median over blocks), the speed-up over the smallest count (1 thread when "
         "measured) and the parallel efficiency (speed-up / thread ratio). "
         f"Where scaling stops: {STOP_RULE}.")


def _rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def _rows(s: ScalingSeries) -> list[tuple[str, ...]]:
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
            cells += ([_rate(p.tokens_per_s), f"{p.speedup:.2f}x", f"{p.efficiency:.0%}"]
                      if p is not None else ["-", "-", "-"])
        rows.append(tuple(cells))
    return rows


HEADER = ("threads", "CPUs", "prefill tok/s", "speed-up", "efficiency", "decode tok/s",
          "speed-up", "efficiency")


def _findings(s: ScalingSeries) -> list[str]:
    lines = [f"{ph.phase}: {ph.summary}" for ph in s.phases]
    note = shared_unit_note(s)
    return lines + ([note] if note else [])


def markdown_lines(series: Sequence[ScalingSeries]) -> list[str]:
    """report.md's Thread scaling section; nothing when no benchmark has two counts."""
    if not series:
        return []
    out = ["## Thread scaling", "", INTRO, ""]
    for s in series:
        out += [f"### {s.title}", "",
                "| " + " | ".join(HEADER) + " |",
                "|" + "|".join("---:" if i != 1 else "---" for i in range(len(HEADER))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in _rows(s)]
        out += [""] + [f"- {line}" for line in _findings(s)] + [""]
    return out


def terminal_lines(series: Sequence[ScalingSeries]) -> list[str]:
    """The terminal's thread scaling tables, under the generation table."""
    if not series:
        return []
    out = ["", "thread scaling (LLMs: tokens/s per phase, speed-up over the smallest count, "
               f"efficiency; stops: gain < {MIN_SHARE_OF_IDEAL:.0%} of ideal or within noise)"]
    for s in series:
        table = [HEADER, *_rows(s)]
        widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
        fmt = ("  ".join(c.ljust(w) if i == 1 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in table)
        out += [s.title, *fmt] + [f"  {line}" for line in _findings(s)]
    return out
