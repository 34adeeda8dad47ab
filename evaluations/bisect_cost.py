"""What a bisect spends outside measuring: ``pytest-sme2 bisect`` over a 64-commit user project
(tests/bisect_repo.py's MLP; every commit retrains it, so every probe measures; the hidden layer
widened at commit 40), on the host, once with each commit exported by a fresh pytest process
(``--fresh-exports``, the first version) and once through the pre-warmed exporter (the default).

    python evaluations/bisect_cost.py [--commits 64] [--slowdown 40] [--runs 30]

Prints one JSON line per way (the bisect's ``seconds``: wall, exports, measuring; probes,
pairs, the culprit, the load average before and after) and the table in
docs/measurements/bisect.md. Measuring is the comparisons' time: the runner processes of every
block, ABBA interleaved, and the rule's arithmetic; everything else — worktrees, exports, state
files — is outside it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT

from tests.bisect_repo import build_repo, long_history


def bisect(repo: Path, good: str, bad: str, cache: Path, runs: int, fresh: bool) -> dict:
    out = repo.parent / f"bisect-{'fresh' if fresh else 'warm'}.json"
    cmd = [sys.executable, "-m", "pytest_sme2.cli", "bisect", "--json", str(out),
           "--runs", str(runs), *(["--fresh-exports"] if fresh else []), good, bad,
           "test_bench.py", f"--sme2-cache-dir={cache}"]
    load = os.getloadavg()[0]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bisect failed: {done.stderr.strip() or done.stdout[-500:]}")
    doc = json.loads(out.read_text())
    t = doc["seconds"]
    return {"way": "fresh pytest per commit" if fresh else "pre-warmed exporter",
            "wall_s": t["wall"], "exports_s": t["exports"], "measuring_s": t["measuring"],
            "outside_pct": round(100 * (1 - t["measuring"] / t["wall"]), 1),
            "exported": doc["exported"],
            "probes": len(doc["probes"]), "pairs": doc["pairs_measured"],
            "culprit": [c["subject"] for c in doc["culprits"]],
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
            "stdout": done.stdout.splitlines()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=64)
    ap.add_argument("--slowdown", type=int, default=40)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ways", default="fresh,warm")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bisect-cost-") as tmp:
        repo = Path(tmp) / "project"
        shas = build_repo(repo, long_history(args.commits, args.slowdown))
        for way in args.ways.split(","):
            cache = Path(tmp) / f"cache-{way}"      # cold exports for each way
            row = bisect(repo, shas[0], shas[-1], cache, args.runs, way == "fresh")
            print(json.dumps({k: v for k, v in row.items() if k != "stdout"}), flush=True)
            print("\n".join(row["stdout"][-8:]), file=sys.stderr)
            rows.append(row)
    print("| way | wall s | exports s | measuring s | outside measuring | commits exported "
          "| probes | pairs | load 1-min |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['way']} | {r['wall_s']:.0f} | {r['exports_s']:.0f} | "
              f"{r['measuring_s']:.0f} | {r['outside_pct']:.0f}% | {r['exported']} | "
              f"{r['probes']} | {r['pairs']} | {r['load_before']}-{r['load_after']} |")
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} cores, {ROOT.name})")


if __name__ == "__main__":
    main()
