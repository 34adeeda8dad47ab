"""The history page: one self-contained HTML file (inline SVG, CSS and a little JS; no CDN, works
offline). A regressions/improvements list on top, then one small graph per series: the median
per commit with its block range and unit, change points marked (red), shifts below the minimum
change marked apart (grey), the commits' short hashes on the x axis (first, last, each change)
and on hover over every point (SVG titles: commit, time, device, versions, SME2 verdict).
"What else changed" is the markdown's text (``changepoints.describe``). Filters hide series;
``#model=toy_cnn&dtype=fp32`` in the address applies them on load (links can be shared)."""

from __future__ import annotations

import html
import json

from pytest_sme2.history.changepoints import describe
from pytest_sme2.history.report import HistoryReport, Series
from pytest_sme2.history.report import short as _short

WIDTH, HEIGHT, PAD = 560, 150, 28
FILTERS = ("device", "model", "dtype", "threads", "runner")

_STYLE = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} table{border-collapse:collapse}
td,th{padding:2px 8px;border-bottom:1px solid #ddd}
.reg{color:#b00} .imp{color:#070} .shift{color:#777}
.series{display:inline-block;margin:6px;vertical-align:top}
.series h3{font-size:12px;margin:2px 0} #filters select{margin-right:8px}
svg .band{fill:#9bd;opacity:.45} svg .line{fill:none;stroke:#136;stroke-width:1.2}
svg .cp{stroke:#c00;stroke-dasharray:3 2} svg .small{stroke:#999;stroke-dasharray:1 3}
svg circle{fill:#136;stroke:transparent;stroke-width:8} svg text{font-size:10px}
svg .commit{fill:#555} .unit{font-weight:normal;color:#555}
"""

_SCRIPT = """
window.sme2Errors=[];window.addEventListener('error',e=>{sme2Errors.push(String(e.message));
document.getElementById('errors').textContent=sme2Errors.join('\\n');});
function applyFilters(){
  const want={};for(const s of document.querySelectorAll('#filters select'))
    if(s.value)want[s.name]=s.value;
  let shown=0;
  for(const el of document.querySelectorAll('[data-key]')){
    const ok=Object.entries(want).every(([k,v])=>el.dataset[k]===v);
    el.hidden=!ok; if(ok&&el.classList.contains('series'))shown++;}
  document.getElementById('shown').textContent=shown;
  location.hash=new URLSearchParams(want).toString();
}
function init(){
  const from=new URLSearchParams(location.hash.slice(1));
  for(const s of document.querySelectorAll('#filters select')){
    if(from.get(s.name))s.value=from.get(s.name); s.addEventListener('change',applyFilters);}
  applyFilters();
}
document.addEventListener('DOMContentLoaded',init);
"""


def _attrs(s: Series) -> str:
    return " ".join(f'data-{k}="{html.escape(str(getattr(s, k)))}"' for k in FILTERS) + \
        f' data-key="{s.key_digest}"'


def _svg(s: Series, commits: int) -> str:
    rows = s.rows
    lo = float(rows["low_ms"].min())
    hi = float(rows["high_ms"].max())
    span = (hi - lo) or max(hi * 0.01, 1e-9)

    def x(order: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (order / max(commits - 1, 1))

    def y(ms: float) -> float:
        return HEIGHT - PAD + (PAD * 2 - HEIGHT) * ((ms - lo) / span)

    top = " ".join(f"{x(r.order):.1f},{y(r.high_ms):.1f}" for r in rows.itertuples())
    bottom = " ".join(f"{x(r.order):.1f},{y(r.low_ms):.1f}" for r in reversed(list(
        rows.itertuples())))
    line = " ".join(f"{x(r.order):.1f},{y(r.median_ms):.1f}" for r in rows.itertuples())
    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" class="graph">',
             f'<polygon class="band" points="{top} {bottom}"/>',
             f'<polyline class="line" points="{line}"/>']
    for c in s.change_points:
        cx = x(c.order) - (WIDTH - 2 * PAD) / max(commits - 1, 1) / 2
        parts.append(f'<line class="cp" x1="{cx:.1f}" x2="{cx:.1f}" y1="{PAD / 2}" '
                     f'y2="{HEIGHT - PAD / 2}"><title>{html.escape(_cp_text(c))}</title></line>')
    for c in s.shifts:
        cx = x(c.order) - (WIDTH - 2 * PAD) / max(commits - 1, 1) / 2
        parts.append(f'<line class="small" x1="{cx:.1f}" x2="{cx:.1f}" y1="{PAD / 2}" '
                     f'y2="{HEIGHT - PAD / 2}"><title>{html.escape(_cp_text(c, s))}</title>'
                     f"</line>")
    unit = s.unit
    for r in rows.itertuples():
        tip = (f"commit {_short(r.commit)} ({r.time[:19]}, {r.branch or '?'})\n{s.device}\n"
               f"median {r.median_ms:.4g} {unit} [{r.low_ms:.4g}, {r.high_ms:.4g}], "
               f"{r.sessions} session(s)\nexecutorch {r.executorch or '?'}; "
               f"versions {json.dumps(r.versions or {})}\nSME2 {r.sme2}{gate_text(r.gate)}")
        off = next((o for o in s.off_speed if o.order == r.order), None)
        if off is not None:
            tip += f"\n{off}"
        # A point the gate could not tell, or one the machine's speed made, is drawn hollow:
        # never shown as an ok point.
        hollow = ' fill="none" stroke="currentColor" class="cannot-tell"' \
            if isinstance(r.gate, dict) and r.gate.get("status") == "cannot_tell" else ""
        if off is not None:
            hollow = ' fill="none" stroke="currentColor" class="off-speed"'
        parts.append(f'<circle cx="{x(r.order):.1f}" cy="{y(r.median_ms):.1f}" r="2"{hollow} '
                     f'data-commit="{html.escape(_short(r.commit))}">'
                     f'<title>{html.escape(tip)}</title></circle>')
    # The x axis: the first and last commit and each change's, where they do not overlap.
    labelled: list[float] = []
    marks = [rows.iloc[0], rows.iloc[-1]] + [r for r in rows.itertuples(index=False)
                                             if any(r.order == c.order
                                                    for c in s.change_points)]
    for r in marks:
        at = x(int(r.order))
        if all(abs(at - other) > 62 for other in labelled):
            labelled.append(at)
            anchor = "end" if at > WIDTH - 2 * PAD else "start" if at < 2 * PAD else "middle"
            parts.append(f'<text class="commit" x="{at:.1f}" y="{HEIGHT - 4}" '
                         f'text-anchor="{anchor}">{html.escape(_short(r.commit))}</text>')
    parts.append(f'<text x="2" y="{PAD - 14}">{hi:.4g} {unit}</text>'
                 f'<text x="2" y="{HEIGHT - PAD + 12}">{lo:.4g} {unit}</text></svg>')
    return "".join(parts)


def gate_text(gate: object) -> str:
    """The gate's verdict on a point, for its hover text: ``gate: cannot tell 1.05x [0.97,
    1.19] (40 pairs)``; "" when it was not compared (or recorded before the store kept it)."""
    if not isinstance(gate, dict) or "status" not in gate:
        return ""
    pairs = f" ({gate['pairs']} pairs)" if gate.get("pairs") else ""
    return (f"\ngate: {str(gate['status']).replace('_', ' ')} {gate['ratio']:.2f}x "
            f"[{gate['low']:.2f}, {gate['high']:.2f}]{pairs}")


def _cp_text(c, s: Series | None = None) -> str:
    kind = c.kind if s is None else f"shift below {s.min_change_pct:g}%"
    return (f"{kind} {c.change_pct:+.1f}% [{c.low_pct:+.1f}%, {c.high_pct:+.1f}%] at "
            f"{_short(c.before_commit)}..{_short(c.commit)}\n{describe(c.what_changed)}")


def _options(report: HistoryReport, name: str) -> str:
    values = sorted({str(getattr(s, name)) for s in report.series})
    return "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values)


def _rows(report: HistoryReport, found) -> str:
    by_key = {s.key_digest: s for s in report.series}
    css = {"regression": "reg", "improvement": "imp"}
    return "".join(
        f'<tr {_attrs(by_key[c.key_digest])} class="{css.get(c.kind, "shift")}">'
        f"<td>{html.escape(c.series)}</td><td>{html.escape(_short(c.before_commit))}.."
        f"{html.escape(_short(c.commit))}</td><td>{c.change_pct:+.1f}%</td>"
        f"<td>[{c.low_pct:+.1f}%, {c.high_pct:+.1f}%]</td>"
        f"<td>{html.escape(describe(c.what_changed))}</td></tr>"
        for c in found)


_HEAD = ("<tr><th>series</th><th>commits</th><th>change</th><th>95% interval</th>"
         "<th>what else changed</th></tr>")


def render(report: HistoryReport) -> str:
    cp_rows = _rows(report, report.change_points)
    least = report.min_change_text()
    shifts = (f'<h2>Shifts below {least}</h2><p class="shift">Real (their 95% interval clears '
              f"zero) but smaller than the minimum change: not regressions.</p>"
              f'<table id="shifts">{_HEAD}{_rows(report, report.shifts)}</table>'
              if report.shifts else "")
    filters = "".join(f'<label>{n} <select name="{n}"><option value="">all</option>'
                      f"{_options(report, n)}</select></label>" for n in FILTERS)
    graphs = "".join(f'<div class="series" {_attrs(s)} data-unit="{html.escape(s.unit)}">'
                     f"<h3>{html.escape(s.name)}{' (emulated)' if s.emulated else ''} "
                     f'<span class="unit">median {html.escape(s.unit)} per run; min change '
                     f"{s.min_change_pct:g}%, noise floor {s.noise_floor_pct:.2g}%</span></h3>"
                     f"{_svg(s, len(report.commits))}</div>" for s in report.series)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>pytest-sme2 history</title><style>{_STYLE}</style>"
            f"<script>{_SCRIPT}</script></head><body>"
            f"<h1>Benchmark history: {len(report.series)} series, {len(report.commits)} commits"
            f"</h1><pre id=\"errors\"></pre>"
            f"<h2>Regressions and improvements (at least {least})</h2>"
            f"<table id=\"changes\">{_HEAD}"
            f"{cp_rows or '<tr><td colspan=5>none</td></tr>'}</table>{shifts}"
            f'<h2>Series (<span id="shown">{len(report.series)}</span> shown)</h2>'
            f'<div id="filters">{filters}</div><div id="graphs">{graphs}</div></body></html>')
