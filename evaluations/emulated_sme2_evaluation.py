"""SME2 on the emulated Arm64 CPU, per model and dtype, in three views of one native binary:
SME2 on (``-cpu max`` as is), masked (SME and SME2 hidden) and SME-only (SME2 hidden). For each:
the ETDump's XNNPACK operator names, the KleidiAI micro-kernels that executed (QEMU trace), the
verdict, the outputs' difference from the SME2-on side, and the wall time. Emulated timings say
nothing about speed; they are printed only as the cost of the emulated session.

    python evaluations/emulated_sme2_evaluation.py [--models toy_cnn,mobilenet_v3_small]
        [--dtypes fp32,fp16,int8,int8_dynamic] [--runs 2] [--out DIR]

Needs `pytest-sme2 setup qemu`.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from _common import comma_list

from pytest_sme2.api import (BenchmarkRun, run_benchmark, check_outputs, QemuDevice,
                             KernelEvidence, OperatorStats, masked_pair, BenchSettings,
                             read_tensors)

VIEWS = ("sme2_on", "sme2_off", "sme_only")


def gemm_like_ops(operators: list[OperatorStats]) -> str:
    """Distinct convolution / fully-connected / matmul operator names, ``#n`` dropped: the
    operators whose datatype shows the KleidiAI (P...) or the plain path."""
    names = {re.sub(r"\s*#\d+$", "", o.name) for o in operators}
    keep = sorted(n for n in names if re.match(r"(Convolution|Fully Connected|Batch Matrix|"
                                               r"Deconvolution)", n))
    return "; ".join(keep) or "-"


def kai_kernels(evidence: KernelEvidence) -> str:
    """The KleidiAI matmul/igemm micro-kernels that executed, shortened to their tail."""
    names = [k.name for k in evidence.executed_kernels
             if k.name.startswith("kai_run_matmul") or "imatmul_clamp" in k.name]
    return ", ".join(n.replace("kai_run_matmul_clamp_", "") for n in names) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="toy_cnn,mobilenet_v3_small")
    ap.add_argument("--dtypes", default="fp32,fp16,int8,int8_dynamic")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="emulated-sme2-"))
    device = QemuDevice("qemu")
    facts = device.facts()
    print(f"device: {facts.model}; SME {facts.sme}, SME2 {facts.sme2}; hwcap2 "
          f"{facts.extra['hwcap2']}")
    runners = {s.name: s.make(print, target=device.target) for s in masked_pair()}
    settings = BenchSettings(runs=args.runs, warmup=1, report_dir=out, timeout_s=1800)
    t_session = time.perf_counter()
    print("| model | dtype | view | GEMM-like operators (ETDump) | KleidiAI matmul kernels "
          "executed | SME2 verdict | max abs / rel diff vs on | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for model in comma_list(args.models):
        for dtype in comma_list(args.dtypes):
            results = {}
            for view in VIEWS:
                t0 = time.perf_counter()
                run = BenchmarkRun(model, dtype, 1, label=f"{model}-{dtype}-{view}",
                                   save_outputs=True)
                results[view] = (run_benchmark(run, runners[view], device, settings),
                                 time.perf_counter() - t0)
            on = read_tensors(Path(results["sme2_on"][0].context.outputs))
            for view in VIEWS:
                r, wall = results[view]
                ev = r.kernel_evidence
                diff = "-"
                if view != "sme2_on":
                    chk = check_outputs(on, read_tensors(Path(r.context.outputs)), dtype)
                    diff = (f"{chk.max_abs_diff:.3g} / {chk.max_rel_diff:.3g} "
                            f"({'ok' if chk.equal else 'BEYOND TOLERANCE'})")
                print(f"| {model} | {dtype} | {view} | {gemm_like_ops(r.operators)} | "
                      f"{kai_kernels(ev)} | {ev.sme2} | {diff} | {wall:.1f} |", flush=True)
    print(f"\nwall time of the emulated session: {time.perf_counter() - t_session:.0f} s "
          f"({args.runs} timed + 1 warm-up run per process, every run traced); artifacts in "
          f"{out}")


if __name__ == "__main__":
    main()
