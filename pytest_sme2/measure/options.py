"""The plugin's option table: every option with its ini twin, default, help, the parser that
checks its text (:mod:`pytest_sme2.measure.option_values`) and the field of the configuration
its value sets (:data:`OPTIONS`); the command-line-only flags (:data:`FLAGS`) and the defaults
an emulated CPU gets. :func:`pytest_sme2.measure.config.config_from_options` applies the table;
the plugin registers it with pytest; docs/reference/options.md is generated from it."""

from __future__ import annotations

from typing import NamedTuple

from pytest_sme2.devices.kinds import HOST, device_help
from pytest_sme2.devices.thermal import DEFAULT_TIMEOUT_S as COOLDOWN_TIMEOUT_S
from pytest_sme2.gate.policy import (DEFAULT_CONFIRM_BLOCKS, DEFAULT_LOAD_THRESHOLD_PCT,
                                     DEFAULT_MAX_PAIRS, DEFAULT_MEMORY_THRESHOLD_PCT,
                                     DEFAULT_ON_UNRESOLVED, DEFAULT_PRECISION_BUDGET_S)
from pytest_sme2.measure.matrix import DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_THREADS
from pytest_sme2.measure import option_values as parse
from pytest_sme2.measure.settings import DEFAULT_LOADS, DEFAULT_TRACE_RUNS, MIN_BLOCKS
from pytest_sme2.programs.export import DTYPES
from pytest_sme2.programs.llm.schemes import LLM_SCHEMES

# Lower bounds asserted on the SME2 speed-up's confidence interval. The seed kit measured, on
# one core, 3.9x (fp16) and 1.8x (int8) end to end on a conv-heavy model; a model whose time is
# not in Convolution/GEMM gains less, so the defaults ask for a clear but modest effect.
DEFAULT_MIN_SPEEDUP = "fp32=1.2,fp16=1.5,int8=1.2,int8_dynamic=1.2"
DEFAULT_BASELINE_DIR = "benchmarks/baselines"


class Option(NamedTuple):
    ini: str
    default: str
    help: str
    parser: parse.Parser | None = None    # its text to its value (None: --device, a list)
    # The Sme2Config field its value sets: "blocks", "settings.runs" (BenchSettings'),
    # "gate.mode" (GatePolicy's); "": config_from_options assembles it with another option.
    to: str = ""


class Flag(NamedTuple):
    help: str
    to: str         # the field it sets, as Option.to


# option dest (--dest-with-dashes) -> ini name, default, help, parser, field
OPTIONS: dict[str, Option] = {
    "device": Option("sme2_device", HOST.name, device_help()),
    "runs": Option("sme2_runs", "30", "timed runs per benchmark (default 30; 5 on qemu)",
                   parse.whole(1, "a positive number of timed runs"), "settings.runs"),
    "warmup": Option("sme2_warmup", "3", "warm-up runs per benchmark, discarded (default 3; 1 "
                     "on qemu); the traced runs get as many",
                     parse.whole(0, "0 or more"), "settings.warmup"),
    "sme2_trace_runs": Option("sme2_trace_runs", str(DEFAULT_TRACE_RUNS),
                              "operator-traced runs per block, after the untraced timed ones "
                              "and in the same process: the operator breakdown's (default "
                              f"{DEFAULT_TRACE_RUNS}; 2 on qemu); a runner that cannot time "
                              "without its tracer traces its timed runs instead",
                              parse.whole(1, "1 or more: the operator breakdown comes from "
                                          "traced runs"), "settings.trace_runs"),
    "report_dir": Option("sme2_report_dir", "sme2-report",
                         "folder for results.json, report.md, charts, ETDumps (default "
                         "sme2-report/)", parse.report_dir, "settings.report_dir"),
    "sme2_cache_dir": Option("sme2_cache_dir", "",
                             "export cache folder (default ~/.cache/pytest-sme2/exports)",
                             parse.path, "settings.cache_dir"),
    "sme2_export_jobs": Option("sme2_export_jobs", "auto",
                               "processes that export the collected models the cache lacks, "
                               "side by side, before the first measurement: auto (the CPUs, "
                               "as memory allows) or a number; 1: each test exports its own "
                               "(docs/models.md)", parse.export_jobs, "export_jobs"),
    "sme2_timeout": Option("sme2_timeout", "600", "seconds one runner invocation may take",
                           parse.seconds(1, "a positive number of seconds"), "settings.timeout_s"),
    "sme2_taskset": Option("sme2_taskset", "auto",
                           "CPU pinning on Android: auto (the biggest cores), none, or a hex "
                           "mask", parse.taskset, "taskset"),
    "sme2_models": Option("sme2_models", ",".join(DEFAULT_MODELS),
                          "models of the benchmark matrix: registered names, .pte files "
                          "(as exported: no dtype axis, id m.pte-t1) and library:Class[?k=v] "
                          "(transformers:MobileViTModel?image_size=128); docs/models.md",
                          parse.listed),
    "sme2_pte": Option("sme2_pte", "", "glob(s) of .pte files added to the matrix models "
                       "(comma-separated; e.g. 'exported/*.pte'; each must match a file)",
                       parse.listed),
    "sme2_dtypes": Option("sme2_dtypes", ",".join(DEFAULT_DTYPES),
                          f"dtypes of the benchmark matrix ({', '.join(DTYPES)})",
                          parse.dtypes, "dtypes"),
    "sme2_threads": Option("sme2_threads", ",".join(map(str, DEFAULT_THREADS)),
                           "thread counts of the benchmark matrix, and of the LLMs' "
                           "generation matrix where given (1 thread there otherwise)",
                           parse.threads, "threads"),
    "sme2_blocks": Option("sme2_blocks", str(MIN_BLOCKS),
                          "interleaved blocks per side in a comparison, one runner process "
                          f"each (default {MIN_BLOCKS}; 2 on qemu)",
                          parse.whole(2, "2 or more"), "blocks"),
    "sme2_confirm_blocks": Option("sme2_confirm_blocks", str(DEFAULT_CONFIRM_BLOCKS),
                                  "when the baseline gate suspects a regression, measure this "
                                  "many more blocks (fresh runner processes) and judge all of "
                                  f"them (default {DEFAULT_CONFIRM_BLOCKS}; 0: judge the first "
                                  "block alone)",
                                  parse.whole(0, "0 or more"), "gate.confirm_blocks"),
    "sme2_gate_mode": Option("sme2_gate_mode", "stored",
                             "what the time gate judges against: stored (the baseline's "
                             "sessions; a slow one the next disagrees with is left out, and "
                             "named) or ab (the base program, kept by --save-baseline, "
                             "re-measured in this session in interleaved pairs; with nothing "
                             "to re-measure, stored, saying why; docs/regression-gate.md)",
                             parse.gate_mode, "gate.mode"),
    "sme2_precision": Option("sme2_precision", "",
                             "take more blocks (pairs in a comparison or ab mode) until every "
                             "interval is within +-PCT percent, at least 3, up to the budget; "
                             "the summary and results.json name those that could not, and why",
                             parse.precision, "gate.precision_pct"),
    "sme2_precision_budget": Option("sme2_precision_budget", f"{DEFAULT_PRECISION_BUDGET_S:g}",
                                    "seconds of extra measuring one benchmark or comparison "
                                    "may spend: --sme2-precision's blocks, and the pairs a "
                                    "'cannot tell' verdict takes (default "
                                    f"{DEFAULT_PRECISION_BUDGET_S:g})",
                                    parse.budget, "gate.precision_budget_s"),
    "sme2_max_pairs": Option("sme2_max_pairs", str(DEFAULT_MAX_PAIRS),
                             "when a comparison or the gate cannot tell a change of its "
                             "threshold's size from none, it doubles its interleaved pairs up "
                             f"to this many (default {DEFAULT_MAX_PAIRS}) within the time "
                             "budget, then says 'cannot tell' and what it could resolve",
                             parse.max_pairs, "gate.max_pairs"),
    "sme2_on_unresolved": Option("sme2_on_unresolved", DEFAULT_ON_UNRESOLVED,
                                 "what a 'cannot tell' verdict does under --fail-on-regression: "
                                 "fail the test, warn (default: a line of its own in the "
                                 "summary) or pass", parse.on_unresolved, "gate.on_unresolved"),
    "sme2_ab_base_runner": Option("sme2_ab_base_runner", "",
                                  "with --sme2-gate-mode ab: the runner (a --runner name) that "
                                  "measures the base, for a runtime change; default: the "
                                  "benchmark's own runner", parse.text_or_none, "gate.base_runner"),
    "sme2_gate_categories": Option("sme2_gate_categories", "",
                                   "operator categories the baseline gate judges besides "
                                   "end-to-end latency, comma-separated (e.g. Convolution,GEMM), "
                                   "or 'all'; a category under 5% of the end-to-end time is not "
                                   "gated", parse.gate_categories, "gate.categories"),
    "sme2_min_speedup": Option("sme2_min_speedup", DEFAULT_MIN_SPEEDUP,
                               "SME2-on vs -off speed-up the lower bound of its 95% interval "
                               "must reach, per dtype (DTYPE=X,...); the seed kit measured "
                               "3.9x fp16 and 1.8x int8 on one core on a conv-heavy model",
                               parse.min_speedup, "min_speedup"),
    "baseline_dir": Option("sme2_baseline_dir", DEFAULT_BASELINE_DIR,
                           "folder of stored baselines, one JSON file per benchmark key (where "
                           "it ran, what was asked)", parse.path, "baseline_dir"),
    "sme2_measure": Option("sme2_measure", parse.MEASURES[0],
                           "time (default), or instructions: host sme2_bench benchmarks also "
                           "count instructions per Method::execute once under valgrind, "
                           "recorded, saved and gated like time (docs/instruction-counts.md)",
                           parse.choice(parse.MEASURES, "measure"), "measure"),
    "fail_on_regression": Option("sme2_fail_on_regression", "",
                                 "the change to detect, PCT percent: fail a benchmark (and the "
                                 "session) whose slow-down is clear of noise and at least half of "
                                 "PCT against its baseline; 'no change' once a change of PCT is "
                                 "ruled out, else 'cannot tell' (without it, verdicts are still "
                                 "reported, with a 10% threshold)",
                                 parse.threshold, "gate.fail_on_regression"),
    "sme2_loads": Option("sme2_loads", str(DEFAULT_LOADS),
                         "cold loads per benchmark: its own process plus load-only processes "
                         f"(load and one execute each); load time and first inference are "
                         f"their medians (default {DEFAULT_LOADS}; one on an emulated CPU)",
                         parse.whole(1, "1 or more"), "settings.loads"),
    "sme2_load_threshold": Option("sme2_load_threshold", f"{DEFAULT_LOAD_THRESHOLD_PCT:g}",
                                  "with --fail-on-regression, also fail a benchmark whose cold "
                                  "load time grew by a change of PCT percent to detect, by "
                                  f"the same rule (default {DEFAULT_LOAD_THRESHOLD_PCT:g}; off: "
                                  "judge and report only)",
                                  parse.threshold_or_off, "gate.load_threshold_pct"),
    "sme2_memory_threshold": Option("sme2_memory_threshold",
                                    f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}",
                                    "with --fail-on-regression, also fail a benchmark whose "
                                    "peak resident memory grew by a change of PCT percent to "
                                    "detect, by the same rule (default "
                                    f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}; off: judge and report "
                                    "only)", parse.threshold_or_off, "gate.memory_threshold_pct"),
    "sme2_cooldown": Option("sme2_cooldown", "",
                            "before each block on a device with thermal sensors (Android), "
                            "wait until its hottest CPU sensor is at or below TEMP_C degrees "
                            "and it reports no throttling (e.g. 37); a block still hot at the "
                            "timeout is measured and flagged; the host and QEMU have no sensors",
                            parse.temperature),
    "sme2_cooldown_timeout": Option("sme2_cooldown_timeout", f"{COOLDOWN_TIMEOUT_S:g}",
                                    "seconds --sme2-cooldown waits at most before a block "
                                    f"(default {COOLDOWN_TIMEOUT_S:g})", parse.positive_seconds),
    "sme2_progress": Option("sme2_progress", "auto",
                            "a progress line (case i of n, elapsed; block i of n in long "
                            "comparisons) at most every SECONDS: auto (30 s, the first after "
                            "30 s; 300 s with -q; none with -qq), a number (0: before every "
                            "case and after every block), or off", parse.progress, "progress"),
    "sme2_sample": Option("sme2_sample", parse.SAMPLING[0],
                          "an evidence process per benchmark (never timed) samples which "
                          "kernels ran: auto (an Arm64 device that reports SME or SME2, or "
                          "cannot tell), on (every device our runner runs on; the host needs "
                          "a C compiler), off", parse.choice(parse.SAMPLING), "settings.sample"),
    "sme2_probe": Option("sme2_probe", parse.PROBING[0],
                         "the machine-state probe, a fixed GEMM timed in each block's process "
                         "before and after its runs, says which speed the machine ran at: auto "
                         "(1-thread blocks on every device but an emulated CPU, whose speed "
                         "means nothing; at 2 or more threads the probe's own thread hand-offs "
                         "move it), on, off", parse.choice(parse.PROBING), "settings.probe"),
    "sme2_llm_models": Option("sme2_llm_models", "auto",
                              "LLMs of the generation matrix (sme2_llm_case: LLM models x "
                              "--sme2-llm-schemes x --sme2-threads): registered LLMs, "
                              "executorch:llama?..., transformers:...ForCausalLM or .pte files; "
                              "auto: tiny_llama (ExecuTorch's custom SDPA) on the host, "
                              "tiny_llama_plain (plain attention) on QEMU and phones, where "
                              "our runners cannot load the custom operators",
                              parse.listed, "llm_models"),
    "sme2_llm_schemes": Option("sme2_llm_schemes", "8da8w",
                               "the LLMs' quantization schemes, their dtype axis "
                               f"({', '.join(LLM_SCHEMES)}; default 8da8w: one export of "
                               "tiny_llama costs about a minute of CPU)",
                               parse.llm_schemes, "llm_schemes"),
    "sme2_context_depth": Option("sme2_context_depth", "0",
                                 "the LLMs' context depths, an axis of the generation matrix: "
                                 "tokens filled into the KV cache, untimed, before each timed "
                                 "prompt (llama-bench's -d; e.g. 0,32: pp64 and pp64 @ d32; "
                                 "tiny_llama's cache holds 128 tokens, 0,512 needs a longer one: "
                                 "--sme2-llm-models 'executorch:llama?max_context_len=1024')",
                                 parse.depths, "context_depths"),
    "sme2_prompt_tokens": Option("sme2_prompt_tokens", "64", "an LLM runs generations: "
                                 "prompt tokens prefilled per generation (default 64)",
                                 parse.whole(1, "1 or more"), "settings.prompt_tokens"),
    "sme2_new_tokens": Option("sme2_new_tokens", "32", "an LLM's greedy decode steps per "
                              "generation (default 32)",
                              parse.whole(1, "1 or more"), "settings.new_tokens"),
    "sme2_tokenizer": Option("sme2_tokenizer", "",
                             "the LLM's tokenizer (tokenizer.model, tokenizer.json, tiktoken or "
                             "llama2.c tokenizer.bin) for a runner that takes text, ExecuTorch's "
                             "text_llm_runner; default: one generated for the program",
                             parse.tokenizer, "settings.tokenizer"),
    "sme2_history": Option("sme2_history", "",
                           "record every session into this history store (a SQLite path, "
                           "sqlite:///... or postgresql://...) after results.json and "
                           "report.md; a store that fails costs one line (docs/history.md)",
                           parse.history, "history"),
    "sme2_history_baseline": Option("sme2_history_baseline", "",
                                    "with --sme2-history, the gate's baselines are the last N "
                                    "sessions of each key on BRANCH in the store (BRANCH or "
                                    "BRANCH:N, N default 10) instead of --baseline-dir",
                                    parse.text_or_none, "history_baseline"),
    "sme2_benchmark_json": Option("sme2_benchmark_json", "",
                                  "at session end, also write the results to this file in "
                                  "pytest-benchmark's JSON format (pytest-benchmark compare, "
                                  "CI charts; every block's times, per benchmark)",
                                  parse.file_path, "benchmark_json"),
    "sme2_llama_bench": Option("sme2_llama_bench", "",
                               "at session end, also write the LLM generations as llama-bench "
                               "rows (a test per phase: pp P, tg N) to this file, in the "
                               "format its extension names: .json, .jsonl, .csv or .sqlite "
                               "(appended); llama.cpp's compare-llama-bench.py reads it",
                               parse.llama_bench, "llama_bench"),
}
# store_true options (command line only): dest -> help, field
FLAGS: dict[str, Flag] = {
    "sme2_reexport": Flag("export models again even when the cache has them",
                          "settings.reexport"),
    "save_baseline": Flag("record this session's results as a new baseline session (each "
                          "benchmark's file keeps its last 10 sessions)", "save_baseline"),
    "sme2_strict_outputs": Flag("fail a benchmark whose outputs (an LLM's sampled logits) hold "
                                "NaN or inf; without it such a benchmark passes, flagged in its "
                                "line, results.json and report.md", "strict_outputs"),
    "allow_foreign_baseline": Flag("compare against baselines recorded on another device "
                                   "(other SoC, CPU set, ABI, SME2, emulated) instead of "
                                   "refusing; the reason stays in the verdict",
                                   "gate.allow_foreign"),
}
RUNNERS_DEST, RUNNERS_INI = "runners", "sme2_runners"   # --runner (repeatable) / ini lines
REPEATABLE = {"device"}   # options given several times on the command line (a list of values)

# An emulated CPU runs a model 100-1000x slower than the host, and its timings say nothing about
# speed: fewer runs and blocks suffice for what it does prove (kernels, outputs). Applied only
# where the command line did not set the option and the ini value is the default.
EMULATED_DEFAULTS = {"runs": "5", "warmup": "1", "sme2_blocks": "2", "sme2_trace_runs": "2"}


