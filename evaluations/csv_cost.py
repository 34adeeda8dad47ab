"""What do the seed-compatible CSVs cost per block? (Not a unit test: prints figures.)

    python evaluations/csv_cost.py [--models LIST] [--dtypes LIST] [--repeat 20]
        [--work DIR]

For each model and dtype, from the cached export (exported first if the cache is cold): one
native-runner process (30 timed + 3 warm-up runs, 1 thread) makes an ETDump, analysed as a
session analyses it; then ``write_csvs`` is timed against the code it replaced (the same frames
written with ``DataFrame.to_csv``), alternating the two, ``--repeat`` times each, each time into
a new folder as a session does (overwriting a file costs this machine's ext4 ~0.2 ms more than
creating one), and the files of both are compared byte for byte (a difference stops the
script). Prints the median and minimum milliseconds per block of each, and their ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import comma_list

from pytest_sme2.api import Analysis


def write_csvs_pandas(analysis: Analysis, out_dir: Path, stem: str) -> list[Path]:
    """``write_csvs``'s frames written by pandas ``to_csv`` (what it did before it built the
    text itself), in ``write_csvs``' order."""
    from pytest_sme2.measure.artifacts.csv import kernels_table, ops_stats_frame, timeline_frames

    out_dir.mkdir(parents=True, exist_ok=True)
    timed, run0, warm = timeline_frames(analysis, stem)
    frames = {f"{stem}_all_runs_timeline.csv": timed,
              f"{stem}_ops_stats.csv": ops_stats_frame(analysis, stem),
              "kernels.csv": kernels_table(analysis, stem),
              f"{stem}_run0_timeline.csv": run0, f"{stem}_warmup_timeline.csv": warm}
    paths = []
    for name, frame in frames.items():
        frame.to_csv(out_dir / name, index=False)
        paths.append(out_dir / name)
    return paths


def block_analysis(model: str, dtype: str, work: Path) -> Analysis:
    from pytest_sme2.api import (analyze, read_etdump, read_etrecord, export_model, RunRequest,
                                 native_runner)

    ex = export_model(model, dtype, progress=print)
    req = RunRequest(ex.pte, work / f"{model}-{dtype}.etdump", 1, 30, 3, inputs=ex.inputs)
    subprocess.run(native_runner(progress=print).command(req), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return analyze(read_etdump(req.etdump), warmup=3, etrecord=read_etrecord(ex.etrecord))


def main() -> None:
    from pytest_sme2.measure.artifacts.csv import write_csvs

    p = argparse.ArgumentParser()
    p.add_argument("--models", default="toy_cnn,mobilenet_v3_small,vit_tiny")
    p.add_argument("--dtypes", default="fp32,int8")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--work", type=Path, default=Path(tempfile.mkdtemp(prefix="csv-cost-")))
    a = p.parse_args()

    print(f"{'block':<28} {'rows':>6} {'KiB':>6}  {'pandas ms':>15}  {'new ms':>15}  "
          f"{'speed-up':>8}")
    print(f"{'':<28} {'':>6} {'':>6}  {'median   min':>15}  {'median   min':>15}  "
          f"{'(median)':>8}")
    totals = {"pandas": 0.0, "new": 0.0}
    for model in comma_list(a.models):
        for dtype in comma_list(a.dtypes):
            analysis = block_analysis(model, dtype, a.work)
            times: dict[str, list[float]] = {"pandas": [], "new": []}
            files = {}
            for i in range(a.repeat):
                for name, fn in (("pandas", write_csvs_pandas), ("new", write_csvs)):
                    out = a.work / name / f"{model}-{dtype}-{i}"
                    t0 = time.perf_counter()
                    paths = fn(analysis, out, "native")
                    times[name].append((time.perf_counter() - t0) * 1e3)
                    files[name] = [path.read_bytes() for path in paths]
            for name in times:
                shutil.rmtree(a.work / name)
            for old, new, path in zip(files["pandas"], files["new"], paths):
                if old != new:
                    raise SystemExit(f"{model} {dtype}: {path.name} differs from pandas' file")
            med = {k: statistics.median(v) for k, v in times.items()}
            for k in totals:
                totals[k] += med[k]
            size = sum(map(len, files["new"])) / 1024
            print(f"{model + ' ' + dtype:<28} {len(analysis.events):>6} {size:>6.0f}  "
                  f"{med['pandas']:>7.2f} {min(times['pandas']):>7.2f}  "
                  f"{med['new']:>7.2f} {min(times['new']):>7.2f}  "
                  f"{med['pandas'] / med['new']:>7.2f}x")
    print(f"{'sum of medians':<42}  {totals['pandas']:>7.2f} {'':>7}  {totals['new']:>7.2f} "
          f"{'':>7}  {totals['pandas'] / totals['new']:>7.2f}x")
    print("files byte-identical to pandas' for every block")


if __name__ == "__main__":
    main()
