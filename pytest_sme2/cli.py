"""``pytest-sme2``: the library's commands outside pytest.

    pytest-sme2 analyze ETDUMP [--warmup N] [--json OUT]
    pytest-sme2 export MODEL [--dtype DTYPE] [--out DIR] [--cache-dir DIR] [--force]

User errors print one line on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from pytest_sme2.errors import Sme2Error

ANALYSIS_SCHEMA = "pytest-sme2/analysis/1"


def _analyze(args: argparse.Namespace) -> int:
    # Deliberately light: no torch, no executorch on this path.
    from pytest_sme2.analysis.latency import e2e_per_run, latency_stats, timed_runs
    from pytest_sme2.etdump import read_etdump

    events = read_etdump(args.etdump)
    per_run = e2e_per_run(events, source=str(args.etdump))
    runs = int(events.loc[events["run"] >= 0, "run"].nunique())
    if args.warmup >= len(per_run):
        raise Sme2Error(f"{args.etdump}: --warmup {args.warmup} leaves no timed runs "
                        f"(the file holds {len(per_run)} runs with Method::execute)")
    stats = latency_stats(timed_runs(per_run, args.warmup))
    doc = {"schema": ANALYSIS_SCHEMA, "source": str(args.etdump), "runs": runs,
           "warmup": args.warmup, "e2e_ms": [float(v) for v in per_run],
           "e2e": {k: v for k, v in stats.to_dict().items() if k not in ("mad_ms", "outliers")}}
    doc["e2e"].update(mad_ms=stats.mad_ms, outliers=stats.outliers)
    print(f"{args.etdump}: {runs} runs, {args.warmup} warm-up discarded")
    print(f"Method::execute: median {stats.median_ms:.3f} ms, mean {stats.mean_ms:.3f} ms, "
          f"p10 {stats.p10_ms:.3f}, p90 {stats.p90_ms:.3f}, min {stats.min_ms:.3f}, "
          f"max {stats.max_ms:.3f}, CV {stats.cv_pct:.1f}%, outliers {stats.outliers}, "
          f"n={stats.n}")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from pytest_sme2.export import export_model

    exported = export_model(args.model, args.dtype, args.cache_dir, force=args.force,
                            progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    paths = [exported.pte, exported.etrecord, exported.folder / "meta.json"]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{args.model}-{args.dtype}"
        copies = []
        for src, suffix in zip(paths, (".pte", ".etrecord", ".meta.json")):
            dst = out / f"{stem}{suffix}"
            shutil.copyfile(src, dst)
            copies.append(dst)
        paths = copies
    for p in paths:
        print(p)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-sme2", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    a = sub.add_parser("analyze", help="summarise an ETDump (no torch needed)")
    a.add_argument("etdump", type=Path)
    a.add_argument("--warmup", type=int, default=0, help="leading runs to discard (default 0)")
    a.add_argument("--json", type=Path, help="write the analysis document here")
    a.set_defaults(func=_analyze)

    e = sub.add_parser("export", help="export a registered model (or reuse the cached export)")
    e.add_argument("model")
    e.add_argument("--dtype", default="fp32")
    e.add_argument("--out", type=Path, help="copy the .pte/.etrecord/meta here")
    e.add_argument("--cache-dir", type=Path)
    e.add_argument("--force", action="store_true", help="export again even on a cache hit")
    e.set_defaults(func=_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "warmup", 0) < 0:
        print("pytest-sme2: --warmup must be 0 or more", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except Sme2Error as e:
        print(f"pytest-sme2: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pytest-sme2: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
