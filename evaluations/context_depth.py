"""Decode and prefill at context depth (llama-bench's ``pp64 @ d2048``, ``tg32 @ d2048``) on the
host, native runner, 1 thread, in both attention forms of the same weights, interleaved. (Not
a unit test: prints a markdown table; docs/measurements/context-depth.md.)

    python evaluations/context_depth.py [--depths 0,512,2048] [--rounds 5] [--generations 10]
        [--custom M.pte --plain M_plain.pte]    # other programs, e.g. the 0.6B-class pair

Programs (the plugin's own exports, cached, unless given): ``executorch:llama?max_context_len=
4096`` 8da8w (tiny_llama's shape with a 4,096-token KV cache: ExecuTorch's custom SDPA, the
default) and the same spec with ``attention=plain`` (aten SDPA over the whole static cache).
Each process times untraced (the runner's clock around each execute), ``--generations`` timed
generations after ``--warmup`` (2) warm-up ones; per process: decode per token = median of the
timed decode executes, prefill = median of the prompt's execute, fill = median of the depth
fill's executes summed per generation (counted apart from every phase). Rounds alternate every
(form, depth) in one order, ``--rounds`` times (this VM drifts between processes); the table
gives medians over rounds, each depth's decode per token relative to depth 0 of the same form
(median over rounds of the per-round ratio), and the growth of decode per token per 1,000
tokens of depth (the slope from depth 0 to that depth, ms and % of depth 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_sme2.api import Generation, RunRequest, export_model, native_runner, parse_summary

CUSTOM = "executorch:llama?max_context_len=4096"
PLAIN = CUSTOM + "&attention=plain"
FORMS = ("custom SDPA", "plain")


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def one_process(pte: Path, gen: Generation, runs: int, warmup: int, tmp: Path) -> dict:
    """One untraced native process: its decode per token, prefill and fill medians (ms)."""
    req = RunRequest(pte, tmp / "x.etdump", threads=1, runs=runs, warmup=warmup,
                     generation=gen, untraced=True, trace_runs=0)
    done = subprocess.run(native_runner().command(req), capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{pte.name} {gen.arg}: {done.stderr.strip()[-500:]}")
    s = parse_summary(done.stdout)
    g = s.generation
    per = g.executes_per_generation
    gens = [s.execute_ms[i * per:(i + 1) * per] for i in range(g.warmup, g.generations)]
    fill = [sum(x[:g.depth_executes]) for x in gens]
    prefill = [sum(x[g.depth_executes:g.depth_executes + g.prefill_executes]) for x in gens]
    decode = [t for x in gens for t in x[g.depth_executes + g.prefill_executes:]]
    return {"decode_ms": statistics.median(decode), "prefill_ms": statistics.median(prefill),
            "fill_ms": statistics.median(fill), "fill_executes": g.depth_executes,
            "context": g.max_context_len}


def table(got: dict, prompt: int, new: int) -> list[str]:
    out = ["| attention | KV cache | test | prefill ms | pp tok/s | decode ms/token | tg tok/s "
           "| decode vs depth 0 | growth per 1,000 tokens of depth | fill ms (executes) |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (form, depth), rows in got.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        base = got.get((form, 0))
        ratio = growth = "—"
        if depth and base:
            ratios = [r["decode_ms"] / b["decode_ms"] for r, b in zip(rows, base)]
            ratio = f"{statistics.median(ratios):.3f}x"
            d0 = statistics.median(b["decode_ms"] for b in base)
            slope = (med["decode_ms"] - d0) / (depth / 1000)
            growth = f"{slope:+.4f} ms ({100 * slope / d0:+.1f}%)"
        at = f" @ d{depth}" if depth else ""
        out.append(f"| {form} | {rows[0]['context']:,} | pp{prompt}{at}, tg{new}{at} | "
                   f"{med['prefill_ms']:.3f} | {prompt / med['prefill_ms'] * 1e3:,.0f} | "
                   f"{med['decode_ms']:.4f} | {1e3 / med['decode_ms']:,.1f} | {ratio} | "
                   f"{growth} | {med['fill_ms']:.1f} ({rows[0]['fill_executes']}) |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="0,512,2048")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--generations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="warm-up generations per process")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--custom", help="a custom-SDPA .pte (default: the spec above, 8da8w)")
    ap.add_argument("--plain", help="its plain-attention twin .pte (either alone: that form)")
    a = ap.parse_args()
    depths = [int(d) for d in a.depths.split(",")]
    if a.custom or a.plain:     # given programs: the forms given
        programs = {form: Path(p) for form, p in zip(FORMS, (a.custom, a.plain)) if p}
    else:
        programs = {FORMS[0]: export_model(CUSTOM, "8da8w").pte,
                    FORMS[1]: export_model(PLAIN, "8da8w").pte}
    got: dict[tuple, list[dict]] = {(f, d): [] for f in programs for d in depths}
    print(f"load average at the start: {load()}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            for form, depth in got:
                got[(form, depth)].append(one_process(
                    programs[form], Generation(a.prompt, a.new, depth), a.generations,
                    a.warmup, Path(tmp)))
            print(f"round {k + 1} of {a.rounds} done, load {load()}", file=sys.stderr)
    print(f"load average at the end: {load()}")
    print("\n".join(table(got, a.prompt, a.new)))


if __name__ == "__main__":
    main()
