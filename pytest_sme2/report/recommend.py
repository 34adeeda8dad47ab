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


def _paths(op: OperatorStats) -> str:
    """Where an operator comes from: its module paths, else its op types (code-quoted)."""
    paths = op.module_paths
    if paths:
        more = f" (+{len(paths) - MAX_PATHS} more)" if len(paths) > MAX_PATHS else ""
        return ", ".join(f"`{p}`" for p in paths[:MAX_PATHS]) + more
    return ", ".join(f"`{t}`" for t in op.op_types)


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


def _portable_ops(unit: Unit) -> list[Recommendation]:
    out = []
    for side in _focus(unit):
        for op in side.operators:
            if not op.should_delegate:
                continue
            where = _paths(op)
            calls = op.calls_per_run
            fig = (f"{op.name}: {op.pct_e2e:.1f}% of E2E, {op.mean_ms_per_run:.3f} ms "
                   f"and {calls:g} call{'' if calls == 1 else 's'} per run, portable "
                   f"({_where(unit, side)})")
            out.append(Recommendation(
                f"`{op.name}` runs {_times(calls)} per inference outside the "
                f"delegate{f' ({where})' if where else ''} and takes {op.pct_e2e:.1f}% of "
                f"E2E on {_where(unit, side)} — {_portable_advice(op)}.", fig, "portable-op"))
    return out


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


def _data_movement(unit: Unit) -> list[Recommendation]:
    out = []
    for side in _focus(unit):
        share = side.share(DATA_MOVEMENT)
        ops = [o for o in side.operators if o.category == DATA_MOVEMENT]
        families: dict[str, list[OperatorStats]] = {}
        for o in ops:
            families.setdefault(_family(o.name), []).append(o)
        big = {f: os_ for f, os_ in families.items()
               if sum(o.pct_e2e for o in os_) > DATA_FAMILY_PCT}
        grew = None
        if unit.comparison and unit.base and unit.base.blocks:
            before = unit.base.share(DATA_MOVEMENT)
            if share - before >= SHARE_GROWTH_PP:
                grew = before
        if share < DATA_MOVEMENT_PCT and not big:
            continue
        head = f"Data Movement takes {share:.1f}% of E2E on {_where(unit, side)}"
        fig = f"Data Movement {share:.1f}% of E2E ({side.categories_ms.get(DATA_MOVEMENT, 0):.3f}"
        fig += f" of {side.e2e_mean_ms:.3f} ms)"
        if grew is not None:
            faster = [c for c in (CONVOLUTION, GEMM) if unit.category_change(c) == FASTER]
            head += f", up from {grew:.1f}% on {unit.base.runner}"
            fig += f", {grew:.1f}% on {unit.base.runner}"
            if faster:
                head += (f": with {' and '.join(faster)} faster, moving data is what is left — "
                         "the next bottleneck")
        clauses = []
        advice_of = {f: a for f, _, a in _DATA_FAMILIES}
        for family, fam_ops in sorted(big.items(), key=lambda kv: -sum(o.pct_e2e
                                                                       for o in kv[1])):
            pct = sum(o.pct_e2e for o in fam_ops)
            top = sorted(fam_ops, key=lambda o: -o.pct_e2e)[:MAX_PATHS]
            where = "; ".join(f"`{o.name}` ({o.pct_e2e:.1f}%)" for o in top)
            advice = advice_of.get(family)
            clauses.append(f"{family} operators take {pct:.1f}% of E2E — "
                           + (advice.format(where=where) if advice else f"see {where}"))
        if not clauses:
            clauses.append("no single kind of data movement stands out; see the bottleneck "
                           "table for the operators")
        out.append(Recommendation(f"{head}. " + "; ".join(clauses) + ".", fig, "data-movement"))
    return out


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


def _overhead(unit: Unit) -> list[Recommendation]:
    out = []
    for side in _focus(unit):
        o = side.overheads_ms
        total = sum(v for v in o.values() if finite(v))
        if side.e2e_mean_ms <= 0 or 100 * total / side.e2e_mean_ms < OVERHEAD_PCT:
            continue
        pct = 100 * total / side.e2e_mean_ms
        fig = (f"overhead {total:.3f} ms = {pct:.1f}% of {side.e2e_mean_ms:.3f} ms E2E "
               f"(delegate {o.get('delegate_ms', 0):.3f}, operator calls "
               f"{o.get('operator_call_ms', 0):.3f}, runtime {o.get('runtime_ms', 0):.3f})")
        small = (f"; at {side.e2e_mean_ms:.3f} ms per inference it also bounds any speed-up"
                 if side.e2e_mean_ms < SMALL_MODEL_MS else "")
        out.append(Recommendation(
            f"Framework overhead is {pct:.1f}% of E2E on {_where(unit, side)}: every delegate "
            "and portable operator call costs a fixed time, so fewer partitions (no portable "
            f"operators between delegated ones) pay it fewer times{small}.", fig, "overhead"))
    return out


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


def _noise(unit: Unit) -> list[Recommendation]:
    """One line per unit: the runners whose blocks had CV above the threshold, and heat."""
    parts, figs, android = [], [], False
    for side in unit.sides:
        cvs = [(b.e2e.cv_pct, b.e2e.outliers) for b in side.blocks if finite(b.e2e.cv_pct)]
        noisy = [c for c in cvs if c[0] > CV_NOISY_PCT]
        if noisy:
            worst = max(c[0] for c in noisy)
            outliers = sum(c[1] for c in noisy)
            blocks = f" in {len(noisy)} of {len(cvs)} blocks" if len(cvs) > 1 else ""
            parts.append(f"{side.runner} CV {worst:.1f}%{blocks}"
                         + (f" ({outliers} outlier runs)" if outliers else ""))
            figs.append(f"{side.runner}: max CV {worst:.1f}%{blocks}")
            android = android or side.device.get("kind") == "android"
    heat = [(s.runner, s.thermal()) for s in unit.sides]
    hot = [(r, h) for r, h in heat if h is not None and h[1] - h[0] >= THERMAL_RISE_C]
    if not parts and not hot:
        return []
    sentences = []
    if parts:
        pin = ("pin the benchmark to the big cores (--sme2-taskset)" if android
               else "pin the benchmark to fixed cores (taskset -c)")
        runs = sorted({s.runs for s in unit.sides if s.runs})
        sentences.append(f"{unit.point}: {'; '.join(parts)} — CV above {CV_NOISY_PCT:.0f}%, "
                         f"the results are noisy: {pin}, stop background load and raise --runs "
                         f"(now {', '.join(map(str, runs))})")
    for runner, (before, after) in hot:
        sentences.append(f"{unit.point} {runner}: the hottest thermal zone rose from "
                         f"{before:.1f} to {after:.1f} °C — the device may throttle; let it "
                         "cool between blocks (--sme2-cooldown TEMP_C)")
        figs.append(f"{runner}: thermal {before:.1f} -> {after:.1f} °C")
    return [Recommendation(". ".join(sentences) + ".", "; ".join(figs), "noise")]
