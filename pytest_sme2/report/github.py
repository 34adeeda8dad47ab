"""A compact markdown summary for GitHub Actions: when ``GITHUB_STEP_SUMMARY`` names a file,
the session appends the summary table, the regressions and the SME2 speed-ups to it, and
where report.md and its charts are (paths, no links: the job's files are not served)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_sme2 import units
from pytest_sme2.units import COMPACT_RATIO_DIGITS, COUNT_RATIO_DIGITS
from pytest_sme2.report.columns import GITHUB, LATENCY, shown
from pytest_sme2.report.grouping import Side
from pytest_sme2.report.terminal import (GENERATION_COLUMNS, GENERATION_NUMERIC, baseline_cell,
                                         generation_row)
from pytest_sme2.report.unresolved_notes import unresolved_lines
from pytest_sme2.report.view import Source, view_of
from pytest_sme2.results import Judgement

ENV = "GITHUB_STEP_SUMMARY"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _baseline(side: Side) -> Judgement | None:
    if side.comparison is not None:
        return (side.comparison.baselines or {}).get(side.runner) or None
    return side.first.judgement


def _regressions(side: Side) -> list[str]:
    out = []
    j = _baseline(side)
    what = f"`{side.test}` {side.runner}"
    if j and j.status == "regression":
        out.append(f"{what}: end to end {baseline_cell(j)}")
    for cat, cj in (side.first.category_judgements or {}).items():
        if cj.status == "regression":
            out.append(f"{what}: {cat} {baseline_cell(cj)}")
    for phase, pj in (side.first.phase_judgements or {}).items():    # an LLM's prefill, TTFT
        if pj.status == "regression":
            out.append(f"{what}: {phase} {baseline_cell(pj)}")
    ij = side.first.instructions_judgement
    if ij and ij.status == "regression" and ij.ratio:
        out.append(f"{what}: instructions per execute "
                   f"{units.ratio(ij.ratio.point, COUNT_RATIO_DIGITS)}")
    return out


def step_summary(source: Source, report_dir: Path | None = None,
                 files: Iterable[Path] = ()) -> str:
    """The markdown appended to the step summary."""
    view = view_of(source)
    results, comparisons, sides = view.results, view.comparisons, view.sides
    latency = shown(LATENCY, GITHUB)
    lines = ["## pytest-sme2"]
    regressions = [line for s in sides for line in _regressions(s)]
    forward = view.forward_sides     # an LLM's row is the generation table's, its phases
    if forward:
        lines += ["", "| benchmark | runner | " + "".join(f"{f.title(GITHUB)} | " for f in latency)
                  + "SME2 | vs baseline |",
                  "|---|---|" + "---:|" * len(latency) + "---|---|"]
    for s in forward:
        ev = s.first.kernel_evidence
        lines.append(f"| {_cell(s.test)} | {_cell(s.runner)} | "
                     + "".join(f"{f.cell(s.latency)} | " for f in latency)
                     + f"{ev.sme2 if ev else '-'} | {_cell(baseline_cell(_baseline(s)))} |")
    llm = [generation_row(s.test, s) for s in view.generation_sides]
    if llm:
        lines += ["", "**LLM generations** (prefill + decode):", "",
                  "| " + " | ".join(GENERATION_COLUMNS) + " |",
                  "|" + "|".join("---:" if i in GENERATION_NUMERIC else "---"
                                 for i in range(len(GENERATION_COLUMNS))) + "|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in llm]
    if any(r.emulated for r in results):
        lines += ["", "Emulated CPU (QEMU): its times and speed-ups say nothing about speed."]
    lines += ["", "**Regressions:** " + ("none" if not regressions else "")]
    lines += [f"- {r}" for r in regressions]
    for line in unresolved_lines(results, comparisons):    # never summed up as "none" or ok
        lines += ["", "**Cannot tell:** " + line.removeprefix("cannot tell: ")]
    speedups = []
    for base, cand in zip(sides, sides[1:]):
        c = cand.comparison
        if c is None or base.comparison is not c or cand.role != "candidate" or \
                not base.sme2_pair(cand):
            continue
        s = c.speedup
        mark = " *(emulated: says nothing about speed)*" if c.emulated else ""
        speedups.append(f"- `{c.name}` {c.point}: {c.candidate} vs {c.base} "
                        f"{units.ratio_interval(s, COMPACT_RATIO_DIGITS)} (95% CI), "
                        f"{c.verdict}{mark}")
    lines += ["", "**SME2 speed-ups:** " + ("none measured" if not speedups else "")]
    lines += speedups
    if report_dir is not None:
        report_dir = Path(report_dir)
        lines += ["", f"Report: `{report_dir / 'report.md'}`, charts in "
                      f"`{report_dir / 'charts'}`, a page per benchmark in "
                      f"`{report_dir / 'details'}`"]
    for f in files:
        lines.append(f"Also written: `{f}`")
    return "\n".join(lines) + "\n"


def append_step_summary(source: Source, report_dir: Path | None = None,
                        files: Iterable[Path] = (), env: Mapping[str, str] | None = None
                        ) -> Path | None:
    """Append :func:`step_summary` to the file ``GITHUB_STEP_SUMMARY`` names; None (nothing
    written) when it is not set."""
    target = (os.environ if env is None else env).get(ENV)
    if not target:
        return None
    path = Path(target)
    text = step_summary(source, report_dir, files)
    with path.open("a", encoding="utf-8") as fh:
        if path.stat().st_size:
            fh.write("\n")
        fh.write(text)
    return path
