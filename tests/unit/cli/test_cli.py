import json
import random
import subprocess
import sys

import pytest

from pytest_sme2.cli import main
from tests.fakes.etdumps import execute_run, make_etdump


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("cli") / "t.etdump"
    p.write_bytes(make_etdump([execute_run(i * 100_000, [("Add (ND) #1", 1000 * (i + 1))])
                               for i in range(5)]))
    return p


def test_analyze_json(trace, tmp_path, capsys):
    out = tmp_path / "a.json"
    assert main(["analyze", str(trace), "--warmup", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pytest-sme2/analysis/1"
    assert doc["runs"] == 5 and doc["warmup"] == 2
    assert doc["e2e_ms"] == pytest.approx([0.0012, 0.0022, 0.0032, 0.0042, 0.0052])
    assert doc["e2e"]["n"] == 3 and doc["e2e"]["median_ms"] == pytest.approx(0.0042)
    assert "Method::execute: median 0.004 ms" in capsys.readouterr().out


@pytest.mark.parametrize("content,msg", [
    (None, "no such ETDump file"),
    (b"", "empty file"),
    (bytes(random.Random(0).randrange(256) for _ in range(500)), "not an ETDump"),
])
def test_bad_input_exit_2_one_line(tmp_path, content, msg):
    p = tmp_path / "bad file.etdump"
    if content is not None:
        p.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "pytest_sme2.cli", "analyze", str(p)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(p) in proc.stderr and msg in proc.stderr


def test_warmup_covering_all_runs_is_an_error(trace, capsys):
    assert main(["analyze", str(trace), "--warmup", "5"]) == 2
    assert "leaves no timed runs" in capsys.readouterr().err


def test_analyze_does_not_import_torch(trace):
    code = ("import sys; from pytest_sme2.cli import main; main(['analyze', sys.argv[1]]); "
            "assert 'torch' not in sys.modules and 'executorch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(trace)], check=True, capture_output=True)


@pytest.mark.parametrize("args,msg", [
    (["run", "/nope.pte", "--etdump", "x.etdump"], "/nope.pte: no such .pte file"),
    (["run", "{pte}", "--runner", "/bin/nope", "--etdump", "x.etdump"],
     "runner 'nope': /bin/nope does not exist"),
    (["run", "{pte}", "--runs", "0", "--etdump", "x.etdump"], "--runs must be 1 or more"),
    (["run", "{pte}", "--device", "toaster", "--etdump", "x.etdump"],
     "unknown device kind 'toaster'"),
    (["report", "/nope.json"], "/nope.json: no such results file"),
])
def test_cli_errors_exit_2_with_one_line(tmp_path, args, msg, capsys):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    assert main([a.format(pte=pte) for a in args]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_report_rejects_other_json(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text('{"schema": "something/else"}')
    assert main(["report", str(p)]) == 2
    assert "not a pytest-sme2 results document" in capsys.readouterr().err


def test_report_of_a_hand_edited_document_is_one_line(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": [{"model": "m"}]}')
    assert main(["report", str(p), "--no-charts"]) == 2
    err = capsys.readouterr().err
    assert f"{p}: a results document this version cannot read" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_analyze_with_a_kernel_trace_proves_sme2(tmp_path, capsys):
    import pandas as pd

    from pytest_sme2.analysis.kernel_trace import (TRACE_COLUMNS, UNATTRIBUTED_COLUMNS,
                                                   KernelTrace, write_kernel_trace_csv)

    mopa = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
    et = tmp_path / "on.etdump"
    et.write_bytes(make_etdump([execute_run(i * 100_000, [("Convolution (NHWC, PF32) #1", 900)])
                                for i in range(3)]))
    kernels = pd.DataFrame([(mopa, "SME2", "sme2_mopa", "kleidiai", "libx.so", 20, 6)],
                           columns=TRACE_COLUMNS)
    csv = write_kernel_trace_csv(KernelTrace("log", kernels, pd.DataFrame(
        columns=UNATTRIBUTED_COLUMNS), 100, 6), tmp_path / "on.kernels.csv")
    out = tmp_path / "a.json"
    assert main(["analyze", str(et), "--kernel-trace", str(csv), "--json", str(out)]) == 0
    ev = json.loads(out.read_text())["kernel_evidence"]
    assert ev["sme2"] == "proven"
    assert ev["reason"] == f"kernel trace: 1 SME2 micro-kernel executed ({mopa})"
    assert ev["executed_kernels"] == [{"name": mopa, "isa_family": "SME2", "kind": "kleidiai",
                                       "library": "libx.so", "blocks": 20}]
    assert ev["kernel_trace_source"] == str(csv) and ev["streaming_sme_blocks"] == 6
    assert [op["kernel_hint"] for op in json.loads(out.read_text())["operators"]] == [mopa]
    assert "SME2: proven" in capsys.readouterr().out
    assert main(["analyze", str(et), "--kernel-trace", str(tmp_path / "nope.csv")]) == 2
    assert "no such kernel-trace CSV" in capsys.readouterr().err



# Every subcommand's options as ``build_parser`` gave them before it was split into one
# function per subcommand: option (or positional) -> (dest, required, action).
PARSER_BEFORE_SPLIT = {
    "aa": {  # issue 44
        "--budget": ("budget", False, "store"),
        "--cache-dir": ("cache_dir", False, "store"),
        "--device": ("device", False, "store"),
        "--dtype": ("dtype", False, "store"),
        "--json": ("json", False, "store"),
        "--judgements": ("judgements", False, "store"),
        "--max-pairs": ("max_pairs", False, "store"),
        "--out": ("out", False, "store"),
        "--runner": ("runner", False, "store"),
        "--runs": ("runs", False, "store"),
        "--threads": ("threads", False, "store"),
        "--threshold": ("threshold", False, "store"),
        "model": ("model", True, "store"),
    },
    "analyze": {
        "--csv-dir": ("csv_dir", False, "store"),
        "--device-facts": ("device_facts", False, "store"),
        "--device-sme2": ("device_sme2", False, "store"),
        "--etrecord": ("etrecord", False, "store"),
        "--json": ("json", False, "store"), "--kernel-sample": ("kernel_sample", False, "store"),
        "--kernel-trace": ("kernel_trace", False, "store"), "--warmup": ("warmup", False, "store"),
        "--xnntrace": ("xnntrace", False, "store"), "etdump": ("etdump", True, "store")},
    "compare": {
        "--etrecord": ("etrecord", False, "store"), "--json": ("json", False, "store"),
        "--md": ("md", False, "store"), "--name1": ("name1", False, "store"),
        "--name2": ("name2", False, "store"), "--warmup": ("warmup", False, "store"),
        "base": ("base", True, "store"), "candidate": ("candidate", True, "store")},
    "export": {
        "--cache-dir": ("cache_dir", False, "store"), "--dtype": ("dtype", False, "store"),
        "--force": ("force", False, "store_true"), "--out": ("out", False, "store"),
        "model": ("model", True, "store")},
    "fake-phone": {
        "--cpu": ("cpu", False, "store"), "--no-sme2": ("no_sme2", False, "store_true"),
        "--sme1": ("sme1", False, "store_true"), "--port": ("port", False, "store")},
    "gate": {
        "--allow-foreign-baseline": ("allow_foreign_baseline", False, "store_true"),
        "--baseline-dir": ("baseline_dir", True, "store"),
        "--categories": ("categories", False, "store"),
        "--fail-on-regression": ("fail_on_regression", False, "store"),
        "--load-threshold": ("load_threshold", False, "store"),
        "--memory-threshold": ("memory_threshold", False, "store"),
        "results": ("results", True, "store")},
    "bisect": {  # issue 37
        "--all-commits": ("all_commits", False, "store_true"),
        "--budget": ("budget", False, "store"),
        "--fresh-exports": ("fresh_exports", False, "store_true"),
        "--instructions-threshold": ("instructions_threshold", False, "store"),
        "--measure": ("measure", False, "store"),
        "--improvement": ("improvement", False, "store_true"), "--json": ("json", False, "store"),
        "--max-pairs": ("max_pairs", False, "store"), "--md": ("md", False, "store"),
        "--most-steps": ("most_steps", False, "store"),
        "--resume": ("resume", False, "store_true"), "--runs": ("runs", False, "store"),
        "--setup": ("setup", False, "store"), "--threshold": ("threshold", False, "store"),
        "--warmup": ("warmup", False, "store"), "bad": ("bad", True, "store"),
        "good": ("good", True, "store"), "pytest_args": ("pytest_args", True, "store")},
    "history": {},
    "history import": {"--store": ("store", False, "store"), "results": ("results", True, "store")},
    "history report": {
        "--branch": ("branch", False, "store"), "--device": ("device", False, "store"),
        "--dtype": ("dtype", False, "store"), "--html": ("html", False, "store"),
        "--json": ("json", False, "store"), "--md": ("md", False, "store"),
        "--min-change": ("min_change", False, "store"),  # issue 32, after the split
        "--model": ("model", False, "store"), "--runner": ("runner", False, "store"),
        "--since": ("since", False, "store"), "--store": ("store", False, "store"),
        "--threads": ("threads", False, "store")},
    "report": {
        "--no-charts": ("no_charts", False, "store_true"), "--out": ("out", False, "store"),
        "results": ("results", True, "store")},
    "run": {
        "--device": ("device", False, "store"), "--dtype": ("dtype", False, "store"),
        "--etdump": ("etdump", True, "store"), "--inputs": ("inputs", False, "store"),
        "--kernel-sample": ("kernel_sample", False, "store"),
        "--kernel-trace": ("kernel_trace", False, "store"), "--runner": ("runner", False, "store"),
        "--runs": ("runs", False, "store"), "--taskset": ("taskset", False, "store"),
        "--threads": ("threads", False, "store"), "--timeout": ("timeout", False, "store"),
        "--warmup": ("warmup", False, "store"), "model": ("model", True, "store")},
    "setup": {"--dry-run": ("dry_run", False, "store_true"), "what": ("what", True, "store")},
}


def _subcommands(parser, prefix=()):
    """Every (nested) subcommand's options: name -> {option: (dest, required, action)}."""
    import argparse

    actions = {"_StoreAction": "store", "_StoreTrueAction": "store_true"}
    out = {}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                out[" ".join((*prefix, name))] = {
                    ",".join(o.option_strings) or o.dest:
                        (o.dest, o.required, actions.get(type(o).__name__, type(o).__name__))
                    for o in sub._actions if not isinstance(o, (argparse._HelpAction,
                                                                argparse._SubParsersAction))}
                out.update(_subcommands(sub, (*prefix, name)))
    return out


def test_every_subcommand_keeps_its_options():
    from pytest_sme2.cli import build_parser

    assert _subcommands(build_parser()) == PARSER_BEFORE_SPLIT


def test_option_defaults_come_from_their_one_home():
    """The defaults a user sees in --help are the library's own, not copies."""
    from pytest_sme2.cli import build_parser
    from pytest_sme2.gate.policy import (DEFAULT_LOAD_THRESHOLD_PCT,
                                         DEFAULT_MEMORY_THRESHOLD_PCT, DEFAULT_THRESHOLD_PCT)
    from pytest_sme2.measure.settings import BenchSettings

    parser = build_parser()
    run = parser.parse_args(["run", "m.pte", "--etdump", "x"])
    assert (run.runs, run.warmup, run.timeout) == (BenchSettings.runs, BenchSettings.warmup,
                                                    BenchSettings.timeout_s)
    assert (run.func.__name__, run.runner, run.device, run.taskset) == \
        ("_run", "python", "host", "auto")
    gate = parser.parse_args(["gate", "r.json", "--baseline-dir", "b"])
    assert (gate.fail_on_regression, gate.load_threshold, gate.memory_threshold) == (
        f"{DEFAULT_THRESHOLD_PCT:g}", f"{DEFAULT_LOAD_THRESHOLD_PCT:g}",
        f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}")
    assert {name: parser.parse_args(argv).func.__name__ for name, argv in (
        ("analyze", ["analyze", "t"]), ("compare", ["compare", "a", "b"]),
        ("export", ["export", "m"]), ("report", ["report", "r"]), ("setup", ["setup", "qemu"]),
        ("fake-phone", ["fake-phone"]))} == {
        "analyze": "_analyze", "compare": "_compare", "export": "_export", "report": "_report",
        "setup": "_setup", "fake-phone": "_fake_phone"}


def test_analyze_json_into_a_missing_folder_is_one_line(trace, tmp_path, capsys):
    """Found by the CSV work (issue 32): a --json path whose folder does not exist printed a
    FileNotFoundError traceback."""
    out = tmp_path / "missing" / "a.json"
    assert main(["analyze", str(trace), "--warmup", "2", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out}: cannot write" in err and "Traceback" not in err


def _session_etdump(folder, *, generation=None, runs=None):
    """An ETDump as a session leaves it, with the record beside it: 3 slow traced warm-up
    runs, then 10 measured ones (``runs``: the Execute runs, each a list of (op, ns))."""
    from pytest_sme2.readers.etdump_runs import EtdumpRuns, write_etdump_runs

    runs = runs or [[("Add (ND) #1", 900_000 if i < 3 else 1000)] for i in range(13)]
    path = folder / "native.etdump"
    path.write_bytes(make_etdump([execute_run(i * 2_000_000, ops) for i, ops in enumerate(runs)]))
    write_etdump_runs(path, EtdumpRuns(3, 10, "--sme2-trace-runs", "a pytest-sme2 session",
                                       generation))
    return path


def test_analyze_drops_the_warm_up_the_etdump_holds(tmp_path, capsys):
    """The plugin's ETDumps hold 3 traced warm-up runs: analyze reads that from the record
    beside the ETDump instead of timing them with the rest (issue 49, item 11)."""
    path = _session_etdump(tmp_path)
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 warm-up runs dropped and 10 measured, as recorded beside it "
                          "(native.etdump.runs.json: written by a pytest-sme2 session; "
                          "--sme2-trace-runs sets the measured ones)")
    assert "13 runs, 3 warm-up discarded, 10 timed" in out and "max 0.001, CV" in out
    path.with_name("native.etdump.runs.json").unlink()
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no warm-up run dropped: no record beside the ETDump" in out and "13 timed" in out
    assert main(["analyze", str(path), "--warmup", "3"]) == 0
    assert "3 warm-up run(s) dropped, as --warmup says" in capsys.readouterr().out


def test_analyze_splits_an_llms_generations_into_phases(tmp_path, capsys):
    """An LLM's ETDump: prefill and decode apart (no one median over both, CV 78%), warm-up
    generations dropped (issue 49, item 11)."""
    loop = {"prompt_tokens": 16, "new_tokens": 4, "warmup": 1, "generations": 3,
            "prefill_executes": 1, "decode_executes": 4, "dynamic_shape": True}
    runs = [[("Fully Connected (NC, F32) GEMM #1", 800_000 if k == 0 else 100_000)]
            for _ in range(3) for k in range(5)]
    path = _session_etdump(tmp_path, runs=runs)
    from pytest_sme2.readers.etdump_runs import EtdumpRuns, write_etdump_runs

    write_etdump_runs(path, EtdumpRuns(1, 2, "--sme2-trace-runs", "a pytest-sme2 session", loop))
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 warm-up generations dropped and 2 measured")
    assert "Generation: 2 of 16 prompt + 4 new tokens (pp16, tg4), 1 warm-up dropped" in out
    assert "  prefill: 1 execute(s), median 0.800 ms per generation" in out
    assert "  decode: 4 execute(s), median 0.401 ms per generation" in out
    assert "(decode steps): 8 runs, 0 warm-up discarded, 8 timed" in out
    assert "median 0.100 ms" in out


def test_compare_names_what_really_changes_the_etdumps_runs(tmp_path, capsys):
    """Noisy traced runs: the advice names the option that set them (--sme2-trace-runs in the
    session), not --runs, which does not change them (issue 49, item 12)."""
    runs = [[("Add (ND) #1", 900_000 if i < 3 else (1000 if i % 2 else 3000))]
            for i in range(13)]
    a = _session_etdump(tmp_path, runs=runs)
    assert main(["compare", str(a), str(a)]) == 0
    out = capsys.readouterr().out
    advice = next(line for line in out.splitlines() if "the results are noisy" in line)
    assert "--runs" not in advice.replace("--sme2-trace-runs", "")
    assert advice.endswith("raise the measured runs the ETDumps hold (now 10: "
                           "--sme2-trace-runs where they were written).")


def test_bisect_options_after_bad_are_one_line_before_anything_runs(capsys):
    """`bisect GOOD BAD benchmarks -k test_x --json b.json` gave every commit to pytest with
    --json, which refused it at each: "every commit tried is unbuildable" (issue 49, item 17).
    The plugin's --runs and --warmup are pytest's there, and stay so."""
    from pytest_sme2.cli.bisect import split_misplaced

    assert main(["bisect", "GOOD", "BAD", "benchmarks", "-k", "test_x", "--json", "b.json",
                 "--threshold=5"]) == 2
    assert capsys.readouterr().err == (
        "pytest-sme2: bisect's own option(s) --json, --threshold come after BAD, where every "
        "argument is pytest's selection: put them before GOOD (pytest-sme2 bisect --json "
        "b.json --threshold=5 GOOD BAD benchmarks -k test_x)\n")
    own = {"--json": True, "--resume": False}
    assert split_misplaced(["t.py", "--runs", "3", "--resume"], own) == (
        ["--resume"], ["t.py", "--runs", "3"])
