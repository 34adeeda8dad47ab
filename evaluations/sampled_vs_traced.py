"""Sampling checked against the truth: on the emulated SME2 CPU (``--device qemu``) one process
per case is traced (every block QEMU translated: what certainly executed) and sampled (what a
phone can see) at once; the sampled micro-kernels must be a subset of the traced ones, with
SME2 kernels sampled on the SME2 side and none on the masked side.

    python evaluations/sampled_vs_traced.py [--models toy_cnn,mobilenet_v3_small]
                                                   [--dtypes fp32,fp16,int8] [--runs N]

Needs `pytest-sme2 setup qemu`. Emulated timings say nothing about speed: none are printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import comma_list

from pytest_sme2.analysis.addresses import kernel_key
from pytest_sme2.api import (read_kernel_sample_csv, read_kernel_trace_csv, QemuDevice,
                             export_model, RunRequest, parse_runner_spec)

SIDES = (("sme2_on", "native"), ("sme2_off", "native,sme2=off"))


def one_case(device: QemuDevice, model: str, dtype: str, side: str, spec: str, runs: int,
             out: Path) -> dict:
    exported = export_model(model, dtype)
    runner = parse_runner_spec(f"{side}={spec}").make(target=device.target)
    stem = out / f"{model}-{dtype}-{side}"
    request = RunRequest(pte=exported.pte, etdump=Path(f"{stem}.etdump"), runs=runs, warmup=0,
                         inputs=exported.inputs, timeout_s=1800,
                         kernel_trace=Path(f"{stem}.traced.csv"),
                         kernel_sample=Path(f"{stem}.sampled.csv"))
    outcome = device.run(runner, request)
    assert outcome.kernel_trace is not None and outcome.kernel_sample is not None
    traced = read_kernel_trace_csv(outcome.kernel_trace)
    sampled = read_kernel_sample_csv(outcome.kernel_sample)
    traced_keys = {kernel_key(k.name) for k in traced.executed}
    sampled_keys = {kernel_key(k.name) for k in sampled.sampled}
    return {
        "case": f"{model} {dtype} {side}",
        "traced": len(traced_keys),
        "traced_sme2": sum(k.isa_family == "SME2" for k in traced.executed),
        "sampled": len(sampled_keys),
        "sampled_sme2": sum(k.isa_family == "SME2" for k in sampled.sampled),
        "samples": sampled.samples_total,
        "in_kernels": int(sampled.kernels["samples"].sum()),
        "subset": sampled_keys <= traced_keys,
        "outside": sorted(sampled_keys - traced_keys),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="toy_cnn,mobilenet_v3_small")
    p.add_argument("--dtypes", default="fp32,fp16,int8")
    p.add_argument("--runs", type=int, default=3, help="executions per process (default 3)")
    args = p.parse_args(argv)
    device = QemuDevice("qemu")
    out = Path(tempfile.mkdtemp(prefix="sampled-vs-traced-"))
    rows = []
    for model in comma_list(args.models):
        for dtype in comma_list(args.dtypes):
            for side, spec in SIDES:
                rows.append(one_case(device, model, dtype, side, spec, args.runs, out))
                r = rows[-1]
                print(f"{r['case']:<36} traced {r['traced']:>2} kernels ({r['traced_sme2']} SME2)"
                      f"  sampled {r['sampled']:>2} ({r['sampled_sme2']} SME2) in "
                      f"{r['samples']:>4} samples ({r['in_kernels']} in kernels)  sampled "
                      f"within traced: {'yes' if r['subset'] else 'NO ' + str(r['outside'])}",
                      flush=True)
    ok = all(r["subset"] for r in rows) and all(
        (r["sampled_sme2"] > 0) == r["case"].endswith("sme2_on") for r in rows)
    print(f"\n{len(rows)} cases: sampled within traced in all: "
          f"{all(r['subset'] for r in rows)}; SME2 sampled on every SME2 side and on no masked "
          f"side: {ok}")
    print("| case | traced kernels (SME2) | sampled kernels (SME2) | samples (in kernels) | "
          "sampled within traced |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['traced']} ({r['traced_sme2']}) | {r['sampled']} "
              f"({r['sampled_sme2']}) | {r['samples']} ({r['in_kernels']}) | "
              f"{'yes' if r['subset'] else 'no: ' + ', '.join(r['outside'])} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
