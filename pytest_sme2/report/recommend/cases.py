"""Rules about one case (a benchmark or a comparison): outputs that differ, a comparison
that went the wrong way or nowhere, low compute speed-ups, unclassified operators, weak kernel
evidence."""

from __future__ import annotations


from pytest_sme2 import units
from pytest_sme2.analysis.categories import CONVOLUTION, GEMM, OTHER
from pytest_sme2.stats import FASTER, SLOWER
from pytest_sme2.report.digest import Unit
from pytest_sme2.results import DeviceFacts
from pytest_sme2.report.recommend.advice import (COMPUTE_SHARE_PCT, LOW_COMPUTE_SPEEDUP, MAX_PATHS,
                                                 OTHER_OPS_PCT)
from pytest_sme2.report.recommend.wording import Recommendation, focus_sides, where_label, yes_no


def find_outputs(unit: Unit) -> list[Recommendation]:
    out = unit.comparison.outputs if unit.comparison else None
    if not out or out.equal:
        return []
    fig = f"max |Δ| {out.max_abs_diff:.3g} > tolerance {out.tolerance:.3g}"
    return [Recommendation(
        f"Outputs of {unit.candidate.runner} differ from {unit.base.runner} on {unit.point} "
        f"({fig}): the two runners do not compute the same thing, so the speed-up is not like "
        "for like — find the diverging operator before trusting it.", fig, "outputs")]


def find_direction(unit: Unit) -> list[Recommendation]:
    """Comparisons that came out slower, or no different on an SME2 comparison."""
    c = unit.comparison
    if not c or unit.speedup is None:
        return []
    base, cand = unit.base, unit.candidate
    sp = unit.speedup
    fig = f"speed-up {units.ratio_interval(sp)} ({c.verdict})"
    device = cand.device or base.device or DeviceFacts()
    labels = ", ".join(f"{k}={v}" for k, v in sorted(cand.labels.items())) or "none recorded"
    if unit.is_sme2() and c.verdict not in (FASTER, SLOWER):
        if device.sme2 is False:
            text = (f"{cand.runner} vs {base.runner} on {unit.point}: {fig}. The device reports "
                    f"no SME2 ({device.cpu or 'unknown CPU'}, {device.abi or '?'}), "
                    "so SME2 kernels cannot run there: run this comparison on an SME2 device.")
        else:
            text = (f"{cand.runner} vs {base.runner} on {unit.point}: {fig} on an SME2 "
                    f"comparison — check {cand.runner}'s build flags (labels: {labels}) and the "
                    f"device's SME2 capability (hwcaps SME2: {yes_no(device.sme2)}); "
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




def find_low_compute_speedup(unit: Unit) -> list[Recommendation]:
    if not unit.is_sme2() or unit.comparison.verdict == SLOWER or not unit.base.blocks:
        return []
    out = []
    for cat in (CONVOLUTION, GEMM):
        iv = unit.category_speedup(cat)
        share = unit.base.share(cat)
        if iv is None or share < COMPUTE_SHARE_PCT or iv.point >= LOW_COMPUTE_SPEEDUP:
            continue
        fig = (f"{cat} speed-up {units.ratio_interval(iv)}, {units.share(share)} of E2E "
               f"on {unit.base.runner}")
        ev = unit.candidate.verdict or "unknown"
        out.append(Recommendation(
            f"{cat} is {units.share(share)} of E2E on {unit.point} {unit.base.runner} but only "
            f"{units.ratio_interval(iv)} faster on {unit.candidate.runner} (GEMM and "
            "convolution typically gain "
            f"3-15x from SME2): check that these operators are delegated, that the dtype takes "
            f"KleidiAI packed paths, and the kernel evidence (here '{ev}').", fig,
            "low-compute-speedup"))
    return out




def find_other_ops(unit: Unit) -> list[Recommendation]:
    out = []
    for side in focus_sides(unit):
        ops = [o for o in side.operators if o.category == OTHER]
        pct = sum(o.pct_e2e for o in ops)
        if pct < OTHER_OPS_PCT:
            continue
        names = ", ".join(f"`{o.name}`" for o in ops[:MAX_PATHS])
        out.append(Recommendation(
            f"Operators outside the category taxonomy take {units.share(pct)} of E2E on "
            f"{where_label(unit, side)} ({names}): add a category rule for them so the breakdown "
            "and speed-ups account for them.",
            f"uncategorised operators {units.share(pct)} of E2E",
            "other-ops"))
    return out


def find_evidence(unit: Unit) -> list[Recommendation]:
    """Weak evidence where SME2 matters: the candidate of an SME2 comparison, or a benchmark on
    a device that reports SME2."""
    if unit.is_sme2():
        sides = [unit.candidate]
    elif unit.comparison:
        sides = []
    else:
        sides = [s for s in unit.sides if s.blocks and s.device.sme2 is True]
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
            f"Kernel evidence on {where_label(unit, side)} is '{ev}' ({what}): to see which "
            "micro-kernels ran, use a runner whose XNNPACK logs kernel selection (log level >= "
            "4) and pass the log to `pytest-sme2 analyze --xnntrace`.",
            f"kernel evidence '{ev}': {side.evidence.reason}", "evidence"))
    return out
