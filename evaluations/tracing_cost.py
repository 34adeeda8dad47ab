"""What operator tracing adds to Method::execute, and what our timed mode still costs.
(Not a unit test: prints figures for docs/outputs.md, "what tracing costs".)

    python evaluations/tracing_cost.py [--rounds 8] [--runs 200] [--generations 20]
        [--python]

Our native runner, one process per setting, the settings alternating ``--rounds`` times (this VM
drifts between processes; each round's pair is a minute apart at most):

- **full tracer**: every execute traced (``--etdump_path``, the ETDump's ``Method::execute``
  events), as every latency was made before timing and tracing were separated;
- **untraced** (our timed mode): no event tracer in the process, each execute timed by the
  runner's clock (``--trace_executions 0``: its summary's ``execute_ms``).

The timed mode *is* the no-tracer build: what it adds over "no tracer at all" is one clock
pair per execute, which the runner measures in its own process (``clock_overhead_ns``, the
median of 2001 back-to-back pairs) and which is printed as a share of the median execute.

Programs: toy_cnn fp32, mobilenet_v3_small fp32 and vit_tiny int8 (per forward), and the decode
step (``--generate 64,32``: the 32 one-token executes after the prompt, per token) of
tiny_llama 8da8w and of ExecuTorch's own Llama at dim 128, 2 layers, 8da8w. With
``--python``, the same pairs through the Python runtime's runner (its untraced forward() less the
bindings' own time, as the benchmarks take it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


from pytest_sme2.api import e2e_per_run, parse_summary, export_model, native_runner, read_etdump
from pytest_sme2.analysis.timing import process_runs

PROGRAMS = (("toy_cnn", "fp32", None), ("mobilenet_v3_small", "fp32", None),
            ("vit_tiny", "int8", None), ("tiny_llama", "8da8w", (64, 32)),
            ("executorch:llama?dim=128&n_layers=2", "8da8w", (64, 32)))


def _decode_only(ms: list[float], generate: tuple[int, int], warmup: int) -> list[float]:
    """The decode steps of the timed generations (one prefill execute, then D steps each)."""
    per = 1 + generate[1]
    return [v for i, v in enumerate(ms) if i // per >= warmup and i % per != 0]


def one_process(binary: Path, pte: Path, folder: Path, traced: bool, runs: int, warmup: int,
                generate: tuple[int, int] | None) -> tuple[float, float | None]:
    """(median ms per execute of the timed runs, the clock pair's cost in ns or None)."""
    etdump = folder / "run.etdump"
    argv = [str(binary), "--model_path", str(pte), "--etdump_path", str(etdump),
            "--num_executions", str(runs), "--warmup", str(warmup), "--cpu_threads", "1"]
    if not traced:
        argv += ["--trace_executions", "0"]
    if generate:
        argv += ["--generate", f"{generate[0]},{generate[1]}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    summary = parse_summary(out)
    if traced:
        ms = e2e_per_run(read_etdump(etdump)).tolist()
    else:
        ms = list(summary.execute_ms)
    if generate:
        timed = _decode_only(ms, generate, warmup)
    else:
        timed = ms[warmup:]
    return statistics.median(timed), summary.clock_overhead_ns


def python_process(pte: Path, folder: Path, traced: bool, runs: int, warmup: int) -> float:
    etdump = folder / "py.etdump"
    argv = [sys.executable, "-m", "pytest_sme2.runners.python_child", "--pte", str(pte),
            "--etdump", str(etdump), "--runs", str(runs), "--warmup", str(warmup)]
    if not traced:
        argv += ["--trace-runs", "10", "--trace-warmup", str(warmup)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    summary = parse_summary(out)
    events = read_etdump(etdump)
    runs_ = process_runs(events, summary, warmup, str(etdump))
    return statistics.median(e2e_per_run(runs_.timed).tolist()[warmup:])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--runs", type=int, default=200, help="forward passes per process")
    p.add_argument("--generations", type=int, default=20, help="generations per LLM process")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--python", action="store_true", help="also the Python runtime's runner")
    p.add_argument("--only", help="programs whose name contains this (default: all)")
    a = p.parse_args()
    binary = native_runner().binary
    rows = []
    with tempfile.TemporaryDirectory(prefix="sme2-tracing-cost-") as tmp:
        folder = Path(tmp)
        for model, dtype, generate in PROGRAMS:
            if a.only and a.only not in model:
                continue
            pte = export_model(model, dtype).pte
            runs = a.generations if generate else a.runs
            full, untraced, clocks = [], [], []
            py_full, py_untraced = [], []
            for _ in range(a.rounds):
                full.append(one_process(binary, pte, folder, True, runs, a.warmup, generate)[0])
                ms, clock = one_process(binary, pte, folder, False, runs, a.warmup, generate)
                untraced.append(ms)
                clocks.append(clock or 0.0)
                if a.python and not generate:
                    py_full.append(python_process(pte, folder, True, runs, a.warmup))
                    py_untraced.append(python_process(pte, folder, False, runs, a.warmup))
            f, u, c = (statistics.median(full), statistics.median(untraced),
                       statistics.median(clocks))
            adds = statistics.median(x / y - 1 for x, y in zip(full, untraced)) * 100
            what = f"{model} {dtype}" + (" decode step" if generate else "")
            row = {"program": what, "full_tracer_us": round(f * 1e3, 1),
                   "untraced_us": round(u * 1e3, 1), "tracing_adds_pct": round(adds, 1),
                   "clock_pair_ns": c, "clock_pair_pct": round(100 * c / (u * 1e6), 3)}
            if py_full:
                row["python_full_tracer_us"] = round(statistics.median(py_full) * 1e3, 1)
                row["python_untraced_us"] = round(statistics.median(py_untraced) * 1e3, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| program | full tracer | untraced (timed mode) | tracing adds | clock pair "
          "(what the timed mode adds over no tracer) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['program']} | {r['full_tracer_us']:,} us | {r['untraced_us']:,} us | "
              f"{r['tracing_adds_pct']:+.1f}% | {r['clock_pair_ns']:.0f} ns = "
              f"{r['clock_pair_pct']:.3f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
