"""How often does a multi-thread runner process start slow? (Not a unit test: prints figures.)

    python evaluations/thread_start_probe.py [--model mobilenet_v3_small] [--dtype fp32]
        [--threads 2] [--runs 500] [--processes 30]

Runs the python runner's child process ``--processes`` times, each for ``--runs`` executions
with no warm-up, reads each ETDump and compares the block the plugin would time (runs 3-33,
after its default 3 warm-ups) with the process's steady level (median of its second half).
Prints, per process, the steady level, that block's median and how long the start stayed more
than 25% above the steady level (10-run rolling medians). This is the measurement behind
``--sme2-confirm-blocks`` in docs/regression-gate.md: on a 2-vCPU VM some 2-thread processes
spend their first tens to hundreds of milliseconds — a whole default block — well above their
own steady level.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pytest_sme2.api import e2e_per_run, read_etdump, export_model

SLOW = 1.25          # "slow": more than this times the process's own steady level
BLOCK = slice(3, 33)  # what the plugin times by default: 3 warm-ups, then 30 runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--processes", type=int, default=30)
    args = p.parse_args(argv)
    pte = export_model(args.model, args.dtype).pte
    slow_blocks = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.processes):
            etdump = Path(tmp) / f"p{i}.etdump"
            subprocess.run([sys.executable, "-m", "pytest_sme2.runners.python_child",
                            "--pte", str(pte), "--etdump", str(etdump),
                            "--threads", str(args.threads), "--runs", str(args.runs),
                            "--warmup", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            e = e2e_per_run(read_etdump(etdump)).to_numpy()
            steady = float(np.median(e[len(e) // 2:]))
            block = float(np.median(e[BLOCK]))
            rolling = np.array([np.median(e[k:k + 10]) for k in range(len(e) - 10)])
            high = np.nonzero(rolling > SLOW * steady)[0]
            end = int(high[-1]) + 10 if high.size else 0
            slow_blocks += block > SLOW * steady
            print(f"process {i:2d}: steady {steady:.3f} ms, runs 3-33 {block:.3f} ms, "
                  f"> {SLOW}x steady until run {end:4d} ({e[:end].sum():6.1f} ms)", flush=True)
    print(f"{args.model} {args.dtype} t{args.threads}: {slow_blocks} of {args.processes} "
          f"default blocks (runs 3-33) more than {SLOW}x their process's steady level")
    return 0


if __name__ == "__main__":
    sys.exit(main())
