"""Findings about the runtime around the kernels: framework overhead, and noise (runs that
vary, a device that heats up)."""

from __future__ import annotations


from pytest_sme2 import units
from pytest_sme2.devices.kinds import ANDROID
from pytest_sme2.report.digest import CV_NOISY_PCT, Unit, finite
from pytest_sme2.report.grouping import Side
from pytest_sme2.report.recommend.advice import OVERHEAD_PCT, SMALL_MODEL_MS, THERMAL_RISE_C
from pytest_sme2.report.recommend.wording import (Recommendation, by_model, cases_text, focus_sides,
                                                  named_unit, where_label)


def find_overhead(us: list[Unit]) -> list[Recommendation]:
    groups, _ = by_model(us)
    out = []
    for group in groups:
        found = []
        for unit in group:
            for side in focus_sides(unit):
                o = side.overheads_ms
                total = sum(v for v in o.values() if finite(v))
                if side.breakdown_ms > 0 and 100 * total / side.breakdown_ms >= OVERHEAD_PCT:
                    found.append((100 * total / side.breakdown_ms, total, unit, side))
        if found:
            out.append(_overhead_recommendation(found))
    return out


def _overhead_recommendation(found: list[tuple[float, float, Unit, Side]]) -> Recommendation:
    def fig(pct, total, unit, side):
        o = side.overheads_ms
        return (f"overhead {units.ms(total)} ms = {units.share(pct)} of "
                f"{units.ms(side.breakdown_ms)} ms E2E "
                f"(delegate {units.ms(o.get('delegate_ms', 0))}, operator calls "
                f"{units.ms(o.get('operator_call_ms', 0))}, "
                f"runtime {units.ms(o.get('runtime_ms', 0))})")

    fastest = min(side.breakdown_ms for _, _, _, side in found)
    small = (f"; at {units.ms(fastest)} ms per inference it also bounds any speed-up"
             if fastest < SMALL_MODEL_MS else "")
    advice = ("every delegate and portable operator call costs a fixed time, so fewer "
              "partitions (no portable operators between delegated ones) pay it fewer times"
              f"{small}.")
    if len(found) == 1:
        pct, _, unit, side = found[0]
        return Recommendation(f"Framework overhead is {units.share(pct)} of E2E on "
                              f"{where_label(unit, side)}: {advice}", fig(*found[0]), "overhead")
    found = sorted(found, key=lambda f: -f[0])
    pct, _, unit, side = found[0]
    text = (f"Framework overhead is {units.share_range([f[0] for f in found])} of E2E in "
            f"{cases_text(where_label(f[2], f[3]) for f in found)} of {unit.model} "
            f"(most: {units.share(pct)} on "
            f"{where_label(unit, side)}): {advice}")
    return Recommendation(text, "; ".join(f"{fig(*f)} on {where_label(f[2], f[3])}" for f in found),
                          "overhead")




# An ETDump compared offline (``pytest-sme2 compare``) is a side of this runner kind; its runs
# are what the ETDump holds, set by the option its label names (the record beside it).
ETDUMP_RUNNER_KIND = "etdump"
RUNS_OPTION_LABEL = "runs_option"


def _more_runs(sides: list[Side], runs: set[int]) -> str:
    """The remedy's last words: the option that really changes the runs the noisy sides hold
    (a session's --runs; an offline ETDump's, the option that wrote it)."""
    now = ", ".join(map(str, sorted(runs)))
    offline = [s for s in sides if s.info.kind == ETDUMP_RUNNER_KIND]
    if not offline:
        return f"raise --runs (now {now})"
    options = sorted({s.labels.get(RUNS_OPTION_LABEL, "") for s in offline} - {""})
    if options:
        return (f"raise the measured runs the ETDumps hold (now {now}: {' / '.join(options)} "
                "where they were written)")
    return (f"raise the runs the ETDumps hold (now {now}: --sme2-trace-runs in the pytest-sme2 "
            "session that wrote them, --runs of `pytest-sme2 run`)")


def find_noise(us: list[Unit]) -> list[Recommendation]:
    """One recommendation for every noisy benchmark of the session (the remedy is the same),
    each named with its worst CV; and each benchmark that heated its device."""
    noisy, heat, android, runs, sides = [], [], False, set(), []
    for unit in us:
        parts, figs = [], []
        for side in unit.sides:
            cvs = [(b.e2e.cv_pct, b.e2e.outliers) for b in side.blocks if finite(b.e2e.cv_pct)]
            high = [c for c in cvs if c[0] > CV_NOISY_PCT]
            if high:
                worst = max(c[0] for c in high)
                outliers = sum(c[1] for c in high)
                blocks = f" in {len(high)} of {len(cvs)} blocks" if len(cvs) > 1 else ""
                parts.append(f"{side.runner} CV {units.percent(worst)}%{blocks}"
                             + (f" ({outliers} outlier run{'' if outliers == 1 else 's'})"
                                if outliers else ""))
                figs.append(f"{side.runner}: max CV {units.percent(worst)}%{blocks}")
                android = android or side.device.kind == ANDROID.name
        if parts:
            noisy.append((unit, parts, figs))
            runs |= {s.runs for s in unit.sides if s.runs}
            sides += unit.sides
        for s in unit.sides:
            h = s.thermal()
            if h is not None and h[1] - h[0] >= THERMAL_RISE_C:
                heat.append((unit, s.runner, h))
    out = []
    if noisy:
        pin = ("pin the benchmark to the big cores (--sme2-taskset)" if android
               else "pin the benchmark to fixed cores (taskset -c)")
        remedy = (f"CV above {CV_NOISY_PCT:.0f}%, the results are noisy: {pin}, stop "
                  f"background load and {_more_runs(sides, runs)}")
        if len(noisy) == 1:
            unit, parts, figs = noisy[0]
            text = f"{unit.point}: {'; '.join(parts)} — {remedy}."
            evidence = "; ".join(figs)
        else:
            text = (f"{len(noisy)} benchmarks are noisy ("
                    + "; ".join(f"{named_unit(u)}: {', '.join(p)}" for u, p, _ in noisy)
                    + f") — {remedy}.")
            evidence = "; ".join(f"{named_unit(u)} {f}" for u, _, figs in noisy for f in figs)
        out.append(Recommendation(text, evidence, "noise"))
    for unit, runner, (before, after) in heat:
        out.append(Recommendation(
            f"{unit.point} {runner}: the hottest thermal zone rose from {before:.1f} to "
            f"{after:.1f} °C — the device may throttle; let it cool between blocks "
            "(--sme2-cooldown TEMP_C).", f"{runner}: thermal {before:.1f} -> {after:.1f} °C",
            "noise"))
    return out
