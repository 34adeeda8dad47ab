"""Export cache figures: cold export seconds per model and dtype, warm (cache hit) seconds,
and how many exports a second `pytest benchmarks` performs (it must be 0).

    python evaluations/export_timing.py [--models a,b] [--dtypes x,y] [--skip-session]

Everything goes into a fresh temporary cache, so the cold figures are really cold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, comma_list



def export_in_child(model: str, dtype: str, cache: Path) -> tuple[float, dict]:
    """Cold and warm in a fresh process each, as a user's session would meet them."""
    code = ("import json, sys, time; t = time.perf_counter(); "
            "from pytest_sme2.programs.export import export_model; "
            "e = export_model(sys.argv[1], sys.argv[2], sys.argv[3]); "
            "print(json.dumps({'seconds': time.perf_counter() - t, 'meta': e.meta}))")
    out = subprocess.run([sys.executable, "-c", code, model, dtype, str(cache)],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    return doc["seconds"], doc["meta"]


def count_exports(cache: Path, report: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider",
                           f"--sme2-cache-dir={cache}", f"--report-dir={report}", "-q"],
                          cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.count("sme2: exporting "), time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="toy_cnn,mobilenet_v3_small,vit_tiny")
    p.add_argument("--dtypes", default="fp32,fp16,int8,int8_dynamic")
    p.add_argument("--skip-session", action="store_true",
                   help="skip the two `pytest benchmarks` sessions")
    a = p.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="export-timing-"))
    print(f"{'model':<20} {'dtype':<13} {'cold s':>7} {'warm s':>7} {'delegates':>9}  "
          "outside the delegate")
    for model in comma_list(a.models):
        for dtype in comma_list(a.dtypes):
            cold, meta = export_in_child(model, dtype, cache)
            warm, _ = export_in_child(model, dtype, cache)
            # In-process hit, without interpreter startup: what a session pays per benchmark.
            from pytest_sme2.api import export_model
            t0 = time.perf_counter()
            export_model(model, dtype, cache)
            hit = time.perf_counter() - t0
            outside = ", ".join(f"{n} x{c}" for n, c in meta["portable_ops"].items()) or "-"
            print(f"{model:<20} {dtype:<13} {cold:7.1f} {warm:7.2f} {meta['delegates']:9d}  "
                  f"{outside}   (in-process hit {hit * 1000:.1f} ms)", flush=True)
    if not a.skip_session:
        session_cache = Path(tempfile.mkdtemp(prefix="export-session-"))
        report = Path(tempfile.mkdtemp(prefix="export-report-"))
        first, t1 = count_exports(session_cache, report)
        second, t2 = count_exports(session_cache, report)
        print(f"`pytest benchmarks`: first session {first} exports in {t1:.0f} s; second session "
              f"{second} exports in {t2:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
