"""The first ``pytest benchmarks`` on a fresh machine: exports one after another vs exported
ahead side by side (``--sme2-export-jobs``). Not a unit test: prints figures.

    python evaluations/llm_host_first_session.py [--jobs 1,auto] [-- PYTEST ARGS]

Each session runs ``pytest benchmarks -p no:cacheprovider`` from the repository root with an
empty cache (its own ``XDG_CACHE_HOME``: no export, no native runner build) and its own report
folder, one after the other, on this machine as it is; prints each session's wall time, the
time its exports took, and the ratio to the first. The target (issue 30): the default session
with ``auto`` at most 150 s where the serial one took 235 s.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, comma_list

TARGET_S = 150.0
_EXPORTED = re.compile(r"exported \S+ \S+ in ([0-9.]+) s")
_AHEAD = re.compile(r"exported (\d+) of (\d+) models ahead in ([0-9.]+) s")


def one_session(jobs: str, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="first-run-") as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        argv = [sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "-q",
                f"--sme2-export-jobs={jobs}", f"--report-dir={Path(tmp) / 'report'}", *extra]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    out = done.stdout + done.stderr
    ahead = _AHEAD.search(out)
    return {"jobs": jobs, "wall_s": wall, "status": done.returncode,
            "exports_s": float(ahead.group(3)) if ahead else
            sum(float(m.group(1)) for m in _EXPORTED.finditer(out)),
            "exports": len(_EXPORTED.findall(out)),
            "tail": next((line.strip("= ") for line in reversed(done.stdout.splitlines())
                          if " passed" in line or " failed" in line), "no test ran")}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra = args[args.index("--") + 1:] if "--" in args else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", default="1,auto", help="--sme2-export-jobs values, in order")
    a = p.parse_args(args[:args.index("--")] if "--" in args else args)
    print(f"load average before: {os.getloadavg()[0]:.2f}; CPUs: {os.cpu_count()}")
    results = []
    for jobs in comma_list(a.jobs):
        r = one_session(jobs.strip(), extra)
        results.append(r)
        print(f"--sme2-export-jobs {r['jobs']:>4}: {r['wall_s']:6.1f} s whole session, "
              f"{r['exports']} exports ({'ahead, ' if r['jobs'] != '1' else ''}"
              f"{r['exports_s']:.1f} s of them), exit status {r['status']}: {r['tail']}")
    first = results[0]["wall_s"]
    for r in results[1:]:
        print(f"{r['jobs']} vs {results[0]['jobs']}: {r['wall_s'] / first:.2f}x the wall time"
              f" ({first - r['wall_s']:+.1f} s)")
    auto = next((r for r in results if r["jobs"] == "auto"), None)
    if auto is not None:
        met = "met" if auto["wall_s"] <= TARGET_S else "NOT met"
        print(f"target: the default (auto) first session <= {TARGET_S:g} s: {met} "
              f"({auto['wall_s']:.1f} s)")
    return 0 if all(r["status"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
