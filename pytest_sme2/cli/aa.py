"""``pytest-sme2 aa``: what this machine can resolve — N A/A judgements of one program against
itself by the gate's paired rule (:mod:`pytest_sme2.measure.aa`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from pytest_sme2.devices import open_device
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import PairBudget
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.measure.settings import MIN_BLOCKS, BenchSettings
from pytest_sme2.runners import parse_runner_spec


def _aa(args: argparse.Namespace) -> int:
    """Open the device and runner, take the judgements, print one line each and the summary;
    ``--json``: every judgement too."""
    from pytest_sme2.measure import aa  # measure.aa: 220 ms of --help (pandas, the loop)

    for flag in ("judgements", "threads", "runs"):
        if getattr(args, flag) < 1:
            raise Sme2Error(f"--{flag.replace('_', '-')} must be 1 or more, got "
                            f"{getattr(args, flag)}")
    if args.threshold <= 0:
        raise Sme2Error(f"--threshold must be above 0%, got {args.threshold:g}")
    device = open_device(args.device)
    runner = None
    try:
        if device.facts().emulated:
            raise Sme2Error(f"--device {args.device} is an emulated CPU: its times say nothing "
                            "about speed, so there is nothing to calibrate")
        runner = parse_runner_spec(args.runner).make(lambda m: print(m, file=sys.stderr),
                                                     target=device.target)
        settings = BenchSettings(runs=args.runs, report_dir=args.out, loads=1, sample="off",
                                 cache_dir=args.cache_dir)
        how = aa.AaPlan(args.judgements, aa.PairPlan(first=MIN_BLOCKS, budget=PairBudget(
            args.max_pairs, args.budget)), args.threshold)
        run = aa.BenchmarkRun(args.model, args.dtype, args.threads)
        print(f"A/A on {args.model} {args.dtype} t{args.threads} {runner.info.name}@"
              f"{args.device}: {args.judgements} judgements of the program against itself by "
              f"the gate's paired rule (threshold {args.threshold:g}%, up to {args.max_pairs} "
              f"pairs and {args.budget:g} s each)", flush=True)

        def say(j) -> None:
            print(f"  {j.judgement.summary}; {j.watched}; {j.seconds:.1f} s", flush=True)

        cal = aa.calibrate(run, runner, device, settings, how, say)
    finally:
        if runner is not None:
            runner.close()
        device.cleanup()
    for line in cal.lines():
        print(line)
    if args.json:
        args.json.write_text(json.dumps({
            "what": cal.what, "threshold_pct": cal.threshold_pct,
            "false_alarms": cal.false_alarms, "judgements": [
                {"status": j.judgement.status, "ratio": asdict(j.judgement.ratio)
                 if j.judgement.ratio else None, "pairs": j.pairs, "straddled": j.straddled,
                 "detectable_pct": j.detectable_pct, "seconds": round(j.seconds, 3),
                 "reason": j.judgement.reason} for j in cal.judgements]}, indent=1))
    return 0


def add_parser(sub) -> None:
    aa = sub.add_parser("aa", help="what this machine can resolve: N A/A judgements of one "
                        "program against itself by the gate's paired rule (the realised "
                        "false-alarm rate, the smallest change resolved); calibrate a CI runner "
                        "with it before turning the gate on")
    aa.add_argument("model", help="a registered model, library:ClassName or a .pte")
    aa.add_argument("--dtype", default="fp32")
    aa.add_argument("--threads", type=int, default=1)
    aa.add_argument("--runner", default="native", help="native (default), python, or a path")
    aa.add_argument("--device", default="host", help="host, android, android:SERIAL[@HOST:PORT]")
    aa.add_argument("--judgements", type=int, default=20, help="A/A judgements (default 20)")
    aa.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                    help="the change to detect, percent (the gate's --fail-on-regression)")
    aa.add_argument("--max-pairs", type=int, default=PairBudget().max_pairs,
                    help="pairs per judgement at most (the gate's --sme2-max-pairs)")
    aa.add_argument("--budget", type=float, default=PairBudget().seconds,
                    help="seconds of extra pairs per judgement (--sme2-precision-budget)")
    aa.add_argument("--runs", type=int, default=BenchSettings.runs,
                    help="timed runs per block (--runs)")
    aa.add_argument("--out", type=Path, default=Path("sme2-aa"),
                    help="where the blocks' files go (default sme2-aa/)")
    aa.add_argument("--cache-dir", type=Path, help="the export cache (default: the user's)")
    aa.add_argument("--json", type=Path, help="write every judgement here")
    aa.set_defaults(func=_aa)
