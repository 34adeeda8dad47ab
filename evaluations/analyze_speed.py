"""How fast is `pytest-sme2 analyze` next to ExecuTorch's Inspector, on the same ETDump?

Makes a 1000-run MobileNetV3-small fp32 ETDump with the real runtime, then, in one session:
- times the whole `pytest-sme2 analyze TRACE --etrecord R --json OUT` process (startup, imports,
  reading, analysis, JSON) and reads its peak RSS;
- times `Inspector(etdump_path, etrecord)` + `.to_dataframe()` in this process, after its
  imports (so Inspector is not charged for importing torch), and the RSS it adds.
Alternates the two three times and prints every figure and the ratio of medians.

    python evaluations/analyze_speed.py [--runs 1000] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # this process only


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--work", type=Path, default=Path(tempfile.mkdtemp(prefix="analyze-speed-")))
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()

    from pytest_sme2.api import HostDevice, export_model, RunRequest, PythonRunner

    exported = export_model(a.model, "fp32", a.work / "cache")
    trace = a.work / "trace.etdump"
    HostDevice().run(PythonRunner(), RunRequest(pte=exported.pte, etdump=trace, runs=a.runs,
                                                warmup=0, inputs=exported.inputs))
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB, {a.runs} runs of {a.model})")

    from executorch.devtools import Inspector  # imported before timing: not charged

    ours, theirs, ours_rss = [], [], []
    for i in range(a.repeat):
        out = a.work / f"analysis-{i}.json"
        t0 = time.perf_counter()
        proc = subprocess.run(
            # VmHWM, not ru_maxrss: the latter keeps the forking parent's high-water mark
            # across exec, which would charge this (torch-laden) script's memory to the CLI.
            [sys.executable, "-c",
             "import sys; from pytest_sme2.cli import main; rc = main(sys.argv[1:]); "
             "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')]; "
             "print('PEAK_RSS_KB', hwm[0], file=sys.stderr); sys.exit(rc)",
             "analyze", str(trace), "--etrecord", str(exported.etrecord), "--json", str(out)],
            capture_output=True, text=True, check=True)
        ours.append(time.perf_counter() - t0)
        ours_rss.append(int(proc.stderr.split("PEAK_RSS_KB")[1].split()[0]) / 1024)

        before = rss_mb()
        t0 = time.perf_counter()
        df = Inspector(etdump_path=str(trace), etrecord=str(exported.etrecord)).to_dataframe()
        theirs.append(time.perf_counter() - t0)
        grown = rss_mb() - before
        print(f"round {i + 1}: analyze process {ours[-1]:.2f} s (peak RSS {ours_rss[-1]:.0f} MB); "
              f"Inspector + to_dataframe {theirs[-1]:.2f} s (peak RSS grew {grown:.0f} MB, "
              f"{len(df)} rows)")

    doc = json.loads(out.read_text())
    execute = df[(df.event_block_name == "Execute") & (df.event_name == "Method::execute")]
    same = max(abs(x - y) for x, y in zip(doc["e2e_ms"], execute["raw"].iloc[0]))
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"median: analyze {statistics.median(ours):.2f} s, Inspector "
          f"{statistics.median(theirs):.2f} s -> {ratio:.1f}x faster; peak RSS of the analyze "
          f"process {max(ours_rss):.0f} MB; "
          f"max |e2e difference| vs Inspector {same:.2e} ms over {len(doc['e2e_ms'])} runs")


if __name__ == "__main__":
    main()
