"""A .pte exported outside pytest-sme2 (ExecuTorch's own API, a few lines, no registration),
then benchmarked by ``pytest benchmarks --sme2-models that.pte`` on the host and, with
``--qemu``, on the emulated SME2 CPU (SME2 on vs off, kernels traced).

    python evaluations/outside_pte.py WORK_DIR [--qemu]

Prints the sessions' terminal summaries; the reports land in WORK_DIR/report-host and
WORK_DIR/report-qemu."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _common import ROOT


# Exactly what a user would write: nothing from pytest-sme2.
EXPORT = """
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                          torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.ReLU(),
                          torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                          torch.nn.Linear(64, 10)).eval()
edge = to_edge_transform_and_lower(torch.export.export(net, (torch.randn(1, 3, 64, 64),)),
                                   partitioner=[XnnpackPartitioner()], generate_etrecord=True)
et = edge.to_executorch()
open("m.pte", "wb").write(et.buffer)
et.get_etrecord().save("m.etrecord")
"""


def session(work: Path, name: str, *extra: str) -> None:
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "--rootdir", str(ROOT),
           "-p", "no:cacheprovider", "--sme2-models", str(work / "m.pte"),
           "--report-dir", str(work / f"report-{name}"), *extra]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True).stdout
    keep = [line for line in out.splitlines()
            if line.startswith("sme2: ") or "m.pte" in line or line.startswith("=")]
    print(f"--- {name}: {' '.join(cmd[3:])}\n" + "\n".join(keep))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--qemu", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", EXPORT], cwd=args.work, check=True,
                   capture_output=True)
    session(args.work, "host")
    if args.qemu:
        session(args.work, "qemu", "--device", "qemu", "--sme2-threads", "1")


if __name__ == "__main__":
    main()
