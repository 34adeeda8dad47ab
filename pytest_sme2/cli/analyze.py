"""``pytest-sme2 analyze``: an ETDump summarised (no torch needed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.errors import Sme2Error


def _sme2_flag(value: str | None) -> bool | None:
    return {"yes": True, "no": False, "unknown": None, None: None}[value]


def _device_sme2(args: argparse.Namespace) -> bool | None:
    """SME2 capability from --device-sme2, or from a device-facts JSON (results.json's
    ``device`` object, or a file holding just that object)."""
    if args.device_facts is None:
        return _sme2_flag(args.device_sme2)
    try:
        doc = json.loads(Path(args.device_facts).read_text())
    except (OSError, ValueError) as e:
        raise Sme2Error(f"{args.device_facts}: not a readable device-facts JSON ({e})") from None
    facts = doc.get("device", doc) if isinstance(doc, dict) else {}
    if not isinstance(facts, dict) or "sme2" not in facts:
        raise Sme2Error(f"{args.device_facts}: no 'sme2' key in the device facts")
    return facts["sme2"]


def _analyze(args: argparse.Namespace) -> int:
    # Deliberately light: no torch, no executorch on this path.
    from pytest_sme2.measure.offline import analyze_recorded  # pandas: not at --help
    from pytest_sme2.report.analysis_text import analysis_summary  # pandas: not at --help

    found = analyze_recorded(args.etdump, args.warmup, etrecord=args.etrecord,
                             xnntrace=args.xnntrace,
                             kernels=KernelSources(_device_sme2(args), trace=args.kernel_trace,
                                                   sample=args.kernel_sample))
    analysis = found.analysis
    print("\n".join(analysis_summary(analysis, found.warmup_said, found.generation)))
    if args.json:
        doc = analysis.to_json()
        if found.generation is not None:
            doc["generation"] = found.generation.to_json()
        try:
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        except OSError as e:        # a folder that does not exist: one line, status 2
            raise Sme2Error(f"{args.json}: cannot write ({e.strerror or e})") from None
        print(f"wrote {args.json}")
    if args.csv_dir:
        from pytest_sme2.measure.artifacts.csv import write_csvs  # pandas: not at --help

        for p in write_csvs(analysis, Path(args.csv_dir), Path(args.etdump).stem):
            print(f"wrote {p}")
    return 0


def add_parser(sub) -> None:
    a = sub.add_parser("analyze", help="summarise an ETDump (no torch needed)")
    a.add_argument("etdump", type=Path)
    a.add_argument("--warmup", type=int, default=None,
                   help="leading runs (an LLM's: generations) to discard (default: what the "
                        "record a session writes beside its ETDump says, X.etdump.runs.json; 0 "
                        "without one)")
    a.add_argument("--etrecord", type=Path,
                   help="the .etrecord beside the .pte (backends, op types)")
    a.add_argument("--xnntrace", type=Path,
                   help="XNNPACK kernel log ('Using ... microkernel' lines)")
    a.add_argument("--kernel-trace", type=Path, metavar="CSV",
                   help="kernels that executed (the CSV of `run --kernel-trace`): 'proven' when "
                        "SME2 kernels ran")
    a.add_argument("--kernel-sample", type=Path, metavar="CSV",
                   help="kernels a sampling process caught (the CSV of `run --kernel-sample`): "
                        "'proven' when SME2 kernels were sampled")
    a.add_argument("--device-sme2", choices=("yes", "no", "unknown"),
                   help="whether the device that ran it has SME2")
    a.add_argument("--device-facts", type=Path,
                   help="device facts JSON (e.g. from results.json) giving its SME2 capability")
    a.add_argument("--json", type=Path, help="write the analysis document here")
    a.add_argument("--csv-dir", type=Path, help="write seed-compatible CSV files here")
    a.set_defaults(func=_analyze)
