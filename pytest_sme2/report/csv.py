"""Seed-compatible CSV files, for tools and spreadsheets built around the original kit.

``<stem>_all_runs_timeline.csv``  every profiling event: ``block, block_name, run, seq, name,
    instruction_id, delegate_debug_id, delegated, start, end, duration_ms, leaf, category,
    backend, [op_types, module_path,] warmup`` (``run`` -1 = load/init block; ``warmup`` True for
    discarded runs; op_types and module_path, from the .etrecord when given, for portable
    kernels and whole DELEGATE_CALLs).
``<stem>_ops_stats.csv``  one row per operator (name + instruction): ``name, op, instruction_id,
    category, delegated, backend, calls_per_run, mean_ms_per_run, pct_e2e, bottleneck,
    should_delegate, op_types, module_paths`` (means over timed runs).
``kernels.csv``  ``name, kind, isa, isa_family, sme2`` from an xnntrace log (empty without one);
    with a kernel trace, the kernels that *executed* instead, with ``library, blocks,
    streaming_blocks`` added and ``kind`` giving their origin (kleidiai, xnnpack, other).
"""

from __future__ import annotations

from pathlib import Path

from pytest_sme2.analysis.kernel_trace import executed_frame
from pytest_sme2.analysis.kernels import kernels_frame
from pytest_sme2.analysis.summary import Analysis


def write_csvs(analysis: Analysis, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    timeline = analysis.events.copy()
    timeline["warmup"] = (timeline["run"] >= 0) & (timeline["run"] < analysis.warmup)
    ops = analysis.operators.copy()
    for col in ("op_types", "module_paths"):
        ops[col] = ops[col].map(lambda v: ";".join(v))
    paths = [out_dir / f"{stem}_all_runs_timeline.csv", out_dir / f"{stem}_ops_stats.csv",
             out_dir / "kernels.csv"]
    timeline.to_csv(paths[0], index=False)
    ops.to_csv(paths[1], index=False)
    ev = analysis.evidence
    # Executed kernels are the stronger evidence; a trace that named none still replaces the
    # xnntrace rows (an empty table with the executed columns says "traced, none named").
    kernels = executed_frame(ev.executed) if ev.streaming_blocks is not None \
        else kernels_frame(ev.kernels)
    kernels.to_csv(paths[2], index=False)
    return paths
