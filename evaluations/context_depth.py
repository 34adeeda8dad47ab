"""Decode and prefill at context depth (llama-bench's ``pp64 @ d512``, ``tg32 @ d512``) on the
host, both runners, interleaved. (Not a unit test: prints a markdown table.)

    python evaluations/context_depth.py [--depths 0,512] [--rounds 5] [--generations 20]

Programs (the plugin's own exports, cached): ``executorch:llama?max_context_len=1024`` 8da8w
(tiny_llama's shape with a 1024-token KV cache, so that 512 + 64 + 32 fit) at each depth, and,
for contrast, ``tiny_llama`` 8da8w (a 128-token cache) at depth 0. Each process times untraced
(the runner's clock around each execute), 1 thread, ``--generations`` timed generations after
3 warm-up ones; per process: decode per token = median of the timed decode executes, prefill =
median of the prompt's execute, fill = median of the depth fill's executes summed per
generation (untimed by the generation's own figures, counted here apart). Rounds alternate every
(runner, program, depth) in one order, ``--rounds`` times (this VM drifts between processes);
the table gives the median over rounds and each depth's decode per token relative to depth 0 of
the same runner and program (median over rounds of the per-round ratio).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_sme2.api import (Generation, PythonRunner, RunRequest, export_model, native_runner,
                             parse_summary)

DEEP = "executorch:llama?max_context_len=1024"
SHALLOW = "tiny_llama"


def _argv(runner: str, req: RunRequest) -> list[str]:
    if runner == "native":
        return native_runner().command(req)
    return [sys.executable, "-m", "pytest_sme2.runners.python_child",
            *PythonRunner(fork=False).child_args(req)]


def one_process(runner: str, pte: Path, gen: Generation, runs: int, tmp: Path) -> dict:
    """One untraced process: its decode per token, prefill and fill medians (ms)."""
    req = RunRequest(pte, tmp / "x.etdump", threads=1, runs=runs, warmup=3, generation=gen,
                     untraced=True, trace_runs=0)
    done = subprocess.run(_argv(runner, req), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{runner} {pte.name} {gen.arg}: {done.stderr.strip()[-500:]}")
    s = parse_summary(done.stdout)
    g = s.generation
    per = g.executes_per_generation
    gens = [s.execute_ms[i * per:(i + 1) * per] for i in range(g.warmup, g.generations)]
    fill = [sum(x[:g.depth_executes]) for x in gens]
    prefill = [sum(x[g.depth_executes:g.depth_executes + g.prefill_executes]) for x in gens]
    decode = [t for x in gens for t in x[g.depth_executes + g.prefill_executes:]]
    return {"decode_ms": statistics.median(decode), "prefill_ms": statistics.median(prefill),
            "fill_ms": statistics.median(fill), "fill_executes": g.depth_executes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="0,512")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    a = ap.parse_args()
    depths = [int(d) for d in a.depths.split(",")]
    deep = export_model(DEEP, "8da8w").pte
    shallow = export_model(SHALLOW, "8da8w").pte
    points = [(r, "1024", deep, d) for r in ("native", "python") for d in depths]
    points += [(r, "128", shallow, 0) for r in ("native", "python")]
    got: dict[tuple, list[dict]] = {p[:2] + p[3:]: [] for p in points}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            for runner, ctx, pte, depth in points:
                got[(runner, ctx, depth)].append(
                    one_process(runner, pte, Generation(a.prompt, a.new, depth), a.generations,
                                Path(tmp)))
            print(f"round {k + 1} of {a.rounds} done", file=sys.stderr)
    print(f"load average at the end: {os.getloadavg()}")
    print("| runner | KV cache (max_context_len) | test | prefill ms | pp tok/s | prefill vs "
          "depth 0 | decode ms/token | tg tok/s | decode vs depth 0 | fill ms (executes) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for (runner, ctx, depth), rows in got.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        base = got.get((runner, ctx, 0))
        def vs_depth_0(key: str, depth=depth, base=base, rows=rows) -> str:
            if not depth or not base:
                return "—"
            return f"{statistics.median(r[key] / b[key] for r, b in zip(rows, base)):.3f}x"

        at = f" @ d{depth}" if depth else ""
        print(f"| {runner} | {ctx} | pp{a.prompt}{at}, tg{a.new}{at} | {med['prefill_ms']:.3f} "
              f"| {a.prompt / med['prefill_ms'] * 1e3:,.0f} | {vs_depth_0('prefill_ms')} | "
              f"{med['decode_ms']:.4f} | {1e3 / med['decode_ms']:,.0f} | "
              f"{vs_depth_0('decode_ms')} | {med['fill_ms']:.3f} ({rows[0]['fill_executes']}) |")


if __name__ == "__main__":
    main()
