"""One benchmark's (or comparison's) page, as plain values for the templates: its speed-ups,
category table, acceleration, operators, portable operators and kernel evidence, and the notes
that apply to a whole report (emulated devices, blocks that started hot). report.md's
one-row-per-benchmark sections take their rows from here too (:mod:`.sections`)."""

from __future__ import annotations

from typing import Any

from pytest_sme2.analysis.categories import CONVOLUTION, GEMM
from pytest_sme2.stats import FASTER, SLOWER
from pytest_sme2.report.cells import code, fmt_ratio_interval
from pytest_sme2.report.digest import (SHARE_GROWTH_PP, Unit)
from pytest_sme2.results import OutputCheck, ResultsDoc

TOP_KERNELS = 40
MAX_PATHS = 4              # module paths shown per operator in a table

# Exactly what each kernel-evidence verdict allows us to say, and no more.
VERDICT_WORDING = {
    "proven": "SME2 micro-kernels ran: a kernel trace names them, or the sampler caught them "
              "executing.",
    "indicated": "KleidiAI packed operators ran on a device that reports SME2, so SME2 "
                 "micro-kernels are likely; no kernel trace or sample shows which "
                 "micro-kernels ran, so this is an indication only.",
    "absent": "No SME2 micro-kernels ran.",
    "unknown": "The evidence does not show whether SME2 micro-kernels ran.",
    "mixed": "The blocks' evidence disagrees; no single verdict applies.",
}
EVIDENCE_INTRO = (
    "What the ETDump, the kernel traces and the device say about SME2, per runner. The verdict "
    "is the strongest claim the evidence supports: proven (a kernel trace names SME2 "
    "micro-kernels that ran, or an evidence process's samples caught them executing), "
    "indicated (KleidiAI packed operators ran on a device that reports SME2, no trace or "
    "sample), absent, or unknown. On an emulated CPU every run is traced: the micro-kernels "
    "listed as executed are the functions whose code QEMU translated to run. Sampling cannot "
    "prove absence: a kernel too short to be hit gets no sample.")


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
            "totals": [s.breakdown_ms for s in u.sides]}


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
        rest = s.breakdown_ms - deleg - port
        n_port = sum(1 for o in s.operators if not o.delegated)

        def share_of_e2e(ms, s=s):
            return 100 * ms / s.breakdown_ms if s.breakdown_ms > 0 else None
        summary.append({"runner": s.runner, "deleg": deleg, "deleg_pct": share_of_e2e(deleg),
                        "port": port, "port_pct": share_of_e2e(port), "rest": rest,
                        "rest_pct": share_of_e2e(rest),
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
                    "sme": ev.sme, "sme_reason": ev.sme_reason, "levels": ev.levels,
                    "shows_sme_level": ev.shows_sme_level,
                    "traced": ev.traced, "executed": ev.executed_kernels,
                    "sampled": ev.sampled_kernels, "samples_total": ev.samples_total,
                    "made_by": s.labels.get("made_by", "")})
    return out


EMULATED_NOTE = ("Measured on an emulated CPU ({what}): emulated timings say nothing about "
                 "speed, so no latency or speed-up here is an SME2 speed-up. Which kernels "
                 "executed and the outputs are real.")


def interrupted_line(doc: ResultsDoc) -> str | None:
    """report.md's first line on a session cut short: what stopped it, the test then running
    (a comparison's blocks measured so far are not here: it is judged whole), and that what
    follows is what finished."""
    cut = doc.session.interrupted
    if not cut:
        return None
    running = cut.get("in_flight")
    lost = ("a comparison: the blocks it had measured are not in this report, a comparison "
            "is judged whole" if cut.get("comparison") else "it is not in this report")
    during = f" while `{running}` was running ({lost})" if running else ""
    return (f"**Interrupted** by {cut.get('by') or 'an interrupt'}{during}: this session is "
            "incomplete; what follows is what finished before it stopped.")


def emulated_notes(doc: ResultsDoc) -> list[str]:
    """One note per emulated device the results came from."""
    seen: dict[str, str] = {}
    for b in doc.benchmarks:
        if b.emulated:
            model = b.device.model
            seen.setdefault(model or "emulated", model or "QEMU")
    return [EMULATED_NOTE.format(what=w) for w in seen.values()]


def etrecord_notes(doc: ResultsDoc) -> list[str]:
    """One note per user's .pte benchmarked without an .etrecord: what the report cannot show."""
    seen: dict[str, str] = {}
    for b in doc.benchmarks:
        missing = b.etrecord_missing
        if missing:
            seen.setdefault(b.pte, f"{b.pte}: {missing}.")
    return list(seen.values())


def output_notes(doc: ResultsDoc) -> list[str]:
    """One note per benchmark whose outputs (sampled logits) held NaN or inf: its timings are
    not the model's."""
    seen: dict[tuple[str, str], str] = {}
    for b in doc.benchmarks:
        if b.context.output_problem:
            seen.setdefault((b.nodeid, b.runner_name),
                            f"**Not finite**: {b.name} ({b.runner_name}): "
                            f"{b.context.output_problem}.")
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
    text = (f"{u.point}: {c.candidate} vs {c.base} — speed-up "
            f"{fmt_ratio_interval(c.speedup)} ({verdict}); outputs {_outputs_text(c.outputs)}")
    ev = u.candidate.verdict if u.candidate else None
    return text + (f"; {c.candidate} kernel evidence: {ev}" if ev else "")


def unit_context(u: Unit, chart: str | None) -> dict[str, Any]:
    return {"unit": u, "title": u.title, "chart": chart, "runners": [s.runner for s in u.sides],
            "side_cols": [f">{s.runner} {unit}" for s in u.sides for unit in ("ms", "%")],
            "categories": _category_table(u), "acceleration": _acceleration(u),
            "bottlenecks": _op_rows(u, lambda o: o.bottleneck),
            "portable": _portable(u), "evidence": _evidence(u)}
