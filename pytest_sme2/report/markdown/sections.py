"""The rows of report.md's sections and of a benchmark's page, as plain values for the
templates: the device and configuration tables, latency, speed-ups, load and memory, operator
categories, bottlenecks, portable operators, kernel evidence, regressions and the notes. Each
function reads units (:mod:`pytest_sme2.report.digest`) or the document and returns rows; the
number formats are :mod:`pytest_sme2.report.cells`'."""

from __future__ import annotations

from typing import Any

from pytest_sme2 import units
from pytest_sme2.units import COMPACT_RATIO_DIGITS
from pytest_sme2.report.columns import LATENCY, MARKDOWN, MS, shown
from pytest_sme2.report.cells import (MISSING, cell, code, fmt_ms, fmt_percent,
                                               fmt_points, fmt_ratio_interval, value_text)
from pytest_sme2.report.digest import (Unit, by_model, category_order,
                                       devices, devices_side_by_side, runners)
from pytest_sme2.results import Judgement, ResultsDoc, device_label, pool_startup
from pytest_sme2.results.device import sme_class

DETAIL_DIR = "details"     # one page per unit, linked from report.md
MODEL_CHART = "model:"     # a model's category figure's key in a ``charts`` mapping
LARGEST_OPERATORS = 3      # per benchmark and runner in report.md's Bottleneck Identification

DEVICE_FIELDS = (("spec", "--device"), ("kind", "kind"), ("model", "model"), ("serial", "serial"),
                 ("cpu", "CPU / SoC"),
                 ("abi", "ABI"), ("os", "OS"), ("kernel", "kernel"), ("cores", "cores"),
                 ("sme", "SME (hwcaps)"), ("sme2", "SME2 (hwcaps)"),
                 ("executorch", "ExecuTorch"))



def device_table(doc: ResultsDoc) -> dict[str, Any] | None:
    devs = devices(doc)
    if not devs:
        return None
    rows = [(label, [value_text(d.get(key)) for d in devs]) for key, label in DEVICE_FIELDS
            if any(key in d for d in devs)]
    if any("sme2" in d for d in devs):      # the class the two flags make: SME (no SME2), ...
        at = next(i for i, (label, _) in enumerate(rows) if label == "SME2 (hwcaps)") + 1
        rows.insert(at, ("SME class", [sme_class(d.get("sme"), d.get("sme2")) for d in devs]))
    extra_keys = list(dict.fromkeys(k for d in devs for k in (d.get("extra") or {})))
    rows += [(k, [value_text((d.get("extra") or {}).get(k)) if k in (d.get("extra") or {}) else "—"
                  for d in devs]) for k in extra_keys]
    return {"headers": [device_label(d) for d in devs] if len(devs) > 1 else ["device"],
            "rows": rows}


def version_rows(doc: ResultsDoc) -> list[tuple[str, str]]:
    session = doc.session
    out: dict[str, str] = {}
    for d in devices(doc):
        if d.get("executorch"):
            out.setdefault("executorch (device)", str(d["executorch"]))
    for r in runners(doc):
        v = (r.get("labels") or {}).get("executorch")
        if v:
            out.setdefault(f"executorch ({r['name']} runner)", str(v))
    versions = session.versions
    if isinstance(versions, dict):
        out.update({str(k): value_text(v) for k, v in versions.items()})
    elif versions:
        out["session versions"] = value_text(versions)
    if not any(k.startswith("torch") for k in out):
        out["torch"] = "not recorded"
    return list(out.items())


def configuration_rows(doc: ResultsDoc, us: list[Unit]) -> list[tuple[str, str]]:
    bms = doc.benchmarks
    conf = doc.session.config or {}
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
        out.append(("session configuration", value_text(conf)))
    return out


def runner_rows(doc: ResultsDoc) -> list[dict[str, str]]:
    return [{"name": r["name"], "kind": r.get("kind", "?"),
             "labels": ", ".join(f"{k}={v}" for k, v in sorted((r.get("labels") or {}).items()))
             or "—", "path": r.get("path") or "—", "unused": bool(r.get("unused"))}
            for r in runners(doc)]


# The latency table's figures (report.columns), headed without their ms: the section says it.
LATENCY_FIGURES = shown(LATENCY, MARKDOWN)
LATENCY_HEADERS = [">" + f.title(MARKDOWN, MS) for f in LATENCY_FIGURES]


def latency_rows(us: list[Unit]) -> list[dict[str, Any]]:
    rows = []
    for u in us:
        for i, s in enumerate(u.sides):
            if not s.latency:
                continue
            p = s.latency
            role = ""
            if u.comparison:
                role = "base" if i == 0 else fmt_ratio_interval(u.speedup)
            rows.append({"model": u.model, "dtype": u.dtype, "threads": u.threads,
                         "device": u.device,
                         "runner": s.runner,
                         "figures": [f.cell(p, MISSING) for f in LATENCY_FIGURES],
                         "speedup": role})
    return rows


def startup_rows(us: list[Unit]) -> list[dict[str, Any]]:
    """Load and Memory: one row per runner of each point, a comparison's sides next to each
    other, the candidate's load and peak memory as a ratio to the base's."""
    rows = []
    for u in us:
        base = None
        for i, side in enumerate(u.sides):
            st = pool_startup(side.blocks)
            if st is None:
                continue
            rel = ""
            if u.comparison and i == 0:
                base, rel = st, "base"
            elif u.comparison and base is not None:
                rel = ", ".join(
                    f"{what} {units.ratio(new / old, COMPACT_RATIO_DIGITS)}"
                    for what, new, old in (("load", st.load_ms, base.load_ms),
                                           ("peak", st.peak_rss_kb, base.peak_rss_kb))
                    if new is not None and old)
            rows.append({"point": u.point, "runner": side.runner,
                         "pte_mb": None if st.pte_bytes is None else st.pte_bytes / 2 ** 20,
                         "ptd_mb": None if st.ptd_bytes is None else st.ptd_bytes / 2 ** 20,
                         "loads": st.loads, "load": st.load_ms, "method_load": st.method_load_ms,
                         "first": st.first_inference_ms,
                         "steady": side.latency.median_ms if side.latency else None,
                         "peak_mb": None if st.peak_rss_kb is None else st.peak_rss_kb / 1024,
                         "load_mb": None if st.load_rss_kb is None else st.load_rss_kb / 1024,
                         "vs_base": rel, "load_source": st.load_source,
                         "memory_source": st.memory_source, "problem": st.problem,
                         "emulated": any(b.emulated for b in side.blocks)})
    return rows


def startup_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Where load and memory figures come from, once per source, naming its runners."""
    notes = []
    for what, key in (("Load time", "load_source"), ("Memory", "memory_source")):
        by_source: dict[str, list[str]] = {}
        for r in rows:
            runners = by_source.setdefault(r[key], [])
            if r["runner"] not in runners:
                runners.append(r["runner"])
        notes += [f"{what} ({', '.join(rs)}): {src}." for src, rs in by_source.items() if src]
    notes += [f"{r['point']} {r['runner']}: fewer cold loads than asked, {r['problem']}."
              for r in rows if r.get("problem")]
    emulated = list(dict.fromkeys(r["runner"] for r in rows if r["emulated"]))
    if emulated:
        notes.append(f"Emulated CPU ({', '.join(emulated)}): load and first-inference times "
                     "say nothing about a real device's, and memory is the emulator's process "
                     "(the guest's and QEMU's own, its translated code included).")
    return notes


def by_device(doc: ResultsDoc) -> dict[str, Any] | None:
    """Latency of each point on each device, one column per device (several devices only)."""
    labels, rows = devices_side_by_side(doc)
    if len(labels) < 2:
        return None
    return {"headers": [f">{label}" for label in labels],
            "rows": [{"model": r.model, "dtype": r.dtype,
                      "threads": f"{r.threads} @ d{r.depth}" if r.depth else r.threads,
                      "runner": r.runner,
                      "cells": [f"{fmt_ms(p.median_ms)} ({fmt_percent(p.cv_pct)})" if p else "—"
                                for p in r.latency.values()]}
                     for r in rows]}


# -- report.md's one-row-per-benchmark sections ---------------------------------------------

def detail_paths(us: list[Unit]) -> dict[int, str]:
    """Each unit's page, relative to the report folder, by ``id(unit)``; unique even when two
    units share a slug (two comparisons of one pair on one point)."""
    out: dict[int, str] = {}
    seen: set[str] = set()
    for u in us:
        slug, n = u.slug, 2
        while slug in seen:
            slug, n = f"{u.slug}-{n}", n + 1
        seen.add(slug)
        out[id(u)] = f"{DETAIL_DIR}/{slug}.md"
    return out


def _link(u: Unit, paths: dict[int, str]) -> str:
    return f"[{cell(u.point)}]({paths[id(u)]})"


def _runner_cell(u: Unit, i: int) -> str:
    role = ("base", "candidate")[min(i, 1)] if u.comparison else ""
    return cell(u.sides[i].runner) + (f" ({role})" if role else "")


def speedup_list(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['category']} {fmt_ratio_interval(r['sp'])}" for r in rows)


def grew_list(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['category']} {fmt_percent(r['base_share'])}% → "
                     f"{fmt_percent(r['cand_share'])}% ({fmt_points(r['delta'])})" for r in rows)


def model_rows(us: list[Unit], paths: dict[int, str], charts: dict[str, str]) -> list[dict]:
    """Per model: its category figure and a row per side (% of E2E per category)."""
    out = []
    for model, mu in by_model(us).items():
        sides = [(u, i, s) for u in mu for i, s in enumerate(u.sides) if s.categories_ms]
        if not sides:
            continue
        cats = category_order(c for _, _, s in sides for c in s.categories_ms)
        present = [c for c in cats if any(abs(s.categories_ms.get(c, 0.0)) > 0
                                          for _, _, s in sides)]
        rows = [{"link": _link(u, paths), "runner": _runner_cell(u, i), "e2e": s.breakdown_ms,
                 "shares": [s.share(c) for c in present]} for u, i, s in sides]
        tracing = [{"link": _link(u, paths), "runner": _runner_cell(u, i), "line": s.tracing}
                   for u, i, s in sides if s.tracing]
        out.append({"model": model, "chart": charts.get(MODEL_CHART + model),
                    "columns": present, "rows": rows, "tracing": tracing,
                    "absent": [c for c in cats if c not in present]})
    return out


def acceleration_rows(us: list[Unit], ctx: list[dict], paths: dict[int, str]) -> list[dict]:
    return [{**c["acceleration"], "link": _link(u, paths), "point": u.point}
            for u, c in zip(us, ctx) if c["acceleration"]]


def operator_rows(us: list[Unit], ctx: list[dict], paths: dict[int, str]) -> list[dict]:
    """A row per side with operators: its bottlenecks, and delegated vs portable time."""
    rows = []
    for u, c in zip(us, ctx):
        p = c["portable"]
        if not p:
            continue
        for i, (s, summary) in enumerate(zip(u.sides, p["summary"])):
            if not s.operators:
                continue
            hot = [o for o in s.operators if o.bottleneck]
            hot.sort(key=lambda o: -o.mean_ms_per_run)
            should = list(dict.fromkeys(o.name for o in s.operators if o.should_delegate))
            rows.append({**summary, "link": _link(u, paths), "runner": _runner_cell(u, i),
                         "n_bottlenecks": len(hot),
                         "largest": ", ".join(f"{code(o.name)} {fmt_percent(o.pct_e2e)}%"
                                              for o in hot[:LARGEST_OPERATORS]),
                         "should_delegate": ", ".join(code(n) for n in should)})
    return rows


def evidence_rows(us: list[Unit], ctx: list[dict], paths: dict[int, str]) -> list[dict]:
    """A row per runner and evidence: benchmarks whose evidence reads the same share a row
    (a host session's nineteen 'absent, none, no trace' are one line)."""
    rows: dict[tuple, dict] = {}
    for u, c in zip(us, ctx):
        for e in c["evidence"]:
            i = next(k for k, s in enumerate(u.sides) if s.runner == e["runner"])
            if e["traced"]:
                sme = sum(1 for k in e["executed"] if k.isa_family in ("SME", "SME2"))
                kernels = f"{len(e['executed'])} executed ({sme} SME/SME2), kernel trace"
            elif e["kernels"]:
                kernels = (f"{e['sme2_kernels']} of {len(e['kernels']) + e['more_kernels']} "
                           "in the XNNPACK log SME2")
            else:
                kernels = "no kernel trace"
            # Both levels where the SME one is known: "SME: proven (SME1 kernels: ...); SME2:
            # absent" on a device with SME but no SME2.
            verdict = e["levels"] if e["shows_sme_level"] else e["verdict"]
            row = {"runner": _runner_cell(u, i), "verdict": verdict,
                   "packed": ", ".join(code(op) for op in e["packed"]) or "none",
                   "kernels": kernels}
            key = tuple(row.values())
            rows.setdefault(key, {**row, "links": []})["links"].append(_link(u, paths))
    return [{**r, "links": ", ".join(r["links"])} for r in rows.values()]


def where_time_goes(us: list[Unit]) -> list[str]:
    """Per model, which category is the largest how often, and its share range."""
    lines = []
    for model, mu in by_model(us).items():
        tops: dict[str, list[float]] = {}
        for u in mu:
            for s in u.sides:
                if s.categories_ms and s.breakdown_ms > 0:
                    top = max(category_order(s.categories_ms), key=s.share)
                    tops.setdefault(top, []).append(s.share(top))
        if not tops:
            continue
        n = sum(len(v) for v in tops.values())
        parts = [f"**{c}** in {len(v)} of {n} ({units.share_range(v)} of E2E)"
                 for c, v in sorted(tops.items(), key=lambda kv: -len(kv[1]))]
        lines.append(f"Where the time goes in {model}: the largest category is "
                     + ", ".join(parts) + ".")
    return lines


def gate_line(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return []
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    worst = [f"{r['benchmark']} ({r['runner']})" for r in rows if r["status"] == "regression"]
    text = ", ".join(f"{n} {status}" for status, n in counts.items())
    return [f"Against the stored baselines: {text}" +
            (f" — **regressed**: {', '.join(worst)}" if worst else "") +
            " (see Regressions)."]


def regression_rows(doc: ResultsDoc) -> list[dict[str, str]]:
    """The gate's judgements recorded with benchmarks and comparisons (one row per judged
    benchmark; blocks of a comparison side share one judgement)."""
    rows = []

    def add(name: str, runner: str, j: Judgement | None) -> None:
        if not j or (j.status == "not_compared" and not j.foreign):
            return
        r = j.ratio
        rows.append({"benchmark": name, "runner": runner,
                     "status": "not compared (foreign baseline)" if j.foreign else j.word,
                     "ratio": units.ratio(r.point) if r else "-",
                     "ci": units.interval(r) if r else "-",
                     "reason": j.reason})

    for b in doc.benchmarks:
        if b.block is None:
            add(b.name, b.runner_name, b.judgement)
            for category, j in (b.category_judgements or {}).items():
                add(f"{b.name} ({category})", b.runner_name, j)
            add(f"{b.name} (instructions)", b.runner_name, b.instructions_judgement)
            for what, j in (b.startup_judgements or {}).items():
                add(f"{b.name} ({what})", b.runner_name, j)
    for c in doc.comparisons:
        for runner, j in (c.baselines or {}).items():
            add(c.name, runner, j)
    return rows
