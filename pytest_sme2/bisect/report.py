"""A bisect's outcome for people: the terminal's closing lines and a markdown report (the JSON
is :meth:`pytest_sme2.bisect.outcome.Outcome.to_json`)."""

from __future__ import annotations

from pytest_sme2.bisect.outcome import FOUND, Culprit, Outcome


def _culprit_lines(c: Culprit) -> list[str]:
    comp = c.compared
    how = "" if comp is None else (f" {comp.word} {comp.interval}, "
                                   f"{comp.evidence}")
    effect = "" if comp is not None and comp.point is None and not comp.pairs else c.effect
    out = [f"culprit {c.commit[:10]} {c.subject!r} ({c.date}) in {c.benchmark}: "
           f"{effect}{how}".replace(":  ", ": ") + f" vs {c.parent[:10]}"]
    if c.in_time is not None:
        t = c.in_time
        out.append(f"  in time: {t.word} {t.interval}, {t.evidence}")
    if c.skipped_before:
        out.append("  or one of the skipped commits before it: "
                   + ", ".join(s[:10] for s in c.skipped_before))
    moved = c.category_changes()
    if moved:
        out.append("  operator categories: " + "; ".join(moved))
    for pin in c.pins:
        out.append(f"  it changes a dependency pin: {pin}")
    return out


def terminal(o: Outcome) -> list[str]:
    lines = [f"bisect: {o.verdict or 'stopped'}"]
    for c in o.culprits:
        lines += _culprit_lines(c)
    lines += [f"not reproducible: {x}" for x in o.flat if o.verdict != FOUND]
    lines += [f"cannot tell where: {x}" for x in o.unresolved]
    lines += [f"skipped {k[:10]}: {v}" for k, v in o.skipped.items()]
    lines.append(f"{len(o.probes)} probe(s), {o.pairs_measured} pair(s) measured, "
                 f"{len(o.reused)} commit(s) reused, {len(o.skipped)} skipped")
    t = o.seconds
    rest = t["wall"] - t["exports"] - t["measuring"]
    lines.append(f"wall {t['wall']:.0f} s: exports {t['exports']:.0f} s, measuring "
                 f"{t['measuring']:.0f} s, the rest {rest:.0f} s")
    return lines


def markdown(o: Outcome) -> str:
    lines = [f"# Bisect {o.good[:10]}..{o.bad[:10]}: {o.verdict or 'stopped'}", ""]
    if o.culprits:
        lines += ["| commit | subject | date | benchmark | effect | interval | pairs |",
                  "|---|---|---|---|---|---|---|"]
        for c in o.culprits:
            comp = c.compared
            lines.append(f"| {c.commit[:10]} | {c.subject} | {c.date} | {c.benchmark} | "
                         f"{c.effect} | {comp.interval if comp else ''} | "
                         f"{comp.pairs if comp else 0} |")
        lines.append("")
        for c in o.culprits:
            extra = _culprit_lines(c)[1:]
            if extra:
                lines += [f"{c.commit[:10]}:", ""] + [f"- {x.strip()}" for x in extra] + [""]
    for x in o.flat if o.verdict != FOUND else []:
        lines.append(f"- not reproducible: {x}")
    for x in o.unresolved:
        lines.append(f"- cannot tell where: {x}")
    lines += ["", "## Probes", "", "| commit | verdict | comparison | interval | pairs |",
              "|---|---|---|---|---|"]
    lines += [f"| {p.commit[:10]} | {p.verdict} | {p.comparison} | {p.interval} | {p.pairs} |"
              for p in o.probes]
    if o.skipped:
        lines += ["", "## Skipped", ""] + [f"- {k[:10]}: {v}" for k, v in o.skipped.items()]
    return "\n".join(lines) + "\n"
