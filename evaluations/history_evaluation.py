"""The history's figures (issue 26): change points on a +10% step and on a 1%/commit drift with
an unchanged second model, a +0.7% shift and a +10% step in quiet sessions (issue 32), write time
per session for each store, render time of the page for 200 commits x 50 benchmarks, and a
screenshot of the page (`--detection-only`: the change points alone).

Sessions are the recorded QEMU session (tests/fakes) re-timed per commit with 2% noise, not
fresh measurements: run `python evaluations/history_evaluation.py [--postgres URL|local]
[--screenshot docs/history-page.png]`.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (the repository root on sys.path: tests/)

import numpy as np
import pandas as pd

from pytest_sme2.history import page, report
from pytest_sme2.api import import_files, open_store, load_results
from pytest_sme2.history.records import session_points
from tests.fakes.history_docs import session_doc, write_series

N = 24


def detection(name: str, factor_of, folder: Path, noise: float = 0.02) -> None:
    store = open_store(str(folder / f"{name}.sqlite"))
    import_files(store, write_series(folder / name, N, factor_of, noise=noise))
    built = report.build(store.frame())
    for s in built.series:
        cps = ", ".join(f"at commit #{c.order} {c.change_pct:+.1f}% [{c.low_pct:+.1f}, "
                        f"{c.high_pct:+.1f}]" for c in s.change_points) or "none"
        # getattr: the same script measures the history before issue 32 (no shifts) too.
        small = ", ".join(f"#{c.order} {c.change_pct:+.1f}%" for c in getattr(s, "shifts", []))
        print(f"{name}: {s.name}: {cps}"
              + (f"; shifts below {s.min_change_pct:g}%: {small}" if small else ""))


def write_times(url: str, label: str) -> None:
    store = open_store(url)
    docs = [load_results(session_doc(1000 + i, seed=7)) for i in range(20)]
    t = []
    for d in docs:
        sp = session_points(d)
        t0 = time.perf_counter()
        store.record(sp)
        t.append(time.perf_counter() - t0)
    store.close()
    print(f"write one session (3 benchmarks) to {label}: median {np.median(t) * 1e3:.1f} ms, "
          f"max {max(t) * 1e3:.1f} ms over 20")


def big_frame(commits: int = 200, keys: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for k in range(keys):
        for c in range(commits):
            level = 1.0 + k * 0.1 + (0.1 if k % 10 == 0 and c >= 120 else 0)
            ms = level * rng.normal(1, 0.02)
            rows.append({"key_digest": f"k{k:02d}", "key": {}, "device": f"dev{k % 3}",
                         "model": f"model{k // 6}", "dtype": ("fp32", "fp16", "int8")[k % 3],
                         "threads": 1 + k % 2, "runner": "native", "emulated": False,
                         "median_ms": ms, "block_medians_ms": [ms * 0.99, ms * 1.01],
                         "runs_ms": [], "instructions": None, "load_ms": None,
                         "peak_rss_kb": None, "categories_ms": {"Convolution": ms * 0.8},
                         "sme2": "proven", "export_key": "e", "executorch": "1.5.1",
                         "uid": f"{c}",
                         "commit_sha": hashlib.sha1(f"commit {c}".encode()).hexdigest(),
                         "branch": "main",
                         "time": f"2026-{1 + c // 28:02d}-{1 + c % 28:02d}T00:00:00",
                         "ci_run": None, "host": "h", "versions": {}, "id": 0,
                         "session_id": c})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", help="a postgresql:// URL to time writes against, or "
                                       "'local': a server started here for the measurement")
    ap.add_argument("--screenshot", type=Path, help="write a PNG of the page here (chromium)")
    ap.add_argument("--detection-only", action="store_true", help="the change points only (no "
                                                                  "write times, no page)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        detection("step", lambda m, i: 1.10 if m == "toy_cnn" and i >= 12 else 1.0, folder)
        detection("drift", lambda m, i: 1.01 ** i if m == "toy_cnn" else 1.0, folder)
        # Issue 32: many short, quiet sessions (0.2% noise): a real +0.7% shift is narrow
        # enough to clear zero but too small to matter; a +10% step in the same noise is not.
        detection("quiet-0.7%", lambda m, i: 1.007 if i >= 12 else 1.0, folder, noise=0.002)
        detection("quiet-10%", lambda m, i: 1.10 if i >= 12 else 1.0, folder, noise=0.002)
        if args.detection_only:
            return
        write_times(str(folder / "w.sqlite"), "SQLite")
        if args.postgres == "local":
            from pytest_sme2.provision.history import postgres_bin
            from tests.pg_server import postgres_server

            with postgres_server(postgres_bin()) as url:
                write_times(url, "PostgreSQL (local server)")
        elif args.postgres:
            write_times(args.postgres, "PostgreSQL")
        frame = big_frame()
        t0 = time.perf_counter()
        built = report.build(frame)
        t1 = time.perf_counter()
        html = page.render(built)
        t2 = time.perf_counter()
        print(f"200 commits x 50 benchmarks: change points {t1 - t0:.2f} s, page {t2 - t1:.2f} s, "
              f"{len(html) / 1e6:.1f} MB, {len(built.change_points)} change point(s)")
        if args.screenshot:
            small = report.build(frame[frame["key_digest"].isin(
                [f"k{k:02d}" for k in range(0, 12)])])
            out = folder / "page.html"
            out.write_text(page.render(small))
            subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--no-first-run",
                            f"--user-data-dir={folder / 'profile'}", "--window-size=1240,1100",
                            f"--screenshot={args.screenshot.resolve()}", out.as_uri()],
                           check=True, capture_output=True, timeout=120)
            print(f"screenshot: {args.screenshot}")


if __name__ == "__main__":
    main()
