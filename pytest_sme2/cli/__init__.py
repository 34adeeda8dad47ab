"""``pytest-sme2``: the library's commands outside pytest.

    pytest-sme2 analyze ETDUMP [--etrecord F] [--warmup N] [--xnntrace LOG] [--kernel-trace CSV]
                        [--kernel-sample CSV]
                        [--device-sme2 yes|no|unknown | --device-facts JSON]
                        [--json OUT] [--csv-dir DIR]
    pytest-sme2 compare BASE.etdump CANDIDATE.etdump [--etrecord F] [--name1 A --name2 B]
                        [--warmup N] [--json J] [--md M]
    pytest-sme2 export MODEL [--dtype DTYPE] [--out DIR] [--cache-dir DIR] [--force]
    pytest-sme2 run PTE --runner {python|native|PATH}[,label=value...] [--device SPEC]
                    [--threads N] [--runs N] [--warmup N] --etdump OUT [--kernel-trace CSV]
                    [--kernel-sample CSV]
    pytest-sme2 report RESULTS.json [--out DIR] [--no-charts]
    pytest-sme2 gate RESULTS.json --baseline-dir DIR [--fail-on-regression PCT]
                     [--allow-foreign-baseline] [--categories LIST]
    pytest-sme2 setup qemu [--dry-run]
    pytest-sme2 fake-phone [--no-sme2] [--cpu CPU]

User errors print one line on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

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
    from pytest_sme2.analysis.summary import analyze_file
    from pytest_sme2.report.terminal import analysis_summary

    analysis = analyze_file(args.etdump, warmup=args.warmup, etrecord=args.etrecord,
                            xnntrace=args.xnntrace, device_sme2=_device_sme2(args),
                            kernel_trace=args.kernel_trace, kernel_sample=args.kernel_sample)
    print("\n".join(analysis_summary(analysis)))
    if args.json:
        Path(args.json).write_text(json.dumps(analysis.to_json(), indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.csv_dir:
        from pytest_sme2.measure.artifacts.csv import write_csvs

        for p in write_csvs(analysis, Path(args.csv_dir), Path(args.etdump).stem):
            print(f"wrote {p}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    # Light like analyze: no torch, no executorch.
    from pytest_sme2.analysis.diff import compare_analyses
    from pytest_sme2.analysis.summary import analyze_file
    from pytest_sme2.report.diff_markdown import compare_lines, render_markdown
    from pytest_sme2.report.diff_recommend import with_recommendations

    if args.name1 == args.name2:
        raise Sme2Error(f"--name1 and --name2 must differ (both {args.name1!r})")
    base = analyze_file(args.base, warmup=args.warmup, etrecord=args.etrecord)
    cand = analyze_file(args.candidate, warmup=args.warmup, etrecord=args.etrecord)
    diff = with_recommendations(
        compare_analyses(base, cand, base_name=args.name1, candidate_name=args.name2), base,
        cand)
    print("\n".join(compare_lines(diff)))
    for path, text in ((args.json, lambda: json.dumps(diff.to_json(), indent=2) + "\n"),
                       (args.md, lambda: render_markdown(diff))):
        if path:
            try:
                Path(path).write_text(text())
            except OSError as e:
                raise Sme2Error(f"{path}: cannot write ({e.strerror or e})") from None
            print(f"wrote {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    """A registered or library model: export it (or reuse the cache). A .pte: take it as it
    is and make its inputs from forward's metadata (the paths printed are the ones a session
    uses)."""
    from pytest_sme2.programs.export import export_model
    from pytest_sme2.programs.spec import model_label
    from pytest_sme2.readers.tensorfile import sidecar

    exported = export_model(args.model, args.dtype, args.cache_dir, force=args.force,
                            progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    paths = [p for p in (exported.pte, exported.etrecord, exported.inputs,
                         exported.folder / "meta.json") if p.is_file()]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{model_label(args.model)}-{exported.dtype}")
        copies = []
        for src in paths:
            suffix = {"meta.json": ".meta.json", "inputs.bin": ".inputs.bin"}.get(
                src.name, "".join(src.suffixes[-1:]))
            dst = out / f"{stem}{suffix}"
            shutil.copyfile(src, dst)
            if src == exported.inputs and sidecar(src).is_file():   # what the tensors are
                shutil.copyfile(sidecar(src), sidecar(dst))
            copies.append(dst)
        paths = copies
    for p in paths:
        print(p)
    return 0


def _program_and_inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """``run``'s model: a .pte (inputs from forward's metadata unless --inputs), or a
    registered or library model name (exported, or the cached export, in --dtype)."""
    from pytest_sme2.programs.export import export_model

    exported = export_model(args.model, args.dtype, progress=lambda msg: print(
        msg, file=sys.stderr, flush=True))
    return exported.pte.resolve(), Path(args.inputs or exported.inputs).resolve()


def _run(args: argparse.Namespace) -> int:
    """One runner process, measured and read back as a benchmark's load-only processes are
    (:func:`pytest_sme2.measure.block.measure_process`)."""
    from pytest_sme2 import units
    from pytest_sme2.analysis.latency import latency_stats
    from pytest_sme2.measure.block import measure_process
    from pytest_sme2.devices import open_device
    from pytest_sme2.runners import RunRequest, parse_runner_spec

    for flag in ("threads", "runs"):
        if getattr(args, flag) < 1:
            raise Sme2Error(f"--{flag} must be 1 or more, got {getattr(args, flag)}")
    spec = parse_runner_spec(args.runner)
    device = open_device(args.device, taskset=None if args.taskset == "none" else args.taskset)
    if args.kernel_trace and not device.trace_kernels:
        raise Sme2Error(f"--kernel-trace needs a device that traces execution (--device qemu); "
                        f"--device {args.device} cannot")
    if args.kernel_sample and not device.samples_kernels:
        raise Sme2Error(f"--kernel-sample needs the preload library in the runner's process, "
                        f"which --device {args.device} cannot have (on the host: a C compiler)")
    try:
        # Built for the device: on --device qemu the native runner is cross-built for aarch64.
        runner = spec.make(lambda m: print(m, file=sys.stderr), target=device.target)
        pte, inputs = _program_and_inputs(args)     # after the flags, device and runner
        request = RunRequest(pte=pte.resolve(), etdump=Path(args.etdump).resolve(),
                             threads=args.threads, runs=args.runs, warmup=args.warmup,
                             inputs=inputs,
                             timeout_s=args.timeout,
                             kernel_trace=Path(args.kernel_trace).resolve()
                             if args.kernel_trace else None,
                             kernel_sample=Path(args.kernel_sample).resolve()
                             if args.kernel_sample else None)
        measured = measure_process(runner, device, request)
    finally:
        device.cleanup()
    per_run, start, outcome = measured.e2e_all, measured.startup, measured.outcome
    stats = latency_stats(per_run[per_run.index >= args.warmup])
    load = "" if start.load_ms is None else f"; load {units.ms(start.load_ms)} ms"
    load += "" if start.first_inference_ms is None else \
        f", first inference {units.ms(start.first_inference_ms)} ms"
    load += "" if start.peak_rss_kb is None else f", peak {units.mb(start.peak_rss_kb / 1024)} MB"
    print(f"{outcome.etdump}: {len(per_run)} runs ({args.warmup} warm-up) with "
          f"{runner.info.name} on {args.device}; Method::execute median "
          f"{units.ms(stats.median_ms)} ms, p90 {units.ms(stats.p90_ms)} ms, "
          f"CV {units.percent(stats.cv_pct)}%{load}"
          + (" [emulated CPU: timings say nothing about speed]"
             if device.facts().emulated else ""))
    if outcome.kernel_trace:
        from pytest_sme2.analysis.kernel_trace import read_kernel_trace_csv

        trace = read_kernel_trace_csv(outcome.kernel_trace)
        print(f"{outcome.kernel_trace}: {trace.summary()}")
    if outcome.kernel_sample:
        from pytest_sme2.analysis.kernel_sample import read_kernel_sample_csv

        print(f"{outcome.kernel_sample}: {read_kernel_sample_csv(outcome.kernel_sample).summary()}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from pytest_sme2.report.markdown import render_report
    from pytest_sme2.results import load_results

    doc = load_results(args.results)      # one line naming the file for anything unreadable
    out_dir = Path(args.out or Path(args.results).parent)
    try:
        out = render_report(doc, out_dir, charts=not args.no_charts)
    except OSError as e:
        raise Sme2Error(f"{out_dir}: cannot write the report ({e.strerror or e})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Sme2Error(f"{args.results}: a results document this version cannot render "
                        f"({type(e).__name__}: {e}); was it edited by hand?") from None
    print(out)
    return 0


def _gate(args: argparse.Namespace) -> int:
    """Judge every benchmark of a results document (all its blocks, grouped by baseline key,
    as --save-baseline groups them) against the stored baselines: one line per benchmark;
    exit 1 when the gate fails (a regression, or a baseline from another device that was not
    compared), else 0."""
    from pytest_sme2.gate import rule as gate
    from pytest_sme2.baselines.store import group_by_key
    from pytest_sme2.gate.policy import CLI_FLAGS, gate_policy
    from pytest_sme2.results import load_results

    # Blocks cannot be measured again here: a suspected regression is judged as it stands.
    policy = gate_policy(args.fail_on_regression, args.allow_foreign_baseline, args.categories,
                         confirm_blocks=0, load_threshold=args.load_threshold,
                         memory_threshold=args.memory_threshold, flags=CLI_FLAGS)
    doc = load_results(args.results)
    if not doc.benchmarks:
        raise Sme2Error(f"{args.results}: no benchmarks to judge")
    if not args.baseline_dir.is_dir():
        raise Sme2Error(f"--baseline-dir {args.baseline_dir}: no such folder")
    own = doc.session.baseline_session_id   # a session that saved is not its own baseline
    failed = False
    for key, blocks in group_by_key(doc.benchmarks).items():
        report = gate.evaluate(blocks, args.baseline_dir, policy, exclude_session=own)
        line = "; ".join([report.e2e.summary] + [j.summary for j in report.regressions
                                                 if j.category or j.measure != gate.TIME])
        print(f"{key.model} {key.dtype} t{key.threads} {key.runner}: {line}")
        failed = failed or report.failure(policy) is not None
    return 1 if failed else 0


def _setup(args: argparse.Namespace) -> int:
    from pytest_sme2.cli.setup import run_setup

    if args.what == "history":
        from pytest_sme2.history.setup import run_setup as run_history_setup

        return run_history_setup(args.dry_run, out=lambda line: print(line, flush=True))
    return run_setup(args.dry_run, out=lambda line: print(line, flush=True))


def _add_analyze(sub) -> None:
    a = sub.add_parser("analyze", help="summarise an ETDump (no torch needed)")
    a.add_argument("etdump", type=Path)
    a.add_argument("--warmup", type=int, default=0, help="leading runs to discard (default 0)")
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


def _add_compare(sub) -> None:
    c = sub.add_parser("compare", help="compare two ETDumps (base, candidate) offline: "
                                       "speed-up, category and operator deltas")
    c.add_argument("base", type=Path)
    c.add_argument("candidate", type=Path)
    c.add_argument("--etrecord", type=Path,
                   help="the .etrecord of the model (both traces; backends, op types)")
    c.add_argument("--name1", default="base", help="label of the base trace (e.g. SME2-Off)")
    c.add_argument("--name2", default="candidate",
                   help="label of the candidate trace (e.g. SME2-On)")
    c.add_argument("--warmup", type=int, default=0,
                   help="leading runs to discard from each trace (default 0)")
    c.add_argument("--json", type=Path, help="write the comparison document here")
    c.add_argument("--md", type=Path, help="write a markdown report here")
    c.set_defaults(func=_compare)


def _add_export(sub) -> None:
    e = sub.add_parser("export", help="export a registered or library model (or reuse the cached "
                       "export); a .pte: make its inputs from its metadata")
    e.add_argument("model")
    e.add_argument("--dtype", default="fp32")
    e.add_argument("--out", type=Path, help="copy the .pte/.etrecord/meta here")
    e.add_argument("--cache-dir", type=Path)
    e.add_argument("--force", action="store_true", help="export again even on a cache hit")
    e.set_defaults(func=_export)


def _add_run(sub) -> None:
    from pytest_sme2.measure.settings import BenchSettings

    run = sub.add_parser("run", help="run one .pte (or a model name: its export) with one runner "
                         "on one device, write the ETDump")
    run.add_argument("model", help="a .pte file, a registered model or library:ClassName")
    run.add_argument("--dtype", default="fp32", help="for a model name (a .pte is as exported)")
    run.add_argument("--runner", default="python",
                     help="python, native, or a path to an executor_runner-compatible binary, "
                          "then ,label=value... (native,sme2=off on --device qemu: the same "
                          "binary with SME/SME2 hidden)")
    run.add_argument("--device", default="host",
                     help="host, android, android:SERIAL[@HOST:PORT], qemu[:CPU]")
    run.add_argument("--kernel-trace", type=Path,
                     help="write the micro-kernels that executed here (CSV; --device qemu)")
    run.add_argument("--kernel-sample", type=Path, metavar="CSV",
                     help="sample the runner's program counter and write the micro-kernels it "
                          "caught here (CSV; native runners on a phone, QEMU or the host)")
    run.add_argument("--threads", type=int, default=1)
    run.add_argument("--runs", type=int, default=BenchSettings.runs)
    run.add_argument("--warmup", type=int, default=BenchSettings.warmup)
    run.add_argument("--inputs", type=Path,
                     help="tensor file of inputs (default: the export's, or made from the "
                     ".pte's forward metadata)")
    run.add_argument("--taskset", default="auto", help="Android CPU pinning: auto, none, hex mask")
    run.add_argument("--timeout", type=float, default=BenchSettings.timeout_s,
                     help="seconds before the run is killed")
    run.add_argument("--etdump", type=Path, required=True, help="where to write the ETDump")
    run.set_defaults(func=_run)


def _add_report(sub) -> None:
    r = sub.add_parser("report", help="render report.md (and charts) from a results.json")
    r.add_argument("results", type=Path)
    r.add_argument("--out", type=Path, help="folder for report.md (default: beside the JSON)")
    r.add_argument("--no-charts", action="store_true")
    r.set_defaults(func=_report)


def _add_gate(sub) -> None:
    from pytest_sme2.gate.policy import (DEFAULT_LOAD_THRESHOLD_PCT, DEFAULT_MEMORY_THRESHOLD_PCT,
                                         DEFAULT_THRESHOLD_PCT)

    g = sub.add_parser("gate", help="judge a results.json against stored baselines: exit 1 on "
                                    "a regression, 0 otherwise")
    g.add_argument("results", type=Path)
    g.add_argument("--baseline-dir", type=Path, required=True,
                   help="the baseline folder (pytest's --baseline-dir)")
    g.add_argument("--fail-on-regression", default=f"{DEFAULT_THRESHOLD_PCT:g}", metavar="PCT",
                   help="a slow-down beyond PCT percent that noise cannot explain fails "
                        f"(default {DEFAULT_THRESHOLD_PCT:g})")
    g.add_argument("--allow-foreign-baseline", action="store_true",
                   help="compare with a baseline recorded on another device instead of failing")
    g.add_argument("--categories", default="", metavar="LIST",
                   help="operator categories judged besides end to end (Convolution,GEMM or all)")
    g.add_argument("--load-threshold", default=f"{DEFAULT_LOAD_THRESHOLD_PCT:g}", metavar="PCT",
                   help="cold load time grown beyond PCT percent fails, or off (default "
                        f"{DEFAULT_LOAD_THRESHOLD_PCT:g})")
    g.add_argument("--memory-threshold", default=f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}",
                   metavar="PCT", help="peak memory grown beyond PCT percent fails, or off "
                                       f"(default {DEFAULT_MEMORY_THRESHOLD_PCT:g})")
    g.set_defaults(func=_gate)


def _add_setup(sub) -> None:
    st = sub.add_parser("setup", help="provision an emulated Arm64 SME2 target (QEMU, cross "
                                      "compiler, aarch64 wheel); docs/emulated-sme2.md")
    st.add_argument("what", choices=("qemu", "history"),
                    help="qemu: the emulated device; history: PostgreSQL and Chromium for the "
                         "history's tests")
    st.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")
    st.set_defaults(func=_setup)


def _add_history(sub) -> None:
    from pytest_sme2.history.commands import add_parser

    add_parser(sub)


def _add_fake_phone(sub) -> None:
    fp = sub.add_parser("fake-phone", help="register an emulated arm64 phone (QEMU, SME2) with "
                                           "the local adb server; prints its serial first, "
                                           "serves until Ctrl-C; docs/android.md")
    fp.add_argument("--no-sme2", action="store_true",
                    help="an Arm64 CPU without SME or SME2 (QEMU -cpu max,sme=off)")
    fp.add_argument("--cpu", help="another QEMU CPU model (default max)")
    fp.add_argument("--port", type=int, default=0,
                    help="TCP port on 127.0.0.1 to serve on (default: a free one; never "
                         "5555-5585, which adb scans for emulators)")
    fp.set_defaults(func=_fake_phone)


# One function per subcommand, each adding its parser; in the order --help lists them.
SUBCOMMANDS = (_add_analyze, _add_compare, _add_export, _add_run, _add_report, _add_gate,
               _add_setup, _add_history, _add_fake_phone)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-sme2", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _fake_phone(args: argparse.Namespace) -> int:
    from pytest_sme2.fakephone.serve import main as serve_main

    if 5555 <= args.port <= 5585:
        raise Sme2Error(f"--port {args.port}: adb scans 5555-5585 for emulators; pick another")
    return serve_main(args)


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
