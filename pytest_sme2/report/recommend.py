"""Recommendations derived from a results document, each citing the figure it comes from.

``recommendations(doc)`` returns them most urgent first: outputs that differ (the speed-up is
not like for like), comparisons that went the wrong way or nowhere, operators left outside the
delegate, the data movement that surfaces once convolution and GEMM get faster, framework
overhead, unclassified operators, weak kernel evidence, and noise. Every rule reads the document
through :mod:`pytest_sme2.report.digest`, so the figures match the report's tables.

Wording rule: nothing here says SME2 *did* something beyond the kernel-evidence verdict; a
speed-up is attributed to the candidate runner, not to SME2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from pytest_sme2.analysis.categories import CONVOLUTION, DATA_MOVEMENT, GEMM, OTHER
from pytest_sme2.compare import FASTER, SLOWER
from pytest_sme2.report.digest import (CV_NOISY_PCT, SHARE_GROWTH_PP, Side, Unit, finite,
                                       units)
from pytest_sme2.results import OperatorStats, ResultsDoc, load_results

DATA_MOVEMENT_PCT = 15.0     # Data Movement at least this share of E2E is worth a look
DATA_FAMILY_PCT = 5.0        # ... and so is one family of it above this (transposes...)
OVERHEAD_PCT = 10.0          # delegate + operator call + runtime time
SMALL_MODEL_MS = 1.0         # below this, fixed per-call costs bound what any kernel can gain
OTHER_OPS_PCT = 10.0         # operators no category rule matched
LOW_COMPUTE_SPEEDUP = 2.0    # Conv/GEMM speed-up below this in an SME2 comparison is low
COMPUTE_SHARE_PCT = 10.0     # ... when the category is at least this share of base E2E
THERMAL_RISE_C = 5.0
MAX_PATHS = 3


@dataclass(frozen=True)
class Recommendation:
    text: str
    evidence: str               # the figure(s) the text rests on
    rule: str = ""              # which rule produced it (stable id, for tests and filters)


def recommendations(doc: ResultsDoc | dict[str, Any],
                    us: list[Unit] | None = None) -> list[Recommendation]:
    """``us``: the document's units when the caller has them already."""
    out: list[Recommendation] = []
    us = units(load_results(doc)) if us is None else us
    for rule in (_outputs, _direction, _portable_ops, _data_movement, _low_compute_speedup,
                 _overhead, _other_ops, _evidence, _noise):
        if rule in _ACROSS_UNITS:
            out.extend(rule(us))
        else:
            for unit in us:
                out.extend(rule(unit))
    return out


# -- formatting ------------------------------------------------------------------------------

def _x(iv) -> str:
    return f"{iv.point:.3f}x [{iv.low:.3f}, {iv.high:.3f}]"


def _where(unit: Unit, side: Side) -> str:
    return f"{unit.point} {side.runner}"


def _focus(unit: Unit) -> list[Side]:
    """Sides whose operators recommendations talk about: the candidate of a comparison (what
    you would ship), every side of plain benchmarks."""
    if unit.comparison:
        return [unit.candidate] if unit.candidate and unit.candidate.blocks else []
    return [s for s in unit.sides if s.blocks]


def _paths(ops: list[OperatorStats]) -> str:
    """Where operators come from: their module paths, else their op types (code-quoted)."""
    paths = sorted(dict.fromkeys(p for o in ops for p in o.module_paths if p), key=_natural)
    if paths:
        more = f" (+{len(paths) - MAX_PATHS} more)" if len(paths) > MAX_PATHS else ""
        return ", ".join(f"`{p}`" for p in paths[:MAX_PATHS]) + more
    return ", ".join(f"`{t}`" for t in dict.fromkeys(t for o in ops for t in o.op_types if t))


def _cases(where: Iterable[str]) -> str:
    """"3 cases": a case measured twice (by a benchmark and a comparison) counts once."""
    n = len(set(where))
    return f"{n} case{'' if n == 1 else 's'}"


def _natural(text: str) -> list:
    """Sort key reading digits as numbers: blocks.2 before blocks.10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _span(values: list[float], unit: str = "%") -> str:
    """``7.2%`` or ``7.2-8.7%``: the range a finding takes over the cases it was seen in."""
    lo, hi = min(values), max(values)
    return f"{hi:.1f}{unit}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}{unit}"


def _by_model(us: list[Unit], apart=lambda u: False) -> tuple[list[list[Unit]], list[Unit]]:
    """Units grouped by model and device (one recommendation per finding of a model, not one
    per dtype, thread count and comparison), and those ``apart`` says tell a story of their
    own."""
    groups: dict[tuple[str, str], list[Unit]] = {}
    for u in us:
        if not apart(u):
            groups.setdefault((u.model, u.device), []).append(u)
    return list(groups.values()), [u for u in us if apart(u)]


def _times(n: float) -> str:
    return "once" if n == 1 else f"{n:g} times"


def _yes_no(v: Any) -> str:
    return {True: "yes", False: "no"}.get(v, "unknown")


# -- rules -----------------------------------------------------------------------------------

def _outputs(unit: Unit) -> list[Recommendation]:
    out = unit.comparison.outputs if unit.comparison else None
    if not out or out.equal:
        return []
    fig = f"max |Δ| {out.max_abs_diff:.3g} > tolerance {out.tolerance:.3g}"
    return [Recommendation(
        f"Outputs of {unit.candidate.runner} differ from {unit.base.runner} on {unit.point} "
        f"({fig}): the two runners do not compute the same thing, so the speed-up is not like "
        "for like — find the diverging operator before trusting it.", fig, "outputs")]


def _direction(unit: Unit) -> list[Recommendation]:
    """Comparisons that came out slower, or no different on an SME2 comparison."""
    c = unit.comparison
    if not c or unit.speedup is None:
        return []
    base, cand = unit.base, unit.candidate
    sp = unit.speedup
    fig = f"speed-up {_x(sp)} ({c.verdict})"
    device = (cand.device or base.device)
    labels = ", ".join(f"{k}={v}" for k, v in sorted(cand.labels.items())) or "none recorded"
    if unit.is_sme2() and c.verdict not in (FASTER, SLOWER):
        if device.get("sme2") is False:
            text = (f"{cand.runner} vs {base.runner} on {unit.point}: {fig}. The device reports "
                    f"no SME2 ({device.get('cpu', 'unknown CPU')}, {device.get('abi', '?')}), "
                    "so SME2 kernels cannot run there: run this comparison on an SME2 device.")
        else:
            text = (f"{cand.runner} vs {base.runner} on {unit.point}: {fig} on an SME2 "
                    f"comparison — check {cand.runner}'s build flags (labels: {labels}) and the "
                    f"device's SME2 capability (hwcaps SME2: {_yes_no(device.get('sme2'))}); "
                    "the kernel evidence below says what ran.")
        return [Recommendation(text, fig, "sme2-no-difference")]
    if c.verdict == SLOWER:
        extra = (" A slower SME2 build often means small matrices paying the streaming-mode "
                 "switch; compare per-category speed-ups to see where it loses."
                 if unit.is_sme2() else " The category speed-ups show where it loses.")
        return [Recommendation(f"{cand.runner} is slower than {base.runner} on {unit.point}: "
                               f"{fig}.{extra}", fig, "slower")]
    if unit.is_sme2() and c.verdict == FASTER and cand.verdict == "absent":
        return [Recommendation(
            f"{cand.runner} is faster than {base.runner} on {unit.point} ({fig}) but its kernel "
            f"evidence is 'absent' ({cand.evidence.reason}): the gain comes from "
            "something else in the build; compare builds that differ only in SME2.",
            f"{fig}; kernel evidence absent", "faster-without-sme2")]
    return []


_PORTABLE_ADVICE: tuple[tuple[str, str, str], ...] = (
    # (operator regex, module path / op type regex or "", advice)
    (r"_to_dim_order_copy|_to_copy", r"hardsigmoid|scale_activation",
     "the Hardsigmoid decomposes into int64 casts the XNNPACK partitioner leaves in the "
     "portable runtime; write it as `clamp(x + 3, 0, 6) / 6` (with 3 and 6 as buffers so fp16 "
     "needs no casts either; see models/mobilenet_v3_small.py, export_friendly=True)"),
    (r"_to_dim_order_copy|_to_copy|_clone_dim_order|clone", "",
     "a dtype or memory-format copy between partitions: keep one dtype and one memory format "
     "(channels_last) across the graph so no copy is needed"),
    (r"adaptive_avg_pool2d", "",
     "XNNPACK delegates adaptive average pooling only to a 1x1 output; for a fixed input size "
     "write the pooling as `nn.AvgPool2d(kernel_size=k, stride=k)` with k = input / output, "
     "which it delegates"),
)


def _portable_advice(op: OperatorStats) -> str:
    context = " ".join(op.module_paths + op.op_types).lower()
    for name_re, context_re, advice in _PORTABLE_ADVICE:
        if re.search(name_re, op.name) and (not context_re or re.search(context_re, context)):
            return advice
    types = ", ".join(op.op_types) or "this operator"
    return (f"check whether the XNNPACK partitioner supports {types}; if not, rewrite the "
            "module with supported operators or fuse it into its neighbour")


def _portable_ops(us: list[Unit]) -> list[Recommendation]:
    """One recommendation per operator a model keeps outside the delegate (by name and advice):
    an operator that runs once per transformer block, in every dtype and thread count, is one
    finding. Found where one of its rows is a bottleneck; its figures then count every
    portable row of that name in the case."""
    groups: dict[tuple, list[tuple[Unit, Side, list[OperatorStats]]]] = {}
    for unit in us:
        for side in _focus(unit):
            rows: dict[tuple[str, str], list[OperatorStats]] = {}
            for o in side.operators:
                if not o.delegated:
                    rows.setdefault((o.name, _portable_advice(o)), []).append(o)
            for (name, advice), ops in rows.items():
                if any(o.should_delegate for o in ops):
                    key = (unit.model, unit.device, name, advice)
                    groups.setdefault(key, []).append((unit, side, ops))
    found = [_portable_recommendation(key[2], key[3], cases) for key, cases in groups.items()]
    return [r for _, r in sorted(found, key=lambda pr: -pr[0])]


def _portable_recommendation(name: str, advice: str,
                             cases: list[tuple[Unit, Side, list[OperatorStats]]]
                             ) -> tuple[float, Recommendation]:
    figures = []
    for unit, side, ops in cases:
        pct = sum(o.pct_e2e for o in ops)
        figures.append((pct, sum(o.mean_ms_per_run for o in ops),
                        sum(o.calls_per_run for o in ops), _where(unit, side)))
    where = _paths([o for _, _, ops in cases for o in ops])
    where = f" ({where})" if where else ""
    calls = sorted({c for _, _, c, _ in figures})
    calls_text = _times(calls[0]) if len(calls) == 1 else f"{calls[0]:g}-{calls[-1]:g} times"
    top = max(figures)

    def fig(pct, ms, n, at):
        return (f"{pct:.1f}% of E2E, {ms:.3f} ms and {n:g} call{'' if n == 1 else 's'} per "
                f"run, portable ({at})")

    if len(figures) == 1:
        text = (f"`{name}` runs {calls_text} per inference outside the delegate{where} and "
                f"takes {top[0]:.1f}% of E2E on {top[3]} — {advice}.")
        return top[0], Recommendation(text, f"{name}: {fig(*top)}", "portable-op")
    model = cases[0][0].model
    text = (f"`{name}` runs {calls_text} per inference outside the delegate{where} in "
            f"{_cases(at for *_, at in figures)} of {model} and takes "
            f"{_span([f[0] for f in figures])} of "
            f"E2E (most: {top[0]:.1f}% on {top[3]}) — {advice}.")
    evidence = f"{name}: " + "; ".join(fig(*f) for f in sorted(figures, reverse=True))
    return top[0], Recommendation(text, evidence, "portable-op")


# Families of data movement, each with what usually removes it.
_DATA_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("Transpose", r"transpose|permute|_t_copy",
     "look for layout changes (NCHW<->NHWC) around {where}: keep activations channels-last "
     "between delegated operators and avoid permutes in forward()"),
    ("Convert", r"^convert|quantize|choose_qparams",
     "dtype conversions at partition boundaries around {where}: keep the partition in one "
     "dtype (quantize the whole graph, or none of it)"),
    ("Copy", r"^copy|_copy|clone",
     "copies around {where}: a partition boundary or a memory-format change forces them"),
    ("Concatenate/Slice/Pad", r"concat|slice|split|pad|cat\b|stack|select|narrow",
     "concatenation, slicing and padding around {where}: fuse into the neighbouring "
     "convolution (padding) or preallocate (concatenation)"),
    ("Reshape", r"reshape|view|expand|squeeze|dims",
     "reshapes around {where}: usually free views; if they cost time they copy, which a "
     "different layout avoids"),
    ("Resize", r"resize|upsample|grid_sampler",
     "resampling at {where}: consider a smaller resize or doing it once upstream"),
)


def _family(name: str) -> str:
    for family, pattern, _ in _DATA_FAMILIES:
        if re.search(pattern, name, re.IGNORECASE):
            return family
    return "other data movement"


@dataclass(frozen=True)
class _Movement:
    """Data movement on one side of a unit: its share of E2E, and the families of operators
    above DATA_FAMILY_PCT with their operators (same-named ones merged), largest first."""
    unit: Unit
    side: Side
    share: float
    families: list[tuple[str, float, list[tuple[str, float, int]]]]

    @property
    def where(self) -> str:
        return _where(self.unit, self.side)

    @property
    def figure(self) -> str:
        moved = self.side.categories_ms.get(DATA_MOVEMENT, 0)
        return (f"Data Movement {self.share:.1f}% of E2E ({moved:.3f} of "
                f"{self.side.e2e_mean_ms:.3f} ms)")


def _movement(unit: Unit, side: Side) -> _Movement:
    by_family: dict[str, dict[str, list[float]]] = {}
    for o in side.operators:
        if o.category == DATA_MOVEMENT:
            by_family.setdefault(_family(o.name), {}).setdefault(o.name, []).append(o.pct_e2e)
    families = []
    for family, names in by_family.items():
        pct = sum(sum(v) for v in names.values())
        if pct > DATA_FAMILY_PCT:
            ops = sorted(((n, sum(v), len(v)) for n, v in names.items()), key=lambda t: -t[1])
            families.append((family, pct, ops))
    families.sort(key=lambda f: -f[1])
    return _Movement(unit, side, side.share(DATA_MOVEMENT), families)


def _family_clause(family: str, pct: float, ops: list[tuple[str, float, int]],
                   up_to: str = "", at: str = "") -> str:
    # Operators named alike (XNNPACK numbers them per delegate) are one entry with a count;
    # those that round to 0.0% say nothing.
    named = [o for o in ops if o[1] >= 0.05] or ops[:1]
    where = "; ".join(f"`{n}` ({p:.1f}%{f' over {k} operators' if k > 1 else ''})"
                      for n, p, k in named[:MAX_PATHS])
    advice = {f: a for f, _, a in _DATA_FAMILIES}.get(family)
    return (f"{family} operators take {up_to}{pct:.1f}% of E2E{f' (on {at})' if at else ''} — "
            + (advice.format(where=where) if advice else f"see {where}"))


def _data_movement(us: list[Unit]) -> list[Recommendation]:
    # A comparison whose candidate moves a larger share of data than its base tells its own
    # story (the next bottleneck once compute got faster); the others are cases of the model.
    groups, comparisons = _by_model(us, _movement_grew)
    out = []
    for unit in comparisons:
        out += [_movement_recommendation(m) for side in _focus(unit)
                if _worth_a_look(m := _movement(unit, side))]
    for group in groups:
        found = [m for unit in group for side in _focus(unit)
                 if _worth_a_look(m := _movement(unit, side))]
        if len(found) == 1:
            out.append(_movement_recommendation(found[0]))
        elif found:
            out.append(_movements_recommendation(found))
    return out


def _movement_grew(unit: Unit) -> bool:
    if not (unit.comparison and unit.base and unit.base.blocks and unit.candidate):
        return False
    return unit.candidate.share(DATA_MOVEMENT) - unit.base.share(DATA_MOVEMENT) \
        >= SHARE_GROWTH_PP


def _worth_a_look(m: _Movement) -> bool:
    return m.share >= DATA_MOVEMENT_PCT or bool(m.families)


def _movement_recommendation(m: _Movement) -> Recommendation:
    unit = m.unit
    head = f"Data Movement takes {m.share:.1f}% of E2E on {m.where}"
    fig = m.figure
    if unit.comparison and unit.base and unit.base.blocks:
        before = unit.base.share(DATA_MOVEMENT)
        if m.share - before >= SHARE_GROWTH_PP:
            faster = [c for c in (CONVOLUTION, GEMM) if unit.category_change(c) == FASTER]
            head += f", up from {before:.1f}% on {unit.base.runner}"
            fig += f", {before:.1f}% on {unit.base.runner}"
            if faster:
                head += (f": with {' and '.join(faster)} faster, moving data is what is left — "
                         "the next bottleneck")
    clauses = [_family_clause(*f) for f in m.families] or [
        "no single kind of data movement stands out; see the bottleneck table for the "
        "operators"]
    return Recommendation(f"{head}. " + "; ".join(clauses) + ".", fig, "data-movement")


def _movements_recommendation(found: list[_Movement]) -> Recommendation:
    """One model's data movement over several cases: the range, and each family where it is
    largest."""
    top = max(found, key=lambda m: m.share)
    head = (f"Data Movement takes {_span([m.share for m in found])} of E2E in "
            f"{_cases(m.where for m in found)} of {top.unit.model} (most: {top.share:.1f}% on "
            f"{top.where})")
    largest: dict[str, tuple[float, list[tuple[str, float, int]], _Movement]] = {}
    for m in found:
        for family, pct, ops in m.families:
            if family not in largest or pct > largest[family][0]:
                largest[family] = (pct, ops, m)
    clauses = [_family_clause(family, pct, ops, "up to ", "" if m is top else m.where)
               for family, (pct, ops, m) in sorted(largest.items(), key=lambda kv: -kv[1][0])]
    clauses = clauses or ["no single kind of data movement stands out; see the bottleneck "
                          "tables for the operators"]
    evidence = "; ".join(f"{m.figure} on {m.where}" for m in sorted(found, key=lambda m:
                                                                   -m.share))
    return Recommendation(f"{head}. " + "; ".join(clauses) + ".", evidence, "data-movement")


def _low_compute_speedup(unit: Unit) -> list[Recommendation]:
    if not unit.is_sme2() or unit.comparison.verdict == SLOWER or not unit.base.blocks:
        return []
    out = []
    for cat in (CONVOLUTION, GEMM):
        iv = unit.category_speedup(cat)
        share = unit.base.share(cat)
        if iv is None or share < COMPUTE_SHARE_PCT or iv.point >= LOW_COMPUTE_SPEEDUP:
            continue
        fig = f"{cat} speed-up {_x(iv)}, {share:.1f}% of E2E on {unit.base.runner}"
        ev = unit.candidate.verdict or "unknown"
        out.append(Recommendation(
            f"{cat} is {share:.1f}% of E2E on {unit.point} {unit.base.runner} but only "
            f"{_x(iv)} faster on {unit.candidate.runner} (GEMM and convolution typically gain "
            f"3-15x from SME2): check that these operators are delegated, that the dtype takes "
            f"KleidiAI packed paths, and the kernel evidence (here '{ev}').", fig,
            "low-compute-speedup"))
    return out


def _overhead(us: list[Unit]) -> list[Recommendation]:
    groups, _ = _by_model(us)
    out = []
    for group in groups:
        found = []
        for unit in group:
            for side in _focus(unit):
                o = side.overheads_ms
                total = sum(v for v in o.values() if finite(v))
                if side.e2e_mean_ms > 0 and 100 * total / side.e2e_mean_ms >= OVERHEAD_PCT:
                    found.append((100 * total / side.e2e_mean_ms, total, unit, side))
        if found:
            out.append(_overhead_recommendation(found))
    return out


def _overhead_recommendation(found: list[tuple[float, float, Unit, Side]]) -> Recommendation:
    def fig(pct, total, unit, side):
        o = side.overheads_ms
        return (f"overhead {total:.3f} ms = {pct:.1f}% of {side.e2e_mean_ms:.3f} ms E2E "
                f"(delegate {o.get('delegate_ms', 0):.3f}, operator calls "
                f"{o.get('operator_call_ms', 0):.3f}, runtime {o.get('runtime_ms', 0):.3f})")

    fastest = min(side.e2e_mean_ms for _, _, _, side in found)
    small = (f"; at {fastest:.3f} ms per inference it also bounds any speed-up"
             if fastest < SMALL_MODEL_MS else "")
    advice = ("every delegate and portable operator call costs a fixed time, so fewer "
              "partitions (no portable operators between delegated ones) pay it fewer times"
              f"{small}.")
    if len(found) == 1:
        pct, _, unit, side = found[0]
        return Recommendation(f"Framework overhead is {pct:.1f}% of E2E on "
                              f"{_where(unit, side)}: {advice}", fig(*found[0]), "overhead")
    found = sorted(found, key=lambda f: -f[0])
    pct, _, unit, side = found[0]
    text = (f"Framework overhead is {_span([f[0] for f in found])} of E2E in "
            f"{_cases(_where(f[2], f[3]) for f in found)} of {unit.model} (most: {pct:.1f}% on "
            f"{_where(unit, side)}): {advice}")
    return Recommendation(text, "; ".join(f"{fig(*f)} on {_where(f[2], f[3])}" for f in found),
                          "overhead")


def _other_ops(unit: Unit) -> list[Recommendation]:
    out = []
    for side in _focus(unit):
        ops = [o for o in side.operators if o.category == OTHER]
        pct = sum(o.pct_e2e for o in ops)
        if pct < OTHER_OPS_PCT:
            continue
        names = ", ".join(f"`{o.name}`" for o in ops[:MAX_PATHS])
        out.append(Recommendation(
            f"Operators outside the category taxonomy take {pct:.1f}% of E2E on "
            f"{_where(unit, side)} ({names}): add a category rule for them so the breakdown "
            "and speed-ups account for them.", f"uncategorised operators {pct:.1f}% of E2E",
            "other-ops"))
    return out


def _evidence(unit: Unit) -> list[Recommendation]:
    """Weak evidence where SME2 matters: the candidate of an SME2 comparison, or a benchmark on
    a device that reports SME2."""
    if unit.is_sme2():
        sides = [unit.candidate]
    elif unit.comparison:
        sides = []
    else:
        sides = [s for s in unit.sides if s.blocks and s.device.get("sme2") is True]
    out = []
    for side in sides:
        ev = side.verdict
        if ev not in ("indicated", "unknown"):
            continue
        packed = side.evidence.kleidiai_ops
        names = ", ".join(f"`{p}`" for p in packed[:MAX_PATHS])
        what = (f"KleidiAI packed operators ran: {names}" if packed
                else "no KleidiAI packed operators or kernel trace")
        out.append(Recommendation(
            f"Kernel evidence on {_where(unit, side)} is '{ev}' ({what}): to see which "
            "micro-kernels ran, use a runner whose XNNPACK logs kernel selection (log level >= "
            "4) and pass the log to `pytest-sme2 analyze --xnntrace`.",
            f"kernel evidence '{ev}': {side.evidence.reason}", "evidence"))
    return out


def _noise(us: list[Unit]) -> list[Recommendation]:
    """One recommendation for every noisy benchmark of the session (the remedy is the same),
    each named with its worst CV; and each benchmark that heated its device."""
    noisy, heat, android, runs = [], [], False, set()
    for unit in us:
        parts, figs = [], []
        for side in unit.sides:
            cvs = [(b.e2e.cv_pct, b.e2e.outliers) for b in side.blocks if finite(b.e2e.cv_pct)]
            high = [c for c in cvs if c[0] > CV_NOISY_PCT]
            if high:
                worst = max(c[0] for c in high)
                outliers = sum(c[1] for c in high)
                blocks = f" in {len(high)} of {len(cvs)} blocks" if len(cvs) > 1 else ""
                parts.append(f"{side.runner} CV {worst:.1f}%{blocks}"
                             + (f" ({outliers} outlier run{'' if outliers == 1 else 's'})"
                                if outliers else ""))
                figs.append(f"{side.runner}: max CV {worst:.1f}%{blocks}")
                android = android or side.device.get("kind") == "android"
        if parts:
            noisy.append((unit, parts, figs))
            runs |= {s.runs for s in unit.sides if s.runs}
        for s in unit.sides:
            h = s.thermal()
            if h is not None and h[1] - h[0] >= THERMAL_RISE_C:
                heat.append((unit, s.runner, h))
    out = []
    if noisy:
        pin = ("pin the benchmark to the big cores (--sme2-taskset)" if android
               else "pin the benchmark to fixed cores (taskset -c)")
        remedy = (f"CV above {CV_NOISY_PCT:.0f}%, the results are noisy: {pin}, stop "
                  f"background load and raise --runs (now {', '.join(map(str, sorted(runs)))})")
        if len(noisy) == 1:
            unit, parts, figs = noisy[0]
            text = f"{unit.point}: {'; '.join(parts)} — {remedy}."
            evidence = "; ".join(figs)
        else:
            text = (f"{len(noisy)} benchmarks are noisy ("
                    + "; ".join(f"{_named(u)}: {', '.join(p)}" for u, p, _ in noisy)
                    + f") — {remedy}.")
            evidence = "; ".join(f"{_named(u)} {f}" for u, _, figs in noisy for f in figs)
        out.append(Recommendation(text, evidence, "noise"))
    for unit, runner, (before, after) in heat:
        out.append(Recommendation(
            f"{unit.point} {runner}: the hottest thermal zone rose from {before:.1f} to "
            f"{after:.1f} °C — the device may throttle; let it cool between blocks "
            "(--sme2-cooldown TEMP_C).", f"{runner}: thermal {before:.1f} -> {after:.1f} °C",
            "noise"))
    return out


def _named(unit: Unit) -> str:
    """The unit, a comparison told apart from a benchmark of the same point."""
    if unit.comparison and unit.base and unit.candidate:
        return f"{unit.point} ({unit.base.runner} vs {unit.candidate.runner})"
    return unit.point


# Rules that see every unit at once: they say a finding once for all the cases it is in.
_ACROSS_UNITS = {_portable_ops, _data_movement, _overhead, _noise}
