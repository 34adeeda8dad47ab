"""``report.md``: what a results document says, for a performance engineer.

Sections, each left out when the document has nothing for it, named and ordered as the seed
kit's reports: Summary, Metadata (the device the benchmarks ran on, from the document — never
the machine rendering the report), Latency Comparison, Speedup, Regressions, Operator Category
Breakdown (with a chart per unit), Acceleration Analysis, Bottleneck Identification, Portable vs
Delegated Operator Analysis, Kernel Evidence and Actionable Recommendations. Every latency figure
of a runner is its blocks pooled by :func:`pytest_sme2.results.pool`.

Python prepares rows of plain values (:func:`context`); ``templates/report.md.j2`` lays them
out; number formats live in the filters below (ms with 3 decimals, % with 1, speed-ups with 3).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import jinja2

from pytest_sme2.analysis.categories import CONVOLUTION, GEMM
from pytest_sme2.compare import FASTER, SLOWER
from pytest_sme2.report.digest import (SHARE_GROWTH_PP, Unit, devices, devices_side_by_side,
                                       finite, runners, units)
from pytest_sme2.report.recommend import recommendations
from pytest_sme2.results import (OutputCheck, ResultsDoc, atomic_write_text, device_label,
                                 load_results)

REPORT_FILE = "report.md"
CHART_DIR = "charts"
TEMPLATE = "report.md.j2"
TOP_KERNELS = 40
MAX_PATHS = 4              # module paths shown per operator in a table

# Exactly what each kernel-evidence verdict allows us to say, and no more.
VERDICT_WORDING = {
    "proven": "SME2 micro-kernels ran: a kernel trace names them.",
    "indicated": "KleidiAI packed operators ran on a device that reports SME2, so SME2 "
                 "micro-kernels are likely; no kernel trace shows which micro-kernels ran, so "
                 "this is an indication only.",
    "absent": "No SME2 micro-kernels ran.",
    "unknown": "The evidence does not show whether SME2 micro-kernels ran.",
    "mixed": "The blocks' evidence disagrees; no single verdict applies.",
}
DEVICE_FIELDS = (("spec", "--device"), ("kind", "kind"), ("model", "model"), ("serial", "serial"),
                 ("cpu", "CPU / SoC"),
                 ("abi", "ABI"), ("os", "OS"), ("kernel", "kernel"), ("cores", "cores"),
                 ("sme", "SME (hwcaps)"), ("sme2", "SME2 (hwcaps)"),
                 ("executorch", "ExecuTorch"))


# -- formatting ------------------------------------------------------------------------------

def fmt_ms(v: Any) -> str:
    return f"{v:.3f}" if finite(v) else "—"


def fmt_pct(v: Any) -> str:
    return f"{v:.1f}" if finite(v) else "—"


def fmt_x(iv: Any) -> str:
    return f"{iv.point:.3f}x" if iv is not None else "—"


def fmt_ci(iv: Any) -> str:
    if iv is None:
        return "—"
    return f"[{iv.low:.3f}, {iv.high:.3f}]"


def fmt_pp(v: Any) -> str:
    return f"{v:+.1f} pp" if finite(v) else "—"


def cell(v: Any) -> str:
    """Text safe in a markdown table cell: pipes escaped, no line breaks."""
    return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ") \
        .replace("\n", " ")


def code(v: Any) -> str:
    """A code span safe in a table cell (operator names: ``__`` must not turn bold)."""
    text = str(v).replace("\r", " ").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def fmt_calls(v: Any) -> str:
    return f"{v:g}" if finite(v) else "—"


def th(*columns: Any) -> str:
    """Header and separator lines; a column named ``>x`` is right-aligned (numbers). List
    arguments spread into several columns."""
    cols = _flat(columns)
    names = [c[1:] if c.startswith(">") else c for c in cols]
    seps = ["---:" if c.startswith(">") else "---" for c in cols]
    return tr(*[cell(n) for n in names]) + "\n" + tr(*seps)


def tr(*cells: Any) -> str:
    """One table row; list arguments spread into several cells. Cells arrive escaped."""
    return "| " + " | ".join(_flat(cells)) + " |"


def _flat(items) -> list[str]:
    out: list[str] = []
    for c in items:
        if isinstance(c, (list, tuple)):
            out.extend(str(x) for x in c)
        else:
            out.append(str(c))
    return out


def _ms_pct_cells(pairs) -> list[str]:
    return [x for ms, pct in pairs for x in (fmt_ms(ms), fmt_pct(pct))]


def _op_cells(ops) -> list[str]:
    return _ms_pct_cells((o.mean_ms_per_run, o.pct_e2e) if o else (None, None) for o in ops)


def _e2e_cells(totals) -> list[str]:
    return _ms_pct_cells((t, 100.0 if t else None) for t in totals)


def _value(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_value(x) for x in v)
    return str(v)


# -- sections --------------------------------------------------------------------------------

def _device_table(doc: ResultsDoc) -> dict[str, Any] | None:
    devs = devices(doc)
    if not devs:
        return None
    rows = [(label, [_value(d.get(key)) for d in devs]) for key, label in DEVICE_FIELDS
            if any(key in d for d in devs)]
    extra_keys = list(dict.fromkeys(k for d in devs for k in (d.get("extra") or {})))
    rows += [(k, [_value((d.get("extra") or {}).get(k)) if k in (d.get("extra") or {}) else "—"
                  for d in devs]) for k in extra_keys]
    return {"headers": [device_label(d) for d in devs] if len(devs) > 1 else ["device"],
            "rows": rows}


def _versions(doc: ResultsDoc) -> list[tuple[str, str]]:
    session = doc.session
    out: dict[str, str] = {}
    for d in devices(doc):
        if d.get("executorch"):
            out.setdefault("executorch (device)", str(d["executorch"]))
    for r in runners(doc):
        v = (r.get("labels") or {}).get("executorch")
        if v:
            out.setdefault(f"executorch ({r['name']} runner)", str(v))
    versions = session.get("versions")
    if isinstance(versions, dict):
        out.update({str(k): _value(v) for k, v in versions.items()})
    elif versions:
        out["session versions"] = _value(versions)
    if not any(k.startswith("torch") for k in out):
        out["torch"] = "not recorded"
    return list(out.items())


def _configuration(doc: ResultsDoc, us: list[Unit]) -> list[tuple[str, str]]:
    bms = doc.benchmarks
    conf = doc.session.get("config") or {}
    out = []
    measured = sorted({(b.runs, b.warmup) for b in bms}, key=str)
    if measured:
        out.append(("timed runs per benchmark", "; ".join(
            f"{r} (+{w} warm-up discarded)" for r, w in measured)))
    threads = sorted({b.threads for b in bms}, key=str)
    if threads:
        out.append(("threads", ", ".join(map(str, threads))))
    blocks = sorted({len(u.comparison.base_blocks) for u in us if u.comparison})
    if blocks:
        out.append(("interleaved blocks per side", ", ".join(map(str, blocks))))
    if conf:
        out.append(("session configuration", _value(conf)))
    return out


def _runner_rows(doc: ResultsDoc) -> list[dict[str, str]]:
    return [{"name": r["name"], "kind": r.get("kind", "?"),
             "labels": ", ".join(f"{k}={v}" for k, v in sorted((r.get("labels") or {}).items()))
             or "—", "path": r.get("path") or "—", "unused": bool(r.get("unused"))}
            for r in runners(doc)]


def _latency_rows(us: list[Unit]) -> list[dict[str, Any]]:
    rows = []
    for u in us:
        for i, s in enumerate(u.sides):
            if not s.latency:
                continue
            p = s.latency
            role = ""
            if u.comparison:
                role = "base" if i == 0 else f"{fmt_x(u.speedup)} {fmt_ci(u.speedup)}"
            rows.append({"model": u.model, "dtype": u.dtype, "threads": u.threads,
                         "device": u.device,
                         "runner": s.runner, "blocks": p.blocks, "n": p.n,
                         "median": p.median_ms, "mean": p.mean_ms, "min": p.min_ms,
                         "max": p.max_ms, "std": p.std_ms, "cv": p.cv_pct, "speedup": role})
    return rows


def _by_device(doc: ResultsDoc) -> dict[str, Any] | None:
    """Latency of each point on each device, one column per device (several devices only)."""
    labels, rows = devices_side_by_side(doc)
    if len(labels) < 2:
        return None
    return {"headers": [f">{label}" for label in labels],
            "rows": [{"model": r.model, "dtype": r.dtype, "threads": r.threads,
                      "runner": r.runner,
                      "cells": [f"{fmt_ms(p.median_ms)} ({fmt_pct(p.cv_pct)})" if p else "—"
                                for p in r.latency.values()]}
                     for r in rows]}


def _outputs_text(out: OutputCheck | None) -> str:
    if not out:
        return "not checked"
    fig = f"max abs diff {out.max_abs_diff:.3g}, tolerance {out.tolerance:.3g}"
    return f"equal ({fig})" if out.equal else f"**DIFFER** ({fig})"


def _speedup_rows(us: list[Unit]) -> list[dict[str, Any]]:
    """The medians are the sides' pooled ones, as in Latency Comparison; the recorded ones
    (the same pooling) where the document lacks the blocks."""
    rows = []
    for u in us:
        c = u.comparison
        if not c:
            continue
        base, cand = u.base.latency, u.candidate.latency
        rows.append({"point": u.point, "base": c.base, "candidate": c.candidate,
                     "base_ms": base.median_ms if base else c.base_median_ms,
                     "cand_ms": cand.median_ms if cand else c.candidate_median_ms,
                     "sp": c.speedup, "verdict": c.verdict, "blocks": len(c.base_blocks),
                     "outputs": _outputs_text(c.outputs)})
    return rows


def _category_table(u: Unit) -> dict[str, Any]:
    cats = u.categories()
    present = [c for c in cats if any(abs(s.categories_ms.get(c, 0.0)) > 0 for s in u.sides)]
    rows = [{"category": c, "values": [(s.categories_ms.get(c, 0.0), s.share(c))
                                       for s in u.sides]} for c in present]
    return {"rows": rows, "absent": [c for c in cats if c not in present],
            "totals": [s.e2e_mean_ms for s in u.sides]}


def _acceleration(u: Unit) -> dict[str, Any] | None:
    if not u.comparison or not u.base.blocks or not u.candidate.blocks:
        return None
    base, cand = u.base, u.candidate
    rows, faster, slower, grew = [], [], [], []
    largest = max(u.categories(), key=lambda c: cand.categories_ms.get(c, 0.0), default=None)
    for c in u.categories():
        b_ms, c_ms = base.categories_ms.get(c, 0.0), cand.categories_ms.get(c, 0.0)
        if not b_ms and not c_ms:
            continue
        iv = u.category_speedup(c)
        change = u.category_change(c)
        delta = cand.share(c) - base.share(c)
        row = {"category": c, "base_ms": b_ms, "cand_ms": c_ms, "sp": iv,
               "change": change or "—", "base_share": base.share(c),
               "cand_share": cand.share(c), "delta": delta,
               "grew": delta >= SHARE_GROWTH_PP}
        rows.append(row)
        if change == FASTER:
            faster.append(row)
        elif change == SLOWER:
            slower.append(row)
        if row["grew"]:
            grew.append({**row, "largest": c == largest})
    grew.sort(key=lambda r: -r["cand_share"])
    compute = [r for r in faster if r["category"] in (CONVOLUTION, GEMM)]
    return {"rows": rows, "faster": faster, "slower": slower, "grew": grew, "compute": compute,
            "base": base.runner, "candidate": cand.runner}


def _op_rows(u: Unit, keep) -> list[dict[str, Any]]:
    """Operators of all sides, joined on (name, instruction), for those ``keep`` accepts on
    any side; sorted by the last side's time (the candidate's, in a comparison)."""
    keys: dict[tuple, dict[str, Any]] = {}
    for i, s in enumerate(u.sides):
        for op in s.operators:
            key = (op.name, op.instruction_id)
            row = keys.setdefault(key, {"op": op, "sides": [None] * len(u.sides),
                                        "keep": False})
            row["sides"][i] = op
            row["keep"] = row["keep"] or keep(op)
    rows = [r for r in keys.values() if r["keep"]]

    def weight(r):
        return tuple(-(r["sides"][i].mean_ms_per_run if r["sides"][i] else 0.0)
                     for i in reversed(range(len(u.sides))))
    rows.sort(key=weight)
    for r in rows:
        ops = [o for o in r["sides"] if o]
        op = r["op"]
        r["calls"] = max(o.calls_per_run for o in ops)
        r["should_delegate"] = any(o.should_delegate for o in ops)
        r["where"] = "portable" if not op.delegated else op.backend or "delegate"
        # cells, escaped here: code spans keep "_" and "*" in op types and paths literal
        r["op_types"] = ", ".join(code(t) for t in op.op_types)
        paths = op.module_paths
        r["module_paths"] = ", ".join(code(p) for p in paths[:MAX_PATHS]) + (
            f" (+{len(paths) - MAX_PATHS} more)" if len(paths) > MAX_PATHS else "")
    return rows


def _portable(u: Unit) -> dict[str, Any] | None:
    if not any(s.operators for s in u.sides):
        return None
    summary = []
    for s in u.sides:
        deleg = sum(o.mean_ms_per_run for o in s.operators if o.delegated)
        port = sum(o.mean_ms_per_run for o in s.operators if not o.delegated)
        rest = s.e2e_mean_ms - deleg - port
        n_port = sum(1 for o in s.operators if not o.delegated)

        def pct(ms, s=s):
            return 100 * ms / s.e2e_mean_ms if s.e2e_mean_ms > 0 else None
        summary.append({"runner": s.runner, "deleg": deleg, "deleg_pct": pct(deleg),
                        "port": port, "port_pct": pct(port), "rest": rest, "rest_pct": pct(rest),
                        "n_port": n_port,
                        "n_deleg": sum(1 for o in s.operators if o.delegated)})
    rows = _op_rows(u, lambda o: not o.delegated)
    return {"summary": summary, "rows": rows,
            "any_types": any(r["op_types"] for r in rows),
            "any_paths": any(r["module_paths"] for r in rows)}


def _evidence(u: Unit) -> list[dict[str, Any]]:
    out = []
    for s in u.sides:
        ev = s.evidence
        if not ev:
            continue
        v = ev.sme2
        kernels = ev.kernels
        out.append({"runner": s.runner, "verdict": v,
                    "wording": VERDICT_WORDING.get(v, f"Verdict {v!r}: see the reason."),
                    "reason": ev.reason or "no reason recorded", "packed": ev.kleidiai_ops,
                    "kernels": kernels[:TOP_KERNELS], "more_kernels": max(0, len(kernels)
                                                                          - TOP_KERNELS),
                    "sme2_kernels": sum(1 for k in kernels if k.sme2),
                    "traced": ev.traced, "executed": ev.executed_kernels,
                    "made_by": s.labels.get("made_by", "")})
    return out


EMULATED_NOTE = ("Measured on an emulated CPU ({what}): emulated timings say nothing about "
                 "speed, so no latency or speed-up here is an SME2 speed-up. Which kernels "
                 "executed and the outputs are real.")


def _emulated_notes(doc: ResultsDoc) -> list[str]:
    """One note per emulated device the results came from."""
    seen: dict[str, str] = {}
    for b in doc.benchmarks:
        if b.emulated:
            model = b.device.get("model")
            seen.setdefault(model or "emulated", model or "QEMU")
    return [EMULATED_NOTE.format(what=w) for w in seen.values()]


def _summary(u: Unit) -> str:
    if u.comparison:
        c = u.comparison
        text = (f"{u.point}: {c.candidate} vs {c.base} — speed-up {fmt_x(c.speedup)} "
                f"{fmt_ci(c.speedup)} ({c.verdict}); outputs {_outputs_text(c.outputs)}")
        ev = u.candidate.verdict if u.candidate else None
        return text + (f"; {c.candidate} kernel evidence: {ev}" if ev else "")
    parts = [f"{s.runner} median {fmt_ms(s.latency.median_ms if s.latency else None)} ms" +
             (f" (kernel evidence: {s.verdict})" if s.verdict else "")
             for s in u.sides]
    return f"{u.point}: " + ", ".join(parts)


def _unit_context(u: Unit, chart: str | None) -> dict[str, Any]:
    return {"unit": u, "title": u.title, "chart": chart, "runners": [s.runner for s in u.sides],
            "side_cols": [f">{s.runner} {unit}" for s in u.sides for unit in ("ms", "%")],
            "categories": _category_table(u), "acceleration": _acceleration(u),
            "bottlenecks": _op_rows(u, lambda o: o.bottleneck),
            "portable": _portable(u), "evidence": _evidence(u)}


def context(doc: ResultsDoc | dict[str, Any], charts: dict[str, str] | None = None,
            notes: list[str] | None = None) -> dict[str, Any]:
    """Everything the template needs; ``charts`` maps a unit's slug to its image path."""
    doc = load_results(doc)
    charts = charts or {}
    us = units(doc)
    unit_ctx = [_unit_context(u, charts.get(u.slug)) for u in us]
    return {
        "schema": doc.schema,
        "n_benchmarks": len(doc.benchmarks),
        "n_comparisons": len(doc.comparisons),
        "summary": [_summary(u) for u in us],
        "device": _device_table(doc),
        "runners": _runner_rows(doc),
        "versions": _versions(doc),
        "configuration": _configuration(doc, us),
        "latency": _latency_rows(us),
        "by_device": _by_device(doc),
        "speedups": _speedup_rows(us),
        "units": unit_ctx,
        # a section is left out when no unit has anything for it
        "has": {"categories": any(c["categories"]["rows"] for c in unit_ctx),
                "acceleration": any(c["acceleration"] for c in unit_ctx),
                "operators": any(c["portable"] for c in unit_ctx),
                "evidence": any(c["evidence"] for c in unit_ctx)},
        "recommendations": recommendations(doc, us),
        "regressions": _regression_rows(doc),
        "notes": _emulated_notes(doc) + (notes or []),
    }


def _regression_rows(doc: ResultsDoc) -> list[dict[str, str]]:
    """The gate's judgements recorded with benchmarks and comparisons (one row per judged
    benchmark; blocks of a comparison side share one judgement)."""
    rows = []

    def add(name: str, runner: str, j: dict[str, Any] | None) -> None:
        if not j or (j["status"] == "not_compared" and not j.get("foreign")):
            return
        r = j.get("ratio")
        rows.append({"benchmark": name, "runner": runner,
                     "status": "not compared (foreign baseline)" if j.get("foreign")
                     else j["status"],
                     "ratio": f"{r['point']:.3f}x" if r else "-",
                     "ci": f"[{r['low']:.3f}, {r['high']:.3f}]" if r else "-",
                     "reason": j["reason"]})

    for b in doc.benchmarks:
        if b.block is None:
            add(b.name, b.runner_name, b.baseline)
            for category, j in (b.baseline_categories or {}).items():
                add(f"{b.name} ({category})", b.runner_name, j)
            add(f"{b.name} (instructions)", b.runner_name, b.baseline_instructions)
    for c in doc.comparisons:
        for runner, j in (c.baselines or {}).items():
            add(c.name, runner, j)
    return rows


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(ms=fmt_ms, pct=fmt_pct, x=fmt_x, ci=fmt_ci, pp=fmt_pp, cell=cell,
                       code=code, calls=fmt_calls, flatfmt=_ms_pct_cells, opfmt=_op_cells,
                       e2efmt=_e2e_cells)
    env.globals.update(tr=tr, th=th)
    return env


def render_markdown(doc: ResultsDoc | dict[str, Any], charts: dict[str, str] | None = None,
                    notes: list[str] | None = None) -> str:
    text = environment().get_template(TEMPLATE).render(**context(doc, charts, notes))
    # Sections are separated by one blank line however the template's conditionals fell.
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


def render_report(doc: ResultsDoc | dict[str, Any], out_dir: Path, charts: bool = True) -> Path:
    """Write ``out_dir/report.md`` (and ``out_dir/charts/*.png``) from a results document
    (:func:`pytest_sme2.results.load_results` reads what it is given)."""
    doc = load_results(doc)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images: dict[str, str] = {}
    notes: list[str] = []
    with _collector_ignores_what_exists():
        if charts:
            images, notes = _charts(doc, out_dir)
        path = out_dir / REPORT_FILE
        atomic_write_text(path, render_markdown(doc, images, notes))
    return path


@contextmanager
def _collector_ignores_what_exists() -> Iterator[None]:
    """matplotlib makes many objects, so the garbage collector runs often while charts are
    drawn, each full run walking every object the session holds (pandas, results): ~15% of
    the report's time. Objects that exist now are left out of those walks, and put back after.
    A caller that froze objects itself keeps them as they are."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _charts(doc: ResultsDoc, out_dir: Path) -> tuple[dict[str, str], list[str]]:
    from pytest_sme2.report import charts as charts_mod

    images: dict[str, str] = {}
    jobs = []
    for u in units(doc):
        if not any(s.categories_ms for s in u.sides):
            continue
        rel = f"{CHART_DIR}/{u.slug}.png"
        jobs.append(partial(charts_mod.unit_chart, u, out_dir / rel))
        images[u.slug] = rel
    try:
        if jobs:
            import matplotlib.figure  # noqa: F401 - once, before render_all shares the work
        charts_mod.render_all(jobs)
    except ImportError as e:
        return {}, [f"Charts left out: {e.name or 'matplotlib'} is not installed "
                    "(pip install matplotlib)."]
    return images, []

