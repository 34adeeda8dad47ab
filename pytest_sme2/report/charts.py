"""Charts for the report: where the time goes, one stacked bar per runner of a unit.

matplotlib is imported inside the functions and draws on a bare ``Figure`` (Agg; no pyplot
state, nothing displayed): importing this module costs nothing, and a machine without
matplotlib still gets its markdown report.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

from pytest_sme2.analysis.categories import (CONVOLUTION, DATA_MOVEMENT, ELEMENTWISE, GEMM,
                                             NORMALIZATION, OTHER, POOLING)
from pytest_sme2.report.digest import Side, Unit, category_order

# One colour per category, the same in every chart; compute warm, data movement red.
COLOURS = {CONVOLUTION: "#1f77b4", GEMM: "#ff7f0e", DATA_MOVEMENT: "#d62728",
           ELEMENTWISE: "#2ca02c", POOLING: "#9467bd", NORMALIZATION: "#8c564b",
           OTHER: "#b0b0b0"}
EXTRA_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#aec7e8", "#ffbb78")
LABEL_MIN_SHARE = 5.0       # % of its bar below which a segment gets no text...
LABEL_MIN_HEIGHT = 0.045    # ... nor when shorter than this fraction of the axis (no overlap)


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


def unit_chart(unit: Unit, path: Path) -> Path:
    """Where the time goes in one unit, mean ms per category averaged over each side's blocks:
    base vs candidate for a comparison (its speed-up in the title), else one bar per runner."""
    title = unit.point
    if unit.comparison:
        c = unit.comparison
        sp = c.speedup
        title = (f"{unit.point}: {c.base} → {c.candidate}\nspeed-up {sp.point:.3f}x "
                 f"[{sp.low:.3f}, {sp.high:.3f}] ({sp.confidence:.0%} CI), {c.verdict}")
    roles = ("base", "candidate") if unit.comparison else ()
    return _stacked(unit.sides, title, Path(path), roles)


def _stacked(sides: list[Side], title: str, path: Path, roles: tuple[str, ...] = ()) -> Path:
    # A bare Figure renders with Agg and touches no pyplot state or backend of the caller's.
    from matplotlib.figure import Figure

    cats = category_order(c for s in sides for c in s.categories_ms)
    extra = iter(EXTRA_COLOURS * 4)
    colours = {c: COLOURS.get(c) or next(extra) for c in cats}
    fig = Figure(figsize=(max(5.0, 2.2 * len(sides) + 3.2), 5.0), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    xs = range(len(sides))
    bottoms = [0.0] * len(sides)
    top = max((max(sum(max(v, 0.0) for v in s.categories_ms.values()), 0.0) for s in sides),
              default=0.0)
    for c in cats:
        heights = [max(s.categories_ms.get(c, 0.0), 0.0) for s in sides]
        if not any(heights):
            continue
        ax.bar(xs, heights, 0.55, bottom=bottoms, label=c, color=colours[c],
               edgecolor="white", linewidth=0.6)
        for i, (h, s) in enumerate(zip(heights, sides)):
            share = 100 * h / s.e2e_mean_ms if s.e2e_mean_ms > 0 else 0.0
            if share >= LABEL_MIN_SHARE and h >= LABEL_MIN_HEIGHT * top:
                ax.text(i, bottoms[i] + h / 2, f"{share:.1f}%", ha="center", va="center",
                        fontsize=8, color="white" if c != OTHER else "black")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for i, s in enumerate(sides):
        ax.text(i, bottoms[i] + top * 0.01, f"{s.e2e_mean_ms:.3f} ms", ha="center",
                va="bottom", fontsize=9)
    ax.set_xticks(list(xs), [s.runner + (f"\n({roles[i]})" if i < len(roles) else "")
                             for i, s in enumerate(sides)])
    ax.set_xlabel("runner")
    ax.set_ylabel("ms per inference (mean of timed runs)")
    ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)
    ax.set_title(title, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], title="category", loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    # tight_layout leaves a placeholder layout engine behind, for which savefig draws the whole
    # figure once more before drawing it for real: a third of a chart's time, for nothing.
    fig.set_layout_engine(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
