"""The rows of report.md's sections and of a benchmark's page, as plain values for the
templates: the device and configuration tables, latency, speed-ups, load and memory, operator
categories, bottlenecks, portable operators, kernel evidence, regressions and the notes. Each
function reads units (:mod:`pytest_sme2.report.digest`) or the document and returns rows; the
number formats are :mod:`pytest_sme2.report.cells`'."""

from __future__ import annotations

from typing import Any

from pytest_sme2.analysis.categories import CONVOLUTION, GEMM
from pytest_sme2.compare import FASTER, SLOWER
from pytest_sme2.report.cells import (cell, code, fmt_ci, fmt_ms, fmt_pct, fmt_pp, fmt_x,
                                      value_text)
from pytest_sme2.report.digest import (SHARE_GROWTH_PP, Unit, by_model, category_order,
                                       devices, devices_side_by_side, runners)
from pytest_sme2.results import OutputCheck, ResultsDoc, device_label, pool_startup

DETAIL_DIR = "details"     # one page per unit, linked from report.md
MODEL_CHART = "model:"     # a model's category figure's key in a ``charts`` mapping
TOP_KERNELS = 40
MAX_PATHS = 4              # module paths shown per operator in a table
LARGEST_OPERATORS = 3      # per benchmark and runner in report.md's Bottleneck Identification

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
EVIDENCE_INTRO = (
    "What the ETDump, the kernel traces and the device say about SME2, per runner. The verdict "
    "is the strongest claim the evidence supports: proven (a kernel trace names SME2 "
    "micro-kernels that ran), indicated (KleidiAI packed operators ran on a device that "
    "reports SME2, no trace), absent, or unknown. On an emulated CPU every run is traced: the "
    "micro-kernels listed as executed are the functions whose code QEMU translated to run.")
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
    versions = session.get("versions")
    if isinstance(versions, dict):
        out.update({str(k): value_text(v) for k, v in versions.items()})
    elif versions:
        out["session versions"] = value_text(versions)
    if not any(k.startswith("torch") for k in out):
        out["torch"] = "not recorded"
    return list(out.items())


def configuration_rows(doc: ResultsDoc, us: list[Unit]) -> list[tuple[str, str]]:
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
        out.append(("session configuration", value_text(conf)))
    return out


def runner_rows(doc: ResultsDoc) -> list[dict[str, str]]:
    return [{"name": r["name"], "kind": r.get("kind", "?"),
             "labels": ", ".join(f"{k}={v}" for k, v in sorted((r.get("labels") or {}).items()))
             or "—", "path": r.get("path") or "—", "unused": bool(r.get("unused"))}
            for r in runners(doc)]


def latency_rows(us: list[Unit]) -> list[dict[str, Any]]:
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
                rel = ", ".join(f"{what} {new / old:.2f}x" for what, new, old in (
                    ("load", st.load_ms, base.load_ms), ("peak", st.peak_rss_kb,
                                                         base.peak_rss_kb))
                    if new is not None and old)
            rows.append({"point": u.point, "runner": side.runner,
                         "pte_mb": None if st.pte_bytes is None else st.pte_bytes / 2 ** 20,
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


def speedup_rows(us: list[Unit]) -> list[dict[str, Any]]:
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
                    "sampled": ev.sampled_kernels, "samples_total": ev.samples_total,
                    "made_by": s.labels.get("made_by", "")})
    return out


EMULATED_NOTE = ("Measured on an emulated CPU ({what}): emulated timings say nothing about "
                 "speed, so no latency or speed-up here is an SME2 speed-up. Which kernels "
                 "executed and the outputs are real.")


def emulated_notes(doc: ResultsDoc) -> list[str]:
    """One note per emulated device the results came from."""
    seen: dict[str, str] = {}
    for b in doc.benchmarks:
        if b.emulated:
            model = b.device.get("model")
            seen.setdefault(model or "emulated", model or "QEMU")
    return [EMULATED_NOTE.format(what=w) for w in seen.values()]


def etrecord_notes(doc: ResultsDoc) -> list[str]:
    """One note per user's .pte benchmarked without an .etrecord: what the report cannot show."""
    seen: dict[str, str] = {}
    for b in doc.benchmarks:
        missing = b.extra.get("etrecord_missing")
        if missing:
            seen.setdefault(b.pte, f"{b.pte}: {missing}.")
    return list(seen.values())


HOT_NAMED = 5     # hot blocks a note names; results.json has them all


def cooldown_notes(doc: ResultsDoc) -> list[str]:
    """--sme2-cooldown in one line: the blocks that started hot (flagged, kept), or that the
    hold held, or why it could not be applied."""
    held = [b for b in doc.benchmarks if b.context.cooldown is not None]
    if not held:
        return []
    c = held[0].context.cooldown
    asked = f"`--sme2-cooldown {c.target_c:g}` (timeout {c.timeout_s:g} s)"
    skipped = [b.context.cooldown for b in held if not b.context.cooldown.applied]
    if skipped:
        return [f"{asked} was not applied: {skipped[0].reason}."]
    hot = [b for b in held if b.context.started_hot]
    if not hot:
        longest = max(b.context.cooldown.waited_s for b in held)
        return [f"Thermal hold {asked}: every block started at or below {c.target_c:g} °C "
                f"with no throttling (longest wait {longest:.0f} s)."]
    names = "; ".join(f"{b.name}{f' block {b.block}' if b.block is not None else ''} "
                      f"{b.runner_name}: {b.context.cooldown.summary()}"
                      for b in hot[:HOT_NAMED]) + \
        (f"; and {len(hot) - HOT_NAMED} more (results.json: `cooldown.hot`)"
         if len(hot) > HOT_NAMED else "")
    return [f"**Started hot:** {len(hot)} of {len(held)} blocks were still hot or throttling "
            f"when {asked} ran out — measured and kept, but they may be slower: {names}."]


def comparison_line(u: Unit) -> str:
    """A comparison in one line of the Summary: speed-up, verdict, outputs, evidence."""
    c = u.comparison
    # an emulated verdict is no speed: not shouted, and said so
    verdict = f"{c.verdict}, emulated CPU: not a speed" if u.emulated else f"**{c.verdict}**"
    text = (f"{u.point}: {c.candidate} vs {c.base} — speed-up {fmt_x(c.speedup)} "
            f"{fmt_ci(c.speedup)} ({verdict}); outputs {_outputs_text(c.outputs)}")
    ev = u.candidate.verdict if u.candidate else None
    return text + (f"; {c.candidate} kernel evidence: {ev}" if ev else "")


def unit_context(u: Unit, chart: str | None) -> dict[str, Any]:
    return {"unit": u, "title": u.title, "chart": chart, "runners": [s.runner for s in u.sides],
            "side_cols": [f">{s.runner} {unit}" for s in u.sides for unit in ("ms", "%")],
            "categories": _category_table(u), "acceleration": _acceleration(u),
            "bottlenecks": _op_rows(u, lambda o: o.bottleneck),
            "portable": _portable(u), "evidence": _evidence(u)}


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
    return ", ".join(f"{r['category']} {fmt_x(r['sp'])} {fmt_ci(r['sp'])}" for r in rows)


def grew_list(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['category']} {fmt_pct(r['base_share'])}% → "
                     f"{fmt_pct(r['cand_share'])}% ({fmt_pp(r['delta'])})" for r in rows)


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
        rows = [{"link": _link(u, paths), "runner": _runner_cell(u, i), "e2e": s.e2e_mean_ms,
                 "shares": [s.share(c) for c in present]} for u, i, s in sides]
        out.append({"model": model, "chart": charts.get(MODEL_CHART + model),
                    "columns": present, "rows": rows,
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
                         "largest": ", ".join(f"{code(o.name)} {fmt_pct(o.pct_e2e)}%"
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
            row = {"runner": _runner_cell(u, i), "verdict": e["verdict"],
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
                if s.categories_ms and s.e2e_mean_ms > 0:
                    top = max(category_order(s.categories_ms), key=s.share)
                    tops.setdefault(top, []).append(s.share(top))
        if not tops:
            continue
        n = sum(len(v) for v in tops.values())
        parts = [f"**{c}** in {len(v)} of {n} ({_range(v)} of E2E)"
                 for c, v in sorted(tops.items(), key=lambda kv: -len(kv[1]))]
        lines.append(f"Where the time goes in {model}: the largest category is "
                     + ", ".join(parts) + ".")
    return lines


def _range(shares: list[float]) -> str:
    lo, hi = min(shares), max(shares)
    return f"{fmt_pct(lo)}%" if fmt_pct(lo) == fmt_pct(hi) else f"{fmt_pct(lo)}–{fmt_pct(hi)}%"


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
            for what, j in (b.baseline_startup or {}).items():
                add(f"{b.name} ({what})", b.runner_name, j)
    for c in doc.comparisons:
        for runner, j in (c.baselines or {}).items():
            add(c.name, runner, j)
    return rows
