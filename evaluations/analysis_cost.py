"""What does analysing one block's ETDump cost? (Not a unit test: prints figures.)

    python evaluations/analysis_cost.py [--models LIST] [--dtypes LIST] [--runs 30]
        [--warmup 3] [--repeat 20] [--work DIR] [--extra DIR] [--save DIR] [--check DIR]

For each model and dtype (cached exports; a cold cache is filled first, untimed) our native
runner makes one block's ETDump (``--runs`` timed + ``--warmup`` runs) and one load-only ETDump
(one execute), kept in ``--work`` and reused by later invocations, so a before/after pair times
the same files. ``--extra DIR`` adds ETDumps named ``<model>-<dtype>-*.etdump`` (e.g. copied
from a QEMU/SME2 session; a ``.kernels.csv`` beside one is passed as its kernel trace).

Per ETDump it prints the milliseconds per call (the fastest of ``--repeat`` calls, the one
least disturbed by other processes; ``--stat median`` for the median), of what a
session does per block: ``read_etdump``, ``analyze`` (warm-up dropped, the .etrecord read once
beforehand as a session does), ``Analysis.to_json`` (the ``--check`` output), the block's
record (``Analysis.record()``; code before it went through JSON:
``ResultAnalysis.from_json(Analysis.to_json())``); and per load-only ETDump ``read_etdump`` +
``e2e_per_run`` + ``process_startup``.

``--save DIR`` pickles every output (frames, series, dicts, JSON) and ``--check DIR`` compares
the current code's outputs with such a pickle, exactly (``assert_frame_equal(check_exact=True)``)
and prints the largest relative difference of any float where they are not bit-identical: run
``--save`` on the code before a change and ``--check`` after it. To time (and save) the code
before a change from the same checkout: ``git archive REV pytest_sme2 | tar -x -C /tmp/old``
and run with ``PYTHONPATH=/tmp/old``; the ``code:`` line says which package was timed.
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import comma_list


def _make_traces(models: list[str], dtypes: list[str], runs: int, warmup: int,
                 work: Path) -> list[tuple[str, Path, Path, Path | None, bool]]:
    """(label, etdump, etrecord, kernel trace, load-only) for every trace to time."""
    from pytest_sme2.api import export_model, RunRequest, native_runner

    runner = native_runner(progress=print)
    out = []
    for model in models:
        for dtype in dtypes:
            ex = export_model(model, dtype, progress=print)
            for kind, n, w in (("block", runs, warmup), ("load", 1, 0)):
                etdump = work / f"{model}-{dtype}.{kind}.etdump"
                if not etdump.exists():
                    req = RunRequest(ex.pte, etdump, 1, n, w, inputs=ex.inputs)
                    subprocess.run(runner.command(req), check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                out.append((f"{model}-{dtype}.{kind}", etdump, ex.etrecord, None,
                            kind == "load"))
    return out


def _extra_traces(folder: Path) -> list[tuple[str, Path, Path, Path | None, bool]]:
    from pytest_sme2.api import export_model

    out = []
    for etdump in sorted(folder.glob("*.etdump")):
        model, dtype = etdump.stem.split("-")[:2]
        kernels = etdump.with_suffix(".kernels.csv")
        out.append((f"extra:{etdump.stem}", etdump, export_model(model, dtype).etrecord,
                    kernels if kernels.exists() else None, False))
    return out


STAT = {"min": min, "median": statistics.median}
_stat = STAT["min"]


def _ms(fn, repeat: int) -> tuple[float, object]:
    """Milliseconds per call of ``fn()`` (the ``--stat`` of ``repeat`` calls), last result."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * _stat(times), result


def _time_one(etdump: Path, etrecord: Path, kernels: Path | None, load_only: bool,
              warmup: int, repeat: int) -> tuple[dict, int, list[float | None]]:
    """Outputs, events and timings (read, analyze, to_json, record, startup) of one
    ETDump."""
    from pytest_sme2.api import (KernelSources, read_kernel_trace_csv, e2e_per_run, analyze,
                                 read_etdump, read_etrecord, RunnerSummary)
    from pytest_sme2.analysis.startup import process_startup
    from pytest_sme2.results import ResultAnalysis

    summary = RunnerSummary(program_load_ms=1.5, method_load_ms=2.5, peak_rss_kb=1000,
                            rss_before_load_kb=10, rss_after_load_kb=20)
    rec = read_etrecord(etrecord)
    trace = read_kernel_trace_csv(kernels) if kernels else None
    read, events = _ms(lambda: read_etdump(etdump), repeat)
    if load_only:
        def startup():
            ev = read_etdump(etdump)
            return process_startup(ev, e2e_per_run(ev, source=str(etdump)), summary)
        cost, start = _ms(startup, repeat)
        return ({"startup": start, "e2e_all": e2e_per_run(events)}, len(events),
                [read, None, None, None, cost])
    an, result = _ms(lambda: analyze(events, warmup=warmup, source=str(etdump), etrecord=rec,
                                     kernels=KernelSources(trace=trace)), repeat)
    tj, doc = _ms(result.to_json, repeat)
    if hasattr(result, "record"):      # this code: the analysis gives the block's record
        fj, _ = _ms(result.record, repeat)
    else:                              # code from before it (timed with --save): through JSON
        fj, _ = _ms(lambda: ResultAnalysis.from_json(result.to_json()), repeat)
    start = process_startup(result.events, result.e2e_all, summary)
    return _outputs(result, doc, start), len(events), [read, an, tj, fj, None]


def _outputs(a, doc, startup) -> dict:
    return {"e2e_all": a.e2e_all, "e2e": a.e2e, "runs": a.runs, "warmup": a.warmup,
            "categories_ms": a.categories_ms, "operators": a.operators,
            "overheads_ms": a.overheads_ms, "evidence": a.evidence, "events": a.events,
            "timed_e2e": a.timed_e2e, "json": doc, "startup": startup}


def _max_rel(x, y) -> float:
    """Largest relative difference between two equal-shaped JSON-like values (0: identical)."""
    if isinstance(x, dict):
        return max([_max_rel(x[k], y[k]) for k in x] or [0.0])
    if isinstance(x, (list, tuple)):
        return max([_max_rel(a, b) for a, b in zip(x, y)] or [0.0])
    if isinstance(x, float) and x != y:
        return abs(x - y) / max(abs(x), abs(y), 1e-300)
    return 0.0


def _compare(label: str, old: dict, new: dict) -> bool:
    import pandas.testing as pdt

    problems = []
    for key, want in old.items():
        got = new[key]
        try:
            if key in ("operators", "events"):
                pdt.assert_frame_equal(got, want, check_exact=True)
            elif key in ("e2e_all", "timed_e2e"):
                pdt.assert_series_equal(got, want, check_exact=True)
            elif key == "json":
                # NaN != NaN: compare the documents' text, which is what results.json holds.
                import json
                if json.dumps(got, sort_keys=False) != json.dumps(want, sort_keys=False):
                    raise AssertionError(f"to_json differs (max rel {_max_rel(want, got):.1e})")
            elif got != want and not (isinstance(want, float) and math.isnan(want)):
                raise AssertionError(f"{got!r} != {want!r} "
                                     f"(max rel {_max_rel(_plain(want), _plain(got)):.1e})")
        except AssertionError as e:
            problems.append(f"{key}: {str(e).strip().splitlines()[0]}")
    print(f"  check {label}: " + ("identical" if not problems else "DIFFERENT: "
                                  + "; ".join(problems)))
    return not problems


def _plain(v):
    from dataclasses import asdict, is_dataclass
    return asdict(v) if is_dataclass(v) else v


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="toy_cnn,mobilenet_v3_small,vit_tiny")
    p.add_argument("--dtypes", default="fp32,int8")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--stat", choices=sorted(STAT), default="min",
                   help="min (default: the call least disturbed by other processes) or median")
    p.add_argument("--work", type=Path,
                   default=Path(tempfile.gettempdir()) / "pytest-sme2-analysis-cost")
    p.add_argument("--extra", type=Path, help="folder of more ETDumps (<model>-<dtype>-*)")
    p.add_argument("--save", type=Path, help="pickle every output into this folder")
    p.add_argument("--check", type=Path, help="compare every output with this folder's pickle")
    a = p.parse_args()
    global _stat
    _stat = STAT[a.stat]
    a.work.mkdir(parents=True, exist_ok=True)

    traces = _make_traces(comma_list(a.models), comma_list(a.dtypes), a.runs, a.warmup, a.work)
    if a.extra:
        traces += _extra_traces(a.extra)
    saved = {}
    if a.check:
        saved = pickle.loads((a.check / "outputs.pkl").read_bytes())
    outputs, all_same = {}, True
    block_ms, load_ms = [], []
    print(f"{'ETDump':44} {'events':>7} {'read':>7} {'analyze':>8} {'to_json':>8} "
          f"{'record':>9} {'startup':>8}  (ms per call, {a.stat} of {a.repeat})")
    for label, etdump, etrecord, kernels, load_only in traces:
        outputs[label], n_events, figures = _time_one(etdump, etrecord, kernels, load_only,
                                                      a.warmup, a.repeat)
        cells = [f"{f:{w}.2f}" if f is not None else " " * w
                 for f, w in zip(figures, (7, 8, 8, 9, 8))]
        print(f"{label:44} {n_events:7d} " + " ".join(cells))
        read, an, tj, fj, cost = figures
        if load_only:
            load_ms.append(cost)
        else:
            block_ms.append(read + an + fj)
        if a.check:
            if label in saved:
                all_same &= _compare(label, saved[label], outputs[label])
            else:
                print(f"  check {label}: not in {a.check}")
    import pytest_sme2
    print(f"code: {Path(pytest_sme2.__file__).parent}")
    print(f"per block (read + analyze + record): mean "
          f"{statistics.mean(block_ms):.2f} ms over {len(block_ms)} ETDumps; per load-only "
          f"ETDump (read + startup): mean "
          f"{statistics.mean(load_ms) if load_ms else float('nan'):.2f} ms")
    if a.save:
        a.save.mkdir(parents=True, exist_ok=True)
        (a.save / "outputs.pkl").write_bytes(pickle.dumps(outputs))
        print(f"outputs saved to {a.save / 'outputs.pkl'}")
    if a.check:
        print("all outputs identical" if all_same else "SOME OUTPUTS DIFFER")


if __name__ == "__main__":
    main()
