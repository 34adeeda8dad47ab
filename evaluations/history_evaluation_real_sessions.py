"""Real sessions for the history (issue 26): N `pytest benchmarks` sessions on this host, one
per fake commit (GITHUB_SHA), of toy_cnn (unchanged) and `grower`, a copy of toy_cnn that from
commit STEP on carries two extra 1x1 convolutions (~+10% work; evaluations/
instruction_gate_evaluation.py measured +4% for one); or, with --drift, whose input grows ~1% per
commit. Each session's results.json is imported into a fresh SQLite store and the change points
printed. ~15-20 s per session:
`python evaluations/history_evaluation_real_sessions.py --sessions 24`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import ROOT, deeper_toy_source

PLUGIN = textwrap.dedent('''
    """Registers `grower` (written by history_evaluation_real_sessions.py)."""
    import os

    import pytest_sme2_models as models
    import grower_model

    def pytest_configure(config):
        step = os.environ.get("GROWER_EXTRA") == "1"
        size = int(os.environ.get("GROWER_SIZE", "32"))
        models.register_model("grower", grower_model.build_variant,
                              extra=((1, False), (1, False)) if step else (), size=size)
''')



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=24)
    ap.add_argument("--step", type=int, default=12)
    ap.add_argument("--drift", action="store_true", help="input side grows ~0.5%/commit (~1% "
                                                         "work) instead of a step")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=None, help="warm-up runs (default: the "
                                                             "plugin's)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--analyse-only", action="store_true", help="run no session: analyse the "
                                                                "sessions already in --out")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="sme2-history-real-"))
    plugin_dir = out / "plugin"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "grower_model.py").write_text(deeper_toy_source())
    (plugin_dir / "grower_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")]),
           "GITHUB_REF_NAME": "main", "CI": ""}
    paths = []
    t0 = time.time()
    for i in range(0 if args.analyse_only else args.sessions):
        sha = hashlib.sha1(f"commit {i}".encode()).hexdigest()
        report = out / f"session-{i:03d}"
        step = "1" if not args.drift and i >= args.step else "0"
        # ~1% more work per commit: the input's area grows (conv cost ~ area).
        size = str(round(32 * 1.005 ** i)) if args.drift else "32"
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_latency.py"),
               "-p", "grower_plugin", "-q", "-p", "no:cacheprovider",
               "--sme2-models", "toy_cnn,grower", "--sme2-dtypes", "fp32",
               "--sme2-threads", "1", "--runs", str(args.runs), "--sme2-loads", "1",
               "--report-dir", str(report)]
        if args.warmup is not None:
            cmd += ["--warmup", str(args.warmup)]
        proc = subprocess.run(cmd, env={**env, "GITHUB_SHA": sha, "GROWER_EXTRA": step,
                                        "GROWER_SIZE": size},
                              capture_output=True, text=True, cwd=ROOT)
        tail = (proc.stdout.strip().splitlines() or ["?"])[-1]
        print(f"session {i} ({sha[:10]}, step={step}, size={size}): rc {proc.returncode}, "
              f"{tail} ({time.time() - t0:.0f} s)", flush=True)
        if (report / "results.json").exists():
            paths.append(report / "results.json")

    if args.analyse_only:
        paths = sorted(out.glob("session-*/results.json"))

    from pytest_sme2.history import report as history_report
    from pytest_sme2.api import import_files, open_store

    (out / "history.sqlite").unlink(missing_ok=True)
    store = open_store(str(out / "history.sqlite"))
    import_files(store, paths)
    built = history_report.build(store.frame())
    print(f"{len(paths)} sessions, {len(built.commits)} commits, store {out / 'history.sqlite'}")
    for s in built.series:
        meds = ", ".join(f"{v:.3f}" for v in s.rows["median_ms"])
        print(f"{s.name}: medians {meds}")
        print(f"  noise floor {s.noise_floor_pct:.2f}%, min change {s.min_change_pct:g}%")
        for c in s.change_points:
            print(f"  change point at commit #{c.order} ({c.commit[:10]}): {c.change_pct:+.1f}% "
                  f"[{c.low_pct:+.1f}, {c.high_pct:+.1f}] {c.what_changed}")
        if not s.change_points:
            print("  no change point")
        for c in s.shifts:
            print(f"  shift below {s.min_change_pct:g}% at commit #{c.order} ({c.commit[:10]}): "
                  f"{c.change_pct:+.1f}% [{c.low_pct:+.1f}, {c.high_pct:+.1f}]")


if __name__ == "__main__":
    main()
