"""``pytest-sme2 gate``: a results.json judged against stored baselines."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import (DEFAULT_LOAD_THRESHOLD_PCT, DEFAULT_MEMORY_THRESHOLD_PCT,
                                     DEFAULT_THRESHOLD_PCT, GatePolicy)
from pytest_sme2.measure.option_values import (Given, gate_categories, threshold,
                                               threshold_or_off)
from pytest_sme2.results import load_results


def _gate(args: argparse.Namespace) -> int:
    """Judge every benchmark of a results document (all its blocks, grouped by baseline key,
    as --save-baseline groups them) against the stored baselines: one line per benchmark;
    exit 1 when the gate fails (a regression, or a baseline from another device that was not
    compared), else 0."""
    from pytest_sme2.gate import rule as gate  # gate.rule, flatbuffers: 23 ms of --help
    from pytest_sme2.baselines.store import group_by_key  # flatbuffers: with gate.rule

    # Blocks cannot be measured again here: a suspected regression is judged as it stands.
    policy = GatePolicy(
        fail_on_regression=threshold(Given(args.fail_on_regression, "--fail-on-regression")),
        allow_foreign=args.allow_foreign_baseline,
        categories=gate_categories(Given(args.categories, "--categories")), confirm_blocks=0,
        load_threshold_pct=threshold_or_off(Given(args.load_threshold, "--load-threshold")),
        memory_threshold_pct=threshold_or_off(Given(args.memory_threshold,
                                                    "--memory-threshold")))
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


def add_parser(sub) -> None:
    g = sub.add_parser("gate", help="judge a results.json against stored baselines: exit 1 on "
                                    "a regression, 0 otherwise")
    g.add_argument("results", type=Path)
    g.add_argument("--baseline-dir", type=Path, required=True,
                   help="the baseline folder (pytest's --baseline-dir)")
    g.add_argument("--fail-on-regression", default=f"{DEFAULT_THRESHOLD_PCT:g}", metavar="PCT",
                   help="the change to detect: a slow-down clear of noise and at least half "
                        f"of PCT percent fails (default {DEFAULT_THRESHOLD_PCT:g})")
    g.add_argument("--allow-foreign-baseline", action="store_true",
                   help="compare with a baseline recorded on another device instead of failing")
    g.add_argument("--categories", default="", metavar="LIST",
                   help="operator categories judged besides end to end (Convolution,GEMM or all)")
    g.add_argument("--load-threshold", default=f"{DEFAULT_LOAD_THRESHOLD_PCT:g}", metavar="PCT",
                   help="cold load time grown by the change to detect, PCT percent, fails, "
                        "or off (default "
                        f"{DEFAULT_LOAD_THRESHOLD_PCT:g})")
    g.add_argument("--memory-threshold", default=f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}",
                   metavar="PCT", help="peak memory grown by the change to detect, PCT "
                                       "percent, fails, or off "
                                       f"(default {DEFAULT_MEMORY_THRESHOLD_PCT:g})")
    g.set_defaults(func=_gate)
