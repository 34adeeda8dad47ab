"""``report.md``: what a results document says, for a performance engineer, at a glance.

The first screen answers what got faster, what got slower and where the time goes: one
overview figure of the whole matrix (every model x dtype x threads x runner, comparisons'
speed-ups on it), then one category figure per model. Sections are named and ordered as the
seed kit's reports: Summary, Metadata (the device the benchmarks ran on, from the document —
never the machine rendering the report), Latency Comparison, Speedup, Regressions, Operator
Category Breakdown, Acceleration Analysis, Bottleneck Identification, Portable vs Delegated
Operator Analysis, Kernel Evidence and Actionable Recommendations; each left out when the
document has nothing for it. Per-benchmark sections hold one row per benchmark and runner,
linked to the benchmark's own page (``details/<slug>.md``) where its full tables are: a default
session's report stays a few screens long however large the matrix. Every latency figure of a
runner is its blocks pooled by :func:`pytest_sme2.results.pool`.

Python prepares rows of plain values (:func:`context`, :func:`detail_context`);
``templates/report.md.j2`` and ``templates/benchmark.md.j2`` lay them out, sharing the tables
of ``templates/_blocks.md.j2``. The rows come from :mod:`.sections`, the number formats (the
templates' filters) from :mod:`.cells`.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, partial
from pathlib import Path
from typing import Any

import jinja2

from pytest_sme2.report.markdown import sections as sec, unit_page as up, charts as charts_mod
from pytest_sme2.report import generation as gen
from pytest_sme2.analysis.scaling import thread_scaling
from pytest_sme2.report.cells import (cell, code, e2e_cells, fmt_calls, fmt_interval,
                                               fmt_mb, fmt_ms, fmt_percent, fmt_points,
                                               fmt_ratio, fmt_tokens_per_s, ms_pct_cells,
                                               op_cells, th, tr)
from pytest_sme2.report.digest import SHARE_GROWTH_PP, Unit, by_model
from pytest_sme2.report import machine_notes
from pytest_sme2.report.precision_notes import precision_lines
from pytest_sme2.report.unresolved_notes import unresolved_lines
from pytest_sme2.report.recommend import recommendations
from pytest_sme2.report.markdown.sections import DETAIL_DIR, MODEL_CHART
from pytest_sme2.report.view import SessionView, Source, view_of
from pytest_sme2.results import atomic_write_text

REPORT_FILE = "report.md"
CHART_DIR = "charts"
TEMPLATE = "report.md.j2"
DETAIL_TEMPLATE = "benchmark.md.j2"
OVERVIEW = "overview"      # the overview figure's key in a ``charts`` mapping (and MODEL_CHART)
TOP_RECOMMENDATIONS = 10   # shown in full; the rest folded under <details>


def context(source: Source, charts: dict[str, str] | None = None,
            notes: list[str] | None = None) -> dict[str, Any]:
    """Everything report.md's template needs; ``charts`` maps :data:`OVERVIEW` and
    :data:`MODEL_CHART` + a model's name to image paths."""
    view = view_of(source)
    doc, us = view.doc, view.units
    charts = charts or {}
    paths = sec.detail_paths(us)
    unit_ctx = [up.unit_context(u, None) for u in us]
    regressions = sec.regression_rows(doc)
    operators = sec.operator_rows(us, unit_ctx, paths)
    return {
        "schema": doc.schema,
        "n_benchmarks": len(doc.benchmarks),
        "n_comparisons": len(doc.comparisons),
        "interrupted": up.interrupted_line(doc),
        "any_units": bool(us),
        "overview_chart": charts.get(OVERVIEW),
        "summary": [up.comparison_line(u) for u in us if u.comparison] + sec.gate_line(regressions)
        + gen.summary_lines(us) + gen.bandwidth_lines(doc.benchmarks)
        + gen.attention_lines(doc.benchmarks) + sec.where_time_goes(us),
        "device": sec.device_table(doc),
        "runners": sec.runner_rows(doc),
        "versions": sec.version_rows(doc),
        "configuration": sec.configuration_rows(doc, us),
        "latency": sec.latency_rows(us),
        "machine": machine_notes.report_lines(doc.benchmarks, doc.comparisons),
        "by_device": sec.by_device(doc),
        "speedups": up.speedup_rows(us),
        "startup": (startup := sec.startup_rows(us)),
        "startup_notes": sec.startup_notes(startup),
        "generation": gen.report_rows(us),
        "runner_stats": gen.runner_stats_rows(doc.benchmarks),
        "runner_stats_note": gen.STATS_NOTE,
        "scaling": gen.scaling_markdown_lines(thread_scaling(doc.benchmarks)),
        "models": sec.model_rows(us, paths, charts),
        "acceleration": sec.acceleration_rows(us, unit_ctx, paths),
        "operators": operators,
        "evidence": sec.evidence_rows(us, unit_ctx, paths),
        "evidence_intro": up.EVIDENCE_INTRO,
        "share_growth": f"{SHARE_GROWTH_PP:g}",
        "recommendations": recommendations(view),
        "emulated_cases": sum(u.emulated for u in us), "units_count": len(us),
        "top_recommendations": TOP_RECOMMENDATIONS,
        "regressions": regressions,
        "notes": up.output_notes(doc) + up.emulated_notes(doc) + up.cooldown_notes(doc)
        + up.etrecord_notes(doc)
        + precision_lines(doc.benchmarks) + unresolved_lines(doc.benchmarks, doc.comparisons)
        + (notes or []),
    }


def detail_context(view: SessionView, u: Unit, charts: dict[str, str] | None = None
                   ) -> dict[str, Any]:
    """One unit's page: its rows of every section, full tables. Its chart is its model's
    figure, one folder up."""
    charts = charts or {}
    chart = charts.get(MODEL_CHART + u.model)
    device = u.sides[0].device if u.sides else None
    emulated = [up.EMULATED_NOTE.format(what=(device.model if device else "") or "QEMU")] \
        if u.emulated and u.sides else []
    return {"schema": view.doc.schema, "u": up.unit_context(u, None),
            "chart": f"../{chart}" if chart else None, "notes": emulated,
            "latency": sec.latency_rows([u]), "speedups": up.speedup_rows([u]),
            "startup": (startup := sec.startup_rows([u])),
            "startup_notes": sec.startup_notes(startup),
            "generation": gen.report_rows([u]),
            "evidence_intro": up.EVIDENCE_INTRO, "recommendations": recommendations(view, [u]),
            "emulated_cases": int(u.emulated)}


@cache
def environment() -> jinja2.Environment:
    """One per process: report.md and the pages share their compiled templates."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(ms=fmt_ms, mb=fmt_mb, percent=fmt_percent, ratio=fmt_ratio,
                       interval=fmt_interval, points=fmt_points, cell=cell, code=code,
                       calls=fmt_calls, toks=fmt_tokens_per_s, flatfmt=ms_pct_cells, opfmt=op_cells,
                       e2efmt=e2e_cells, faster=sec.speedup_list, grew=sec.grew_list,
                       pctcol=lambda c: f">{c} %")
    env.globals.update(tr=tr, th=th, latency_headers=sec.LATENCY_HEADERS)
    return env


def _tidy(text: str) -> str:
    """Sections are separated by one blank line however the template's conditionals fell."""
    lines, blank = [], False
    for line in text.splitlines():
        if not line.strip():
            if not blank and lines:
                lines.append("")
            blank = True
            continue
        lines.append(line.rstrip())
        blank = False
    return "\n".join(lines).rstrip() + "\n"


def render_markdown(source: Source, charts: dict[str, str] | None = None,
                    notes: list[str] | None = None) -> str:
    """report.md's text."""
    return _tidy(environment().get_template(TEMPLATE).render(**context(source, charts, notes)))


def render_details(source: Source, charts: dict[str, str] | None = None) -> dict[str, str]:
    """Each unit's page, by its path relative to the report folder (``details/<slug>.md``)."""
    view = view_of(source)
    template = environment().get_template(DETAIL_TEMPLATE)
    paths = sec.detail_paths(view.units)
    return {paths[id(u)]: _tidy(template.render(**detail_context(view, u, charts)))
            for u in view.units}


def render_report(source: Source, out_dir: Path, charts: bool = True) -> Path:
    """Write ``out_dir/report.md``, a page per benchmark in ``out_dir/details/`` and the
    figures in ``out_dir/charts/`` from the session's view or a results document
    (:func:`pytest_sme2.results.load_results` reads what it is given). Pages and figures of an
    earlier report in ``out_dir`` are removed first: none of them would match this one."""
    view = view_of(source)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for folder in (CHART_DIR, DETAIL_DIR):
        _clear(out_dir / folder, "*.png" if folder == CHART_DIR else "*.md")
    images: dict[str, str] = {}
    notes: list[str] = []
    with _collector_ignores_what_exists():
        if charts:
            images, notes = _charts(view.units, out_dir)
        for rel, text in render_details(view, images).items():
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out_dir / rel, text)
        path = out_dir / REPORT_FILE
        atomic_write_text(path, render_markdown(view, images, notes))
    return path


def _clear(folder: Path, pattern: str) -> None:
    if folder.is_dir():
        for f in folder.glob(pattern):
            f.unlink()


@contextmanager
def _collector_ignores_what_exists() -> Iterator[None]:
    """matplotlib makes many objects, so the garbage collector runs often while charts are
    drawn, each full run walking every object the session holds (pandas, results): ~15% of
    the report's time. Objects that exist now are left out of those walks, and put back after.
    A caller that froze objects itself (a benchmark session, which ends with its report) has
    the objects made since frozen too, and keeps them so: unfreezing is all or nothing."""
    if gc.get_freeze_count():
        gc.freeze()
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _charts(us: list[Unit], out_dir: Path) -> tuple[dict[str, str], list[str]]:
    """The overview and one category figure per model: 1 + models figures, whatever the size
    of the matrix (each figure costs ~0.2-1 s of matplotlib)."""

    images: dict[str, str] = {}
    jobs = []
    if any(s.latency for u in us for s in u.sides):
        images[OVERVIEW] = f"{CHART_DIR}/{OVERVIEW}.png"
        jobs.append(partial(charts_mod.overview_chart, us, out_dir / images[OVERVIEW]))
    for model, mu in by_model(us).items():
        if any(s.categories_ms for u in mu for s in u.sides):
            rel = f"{CHART_DIR}/categories-{_file_safe(model)}.png"
            images[MODEL_CHART + model] = rel
            jobs.append(partial(charts_mod.model_chart, model, mu, out_dir / rel))
    try:
        if jobs:
            import matplotlib.figure  # matplotlib: once, before render_all shares it  # noqa: F401
        charts_mod.render_all(jobs)
    except ImportError as e:
        return {}, [f"Charts left out: {e.name or 'matplotlib'} is not installed "
                    "(pip install matplotlib)."]
    return images, []


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
