"""``pytest-sme2 run``: one .pte (or a model's export) run once with one runner."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.errors import Sme2Error
from pytest_sme2 import units
from pytest_sme2.devices import open_device
from pytest_sme2.devices.registry import remote_adb_warning
from pytest_sme2.runners import RunRequest, parse_runner_spec
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.export import export_model
from pytest_sme2.programs.export_output import lines_only
from pytest_sme2.readers.etdump_runs import EtdumpRuns, write_etdump_runs


def _program_and_inputs(args: argparse.Namespace) -> tuple[Path, Path, Path | None]:
    """``run``'s model: a .pte (inputs from forward's metadata unless --inputs), or a
    registered or library model name (exported, or the cached export, in --dtype)."""
    exported = export_model(args.model, args.dtype, progress=lines_only(lambda msg: print(
        msg, file=sys.stderr, flush=True)))
    return (exported.pte.resolve(), Path(args.inputs or exported.inputs).resolve(),
            exported.ptd.resolve() if exported.ptd else None)


def _run(args: argparse.Namespace) -> int:
    """One runner process, measured and read back as a benchmark's load-only processes are
    (:func:`pytest_sme2.measure.process.measure_process`)."""
    from pytest_sme2.measure.process import measure_process  # pandas: not at --help

    for flag in ("threads", "runs"):
        if getattr(args, flag) < 1:
            raise Sme2Error(f"--{flag} must be 1 or more, got {getattr(args, flag)}")
    spec = parse_runner_spec(args.runner)
    remote = remote_adb_warning([args.device])
    if remote:
        print(remote, file=sys.stderr)
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
        pte, inputs, data = _program_and_inputs(args)   # after the flags, device and runner
        request = RunRequest(pte=pte.resolve(), data=data, etdump=Path(args.etdump).resolve(),
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
    if outcome.etdump and Path(outcome.etdump).is_file():   # what analyze and compare read
        write_etdump_runs(outcome.etdump, EtdumpRuns(args.warmup, args.runs, "--runs",
                                                     "pytest-sme2 run"))
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
    if outcome.kernel_trace or outcome.kernel_sample:
        from pytest_sme2.analysis import kernel_sample, kernel_trace  # pandas: not at --help

        if outcome.kernel_trace:
            trace = kernel_trace.read_kernel_trace_csv(outcome.kernel_trace)
            print(f"{outcome.kernel_trace}: {trace.summary()}")
        if outcome.kernel_sample:
            sample = kernel_sample.read_kernel_sample_csv(outcome.kernel_sample)
            print(f"{outcome.kernel_sample}: {sample.summary()}")
    return 0


def add_parser(sub) -> None:
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
