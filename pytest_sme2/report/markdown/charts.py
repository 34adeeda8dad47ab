"""Charts for the report: the whole matrix in one overview figure, and where the time goes
in one stacked-bar figure per model.

matplotlib is imported inside the functions and draws on a bare ``Figure`` (Agg; no pyplot
state, nothing displayed): importing this module costs nothing, and a machine without
matplotlib still gets its markdown report.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pytest_sme2 import units
from pytest_sme2.analysis.categories import (CONVOLUTION, DATA_MOVEMENT, ELEMENTWISE, GEMM,
                                             NORMALIZATION, OTHER, POOLING)
from pytest_sme2.stats import FASTER, SLOWER
from pytest_sme2.units import COMPACT_RATIO_DIGITS
from pytest_sme2.report.digest import Unit, by_model, category_order
from pytest_sme2.report.grouping import Side

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# One colour per category, the same in every chart; compute warm, data movement red.
COLOURS = {CONVOLUTION: "#1f77b4", GEMM: "#ff7f0e", DATA_MOVEMENT: "#d62728",
           ELEMENTWISE: "#2ca02c", POOLING: "#9467bd", NORMALIZATION: "#8c564b",
           OTHER: "#b0b0b0"}
EXTRA_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#aec7e8", "#ffbb78")
LABEL_MIN_SHARE = 5.0       # % of E2E below which a segment gets no text (no overlap)


JOBS_PER_PROCESS = 2         # a fork costs milliseconds, a chart ~0.1 s: share out pairs


def render_all(jobs: list[Callable[[], Any]], processes: int | None = None) -> None:
    """Run chart jobs, shared out among forked copies of this process when there are spare
    cores: a chart costs ~0.1 s of matplotlib, a session draws one per benchmark, and nothing is
    being measured any more when the report is drawn. A share whose process failed is drawn again
    here, so its error surfaces as in one process. Import matplotlib before calling, so the
    copies inherit it."""
    n = processes or _processes(len(jobs))
    children: dict[int, int] = {}
    try:
        for k in range(1, n):
            pid = os.fork()
            if pid == 0:  # the copy: its share, then out without the parent's exit handlers
                status = 1
                try:
                    for job in jobs[k::n]:
                        job()
                    status = 0
                finally:
                    os._exit(status)
            children[pid] = k
        for job in jobs[0::n]:
            job()
    finally:
        failed = [k for pid, k in children.items() if os.waitpid(pid, 0)[1] != 0]
    for k in failed:
        for job in jobs[k::n]:
            job()


def _processes(jobs: int) -> int:
    # Forking a process with other threads can copy a lock some thread holds: draw alone then.
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    return max(1, min(cores, jobs // JOBS_PER_PROCESS))


VERDICT_COLOURS = {FASTER: "#2ca02c", SLOWER: "#d62728"}    # anything else: grey
RUNNER_COLOURS = ("#4c72b0", "#dd8452", "#8172b3", "#937860", "#da8bc3", "#64b5cd",
                  "#8c8c8c", "#ccb974")  # no green or red: those are verdicts


@dataclass(frozen=True)
class Bar:
    """One side of one unit, as a bar: its label under the axis and, for a comparison's
    candidate, the speed-up it is annotated with."""

    unit: Unit
    side: Side
    role: str = ""          # "base" / "candidate" in a comparison, else ""

    @property
    def case(self) -> str:
        return f"{self.unit.dtype} t{self.unit.threads}"

    @property
    def label(self) -> str:
        return f"{self.case} {self.side.runner}" + (f" ({self.role})" if self.role else "")


def bars(us: list[Unit]) -> list[Bar]:
    """Every measured side of ``us``, in order; a comparison's base then candidate."""
    out = []
    for u in us:
        for i, s in enumerate(u.sides):
            if s.latency:
                out.append(Bar(u, s, ("base", "candidate")[min(i, 1)] if u.comparison else ""))
    return out


def overview_chart(us: list[Unit], path: Path) -> Path:
    return _save(overview_figure(us), Path(path))


def overview_figure(us: list[Unit]) -> Figure:
    """The whole matrix in one figure: a panel per model (each on its own ms scale: models
    differ by orders of magnitude), a bar per (dtype, threads, runner), its length the median
    of block medians. A comparison's two bars sit together, the candidate's annotated with its
    speed-up, 95% CI and verdict (green faster, red slower); emulated ones get no speed-up."""
    from matplotlib.figure import Figure  # matplotlib: only overview_figure() needs it

    panels = [(model, bars(mu)) for model, mu in by_model(us).items()]
    panels = [(m, bs) for m, bs in panels if bs]
    runner_names = list(dict.fromkeys(b.side.runner for _, bs in panels for b in bs))
    colour = {r: RUNNER_COLOURS[i % len(RUNNER_COLOURS)] for i, r in enumerate(runner_names)}
    heights = [0.3 * len(bs) + 0.9 for _, bs in panels]
    fig = Figure(figsize=(10.0, sum(heights) + 0.6), dpi=100)
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, (model, bs) in zip(axes, panels):
        ys = _positions([b.case for b in bs])
        medians = [b.side.latency.median_ms for b in bs]
        ax.barh(ys, medians, 0.8, color=[colour[b.side.runner] for b in bs])
        top = max(medians) or 1.0
        for yi, b, ms in zip(ys, bs, medians):
            value = ax.text(ms + top * 0.01, yi, f"{_ms(ms)} ms", va="center", fontsize=8)
            c = b.unit.comparison
            if b.role == "candidate" and c:
                if b.unit.emulated:
                    text, tone = "emulated: not a speed", "#666666"
                else:
                    sp = c.speedup
                    text = f"{units.ratio_interval(sp, COMPACT_RATIO_DIGITS)} {c.verdict}"
                    tone = VERDICT_COLOURS.get(c.verdict, "#666666")
                # right after the value's own text, however wide that came out
                ax.annotate(text, xy=(1.0, 0.5), xycoords=value, xytext=(6, 0),
                            textcoords="offset points", va="center", fontsize=8, color=tone,
                            fontweight="bold" if tone != "#666666" else "normal")
        ax.set_yticks(ys, [b.label for b in bs], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.6)
        emulated = any(b.unit.emulated for b in bs)
        ax.set_title(model + (" (emulated CPU: times say nothing about speed)" if emulated
                              else ""), fontsize=10, loc="left")
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(axis="x", labelsize=8)
    axes[-1].set_xlabel("Method::execute ms (median of block medians); shorter is faster")
    fig.tight_layout()
    return fig


def _positions(cases: list[str]) -> list[float]:
    """Bar positions: a gap between cases (dtype, threads), none within one."""
    out: list[float] = []
    for i, case in enumerate(cases):
        out.append(0.0 if not out else out[-1] + (1.0 if case == cases[i - 1] else 1.5))
    return out


def _ms(v: float) -> str:
    """Milliseconds to about four significant figures: 0.057, 4.066, 39.01, 9261."""
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 \
        else f"{v:.0f}"


def model_chart(model: str, us: list[Unit], path: Path) -> Path:
    return _save(model_figure(model, us), Path(path))


def model_figure(model: str, us: list[Unit]) -> Figure:
    """Where the time goes in one model: a bar per (dtype, threads, runner), stacked by
    category as % of its E2E (the cases of a model differ several-fold in ms, and a share reads
    the same at any size), its mean ms on top; comparisons' base and candidate side by side."""
    # A bare Figure renders with Agg and touches no pyplot state or backend of the caller's.
    from matplotlib.figure import Figure  # matplotlib: only model_figure() needs it

    bs = [b for b in bars(us) if b.side.categories_ms and b.side.breakdown_ms > 0]
    sides = [b.side for b in bs]
    cats = category_order(c for s in sides for c in s.categories_ms)
    extra = iter(EXTRA_COLOURS * 4)
    colours = {c: COLOURS.get(c) or next(extra) for c in cats}
    fig = Figure(figsize=(max(5.0, 0.8 * len(sides) + 3.2), 4.6), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    xs = _positions([b.case for b in bs])
    bottoms = [0.0] * len(sides)
    for c in cats:
        shares = [100 * max(s.categories_ms.get(c, 0.0), 0.0) / s.breakdown_ms for s in sides]
        if not any(shares):
            continue
        ax.bar(xs, shares, 0.7, bottom=bottoms, label=c, color=colours[c],
               edgecolor="white", linewidth=0.6)
        for i, share in enumerate(shares):
            if share >= LABEL_MIN_SHARE:
                ax.text(xs[i], bottoms[i] + share / 2, units.share(share, 0), ha="center",
                        va="center", fontsize=7, color="white" if c != OTHER else "black")
        bottoms = [b + h for b, h in zip(bottoms, shares)]
    for i, s in enumerate(sides):
        ax.text(xs[i], max(bottoms[i], 100.0) + 1.0, f"{_ms(s.breakdown_ms)} ms", ha="center",
                va="bottom", fontsize=7)
    ax.set_xticks(xs, [b.case + "\n" + b.side.runner + (f"\n({b.role})" if b.role else "")
                             for b in bs], fontsize=7)
    ax.set_ylabel("% of E2E (mean ms per inference on top)")
    ax.set_ylim(0, max(bottoms + [100.0]) * 1.08)
    ax.set_title(f"{model}: where the time goes", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], title="category", loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def _save(fig: Figure, path: Path) -> Path:
    # tight_layout leaves a placeholder layout engine behind, for which savefig draws the whole
    # figure once more before drawing it for real: a third of a chart's time, for nothing.
    fig.set_layout_engine(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
