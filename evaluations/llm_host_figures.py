"""Host figures of an LLM generation, per runner and phase (Not a unit test: prints figures.)

    python evaluations/llm_host_figures.py [--pte M.pte ...] [--prompt 64] [--new 32]
        [--runs 20] [--warmup 3] [--threads 1]

Each .pte (default: the tiny 8da4w Llama from ExecuTorch's export_llama, tests/llm_export.py)
runs one process per runner (native: the C++ token loop; python: the runtime's loop), then the
generation analysis of its ETDump: prefill and decode tokens/s, the decode per-token median,
p90 and CV, TTFT, and the GEMM share of each phase; and whether the runners' tokens agree.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from _common import generation_parser, tiny_llama_pte



def main() -> None:
    a = generation_parser(64, 32, 3, several=True, runs=20, threads=1).parse_args()

    from pytest_sme2.api import (analyze_generation_file, Generation, RunRequest, native_runner,
                                 PythonRunner)

    ptes = a.pte or [tiny_llama_pte(None)]
    runners = {"native": native_runner(), "python": PythonRunner(fork=False)}
    g = Generation(a.prompt, a.new)
    print(f"generation {g.arg} (prompt, new tokens), {a.runs} timed + {a.warmup} warm-up "
          f"generations, {a.threads} thread(s)")
    for pte in ptes:
        print(f"== {pte}")
        tokens = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, runner in runners.items():
                req = RunRequest(pte, Path(tmp) / f"{name}.etdump", threads=a.threads,
                                 runs=a.runs, warmup=a.warmup, generation=g)
                done = subprocess.run(runner.command(req), capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{name}: {done.stderr.strip().splitlines()[-1]}")
                    continue
                r = analyze_generation_file(req.etdump, done.stdout)
                tokens[name] = r.tokens
                pre, dec = r.prefill, r.decode
                gemm = {ph.phase: 100 * ph.categories_ms.get("GEMM", 0) / ph.median_ms
                        for ph in (pre, dec) if ph.median_ms}
                print(f"{name:>7}: prefill {pre.tokens_per_s:8.0f} tok/s ({pre.median_ms:.3f} ms,"
                      f" CV {pre.cv_pct:.1f}%, GEMM {gemm.get('prefill', 0):.0f}%)  decode "
                      f"{dec.tokens_per_s:6.0f} tok/s (per token median {dec.token_median_ms:.3f}"
                      f" ms, p90 {dec.token_p90_ms:.3f}, CV {dec.token_cv_pct:.1f}%, GEMM "
                      f"{gemm.get('decode', 0):.0f}%)  TTFT {r.ttft_ms:.3f} ms")
        if len(tokens) == 2:
            same = tokens["native"] == tokens["python"]
            print(f"tokens native == python: {same} ({tokens['native'][:8]}...)")


if __name__ == "__main__":
    main()
