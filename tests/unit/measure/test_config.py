"""The configuration: every option's value and every check, from plain mappings (no pytest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.measure.config import BaseDirs, Sme2Config, config_from_options
from pytest_sme2.measure.options import DEFAULT_BASELINE_DIR, EMULATED_DEFAULTS, OPTIONS
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.results.generation import Generation

DIRS = BaseDirs(invocation=Path("/work/here"), rootdir=Path("/repo"))


def _config(ini: dict | None = None, **values) -> Sme2Config:
    return config_from_options(values, ini or {}, DIRS)


def test_defaults():
    cfg = _config()
    assert cfg.settings == BenchSettings(runs=30, warmup=3, report_dir=Path("/repo/sme2-report"),
                                         cache_dir=None, reexport=False, timeout_s=600.0)
    assert cfg.devices == ("host",) and cfg.runners == () and cfg.taskset == "auto"
    assert (cfg.models, cfg.dtypes, cfg.threads) == (
        ("toy_cnn", "mobilenet_v3_small", "vit_tiny"), ("fp32", "fp16", "int8"), (1, 2))
    assert cfg.blocks == 6 and not cfg.emulated
    assert cfg.min_speedup == {"fp32": 1.2, "fp16": 1.5, "int8": 1.2, "int8_dynamic": 1.2}
    assert cfg.baseline_dir == Path("/repo") / DEFAULT_BASELINE_DIR and not cfg.save_baseline
    assert cfg.gate == GatePolicy(fail_on_regression=None, allow_foreign=False, categories=(),
                                  confirm_blocks=2)
    assert not cfg.gate.enforced and cfg.gate.threshold_pct == 10.0
    # The library's defaults are the options' defaults (no baseline folder without pytest).
    assert Sme2Config().settings == BenchSettings() and Sme2Config().baseline_dir is None


def test_the_command_line_beats_ini_and_paths_start_where_they_were_given():
    ini = {"sme2_runs": "4", "sme2_report_dir": "from-ini", "sme2_baseline_dir": "bl",
           "sme2_runners": ["a=python"]}
    cfg = _config(ini, runs="7", report_dir="out", runners=["b=native"])
    assert cfg.settings.runs == 7
    assert cfg.settings.report_dir == Path("/work/here/out")
    assert cfg.baseline_dir == Path("/repo/bl")
    assert cfg.runners == ("a=python", "b=native")       # ini lines, then --runner
    assert _config(ini).settings.runs == 4


def test_every_value():
    cfg = _config(device="android:R5CX@127.0.0.1:5037", warmup="0", sme2_timeout="30",
                  sme2_taskset="none", sme2_models="toy_cnn", sme2_dtypes="fp16,int8",
                  sme2_threads="1,4,1", sme2_blocks="3", sme2_min_speedup="fp16=2",
                  sme2_cache_dir="cache", fail_on_regression="7.5", sme2_confirm_blocks="0",
                  sme2_gate_categories="gemm,Convolution", sme2_reexport=True,
                  save_baseline=True, allow_foreign_baseline=True)
    assert cfg.settings.warmup == 0 and cfg.settings.timeout_s == 30.0
    assert cfg.settings.cache_dir == Path("/work/here/cache") and cfg.settings.reexport
    assert cfg.taskset is None and cfg.models == ("toy_cnn",) and cfg.dtypes == ("fp16", "int8")
    assert cfg.threads == (1, 4) and cfg.blocks == 3 and cfg.min_speedup == {"fp16": 2.0}
    assert cfg.save_baseline
    assert cfg.gate == GatePolicy(fail_on_regression=7.5, allow_foreign=True,
                                  categories=("GEMM", "Convolution"), confirm_blocks=0)
    assert cfg.gate.enforced and cfg.gate.threshold_pct == 7.5
    assert _config(sme2_gate_categories="GEMM,all").gate.categories == ("all",)
    assert cfg.document() == {"device": "android:R5CX@127.0.0.1:5037",
                              "devices": ["android:R5CX@127.0.0.1:5037"], "runs": 30,
                              "warmup": 0, "blocks": 3, "taskset": None,
                              "min_speedup": {"fp16": 2.0}}


def test_an_emulated_device_measures_less_unless_told_otherwise():
    cfg = _config(device="qemu")
    assert cfg.emulated and (cfg.settings.runs, cfg.settings.warmup, cfg.blocks,
                             cfg.settings.trace_runs) == (5, 1, 2, 2)
    assert set(EMULATED_DEFAULTS) == {"runs", "warmup", "sme2_blocks", "sme2_trace_runs"}
    assert _config().settings.trace_runs == 10
    told = _config(device="qemu:max", runs="30", sme2_blocks="6")
    assert (told.settings.runs, told.settings.warmup, told.blocks) == (30, 1, 6)
    assert _config({"sme2_device": "qemu", "sme2_runs": "8"}).settings.runs == 8


@pytest.mark.parametrize("values,message", [
    (dict(runs="0"), "--runs must be a positive number of timed runs, got 0"),
    (dict(runs="many"), "--runs must be a whole number, got 'many'"),
    (dict(warmup="-1"), "--warmup must be 0 or more, got -1"),
    (dict(sme2_trace_runs="0"), "--sme2-trace-runs must be 1 or more: the operator breakdown "
                                "comes from traced runs, got 0"),
    (dict(sme2_timeout="0"), "--sme2-timeout must be a positive number of seconds, got 0"),
    (dict(sme2_blocks="1"), "--sme2-blocks must be 2 or more, got 1"),
    (dict(sme2_confirm_blocks="-1"), "--sme2-confirm-blocks must be 0 or more, got -1"),
    (dict(fail_on_regression="-5"), "--fail-on-regression must be a percentage of 0 or more, "
                                    "got '-5'"),
    (dict(fail_on_regression="ten"), "--fail-on-regression must be a percentage of 0 or "
                                     "more, got 'ten'"),
    (dict(fail_on_regression="nan"), "--fail-on-regression must be a percentage"),
    (dict(sme2_min_speedup="fp32"), "--sme2-min-speedup: 'fp32' is not DTYPE=NUMBER"),
    (dict(sme2_min_speedup="bf16=2"), "--sme2-min-speedup: 'bf16=2' is not DTYPE=NUMBER"),
    (dict(sme2_gate_categories="Convolution,Embedding"),
     "--sme2-gate-categories: unknown category 'Embedding'; known: Convolution, GEMM"),
    (dict(sme2_tokenizer="nope.model"),
     "--sme2-tokenizer: tokenizer /work/here/nope.model does not exist; pass the model's "
     "tokenizer.model (SentencePiece)"),
    (dict(sme2_dtypes="bf16"), "--sme2-dtypes: unknown dtype 'bf16'; choose from fp32"),
    (dict(sme2_threads="0"), "--sme2-threads: 0 threads; give 1 or more"),
    (dict(sme2_gate_mode="pinpoint"), "--sme2-gate-mode: expected one of stored, ab, got "
                                      "'pinpoint'"),
    (dict(sme2_precision="tight"), "--sme2-precision: expected a percentage such as 2 or 2%, "
                                   "got 'tight'"),
    (dict(sme2_precision="0%"), "--sme2-precision: must lie above 0 and below 100 percent, "
                                "got 0"),
    (dict(sme2_max_pairs="1"), "--sme2-max-pairs: expected a whole number of pairs, 2 or more, "
                               "got '1'"),
    (dict(sme2_on_unresolved="ignore"), "--sme2-on-unresolved: expected one of fail, warn, "
                                        "pass, got 'ignore'"),
])
def test_bad_values_are_one_line_naming_the_option(values, message):
    with pytest.raises(Sme2Error) as e:
        _config(**values)
    assert message in str(e.value)


def test_cannot_tell_options_reach_the_policy():
    gate = _config(sme2_max_pairs="80", sme2_on_unresolved="FAIL").gate
    assert (gate.max_pairs, gate.on_unresolved) == (80, "fail")
    assert (_config().gate.max_pairs, _config().gate.on_unresolved) == (40, "warn")


def test_every_option_has_an_ini_twin():
    assert all(o.ini.startswith("sme2_") for o in OPTIONS.values())
    assert len({o.ini for o in OPTIONS.values()}) == len(OPTIONS)


# -- --sme2-measure (issue 13) -----------------------------------------------------------------


def test_measure_defaults_to_time():
    assert _config().measure == "time" and Sme2Config().measure == "time"
    assert OPTIONS["sme2_measure"].ini == "sme2_measure"


@pytest.mark.parametrize("values, ini, expected", [
    ({"sme2_measure": "instructions"}, {}, "instructions"),
    ({}, {"sme2_measure": "instructions"}, "instructions"),
    ({"sme2_measure": "time"}, {"sme2_measure": "instructions"}, "time"),   # command line wins
    ({"sme2_measure": " Instructions "}, {}, "instructions"),
])
def test_measure_from_the_command_line_or_ini(values, ini, expected):
    assert _config(ini, **values).measure == expected


@pytest.mark.parametrize("bad", ["cycles", "", "time,instructions"])
def test_an_unknown_measure_is_a_usage_error_listing_both(bad):
    with pytest.raises(Sme2Error, match=r"--sme2-measure: unknown measure .*; choose from "
                                        r"time, instructions$"):
        _config(sme2_measure=bad)


def test_gate_mode_and_precision_parse_into_the_policy():
    assert (_config().gate.mode, _config().gate.precision_pct) == ("stored", None)
    assert _config({"sme2_gate_mode": "stored"}).gate.mode == "stored"
    told = _config(sme2_gate_mode="AB", sme2_precision="2%").gate
    assert (told.mode, told.precision_pct) == ("ab", 2.0)


def test_each_option_names_its_parser_and_the_field_it_sets():
    """The table is the configuration's one description: every option but --device (a list)
    has a parser, and every field it names exists where it says."""
    from dataclasses import fields

    from pytest_sme2.measure.options import FLAGS

    have = {"": {f.name for f in fields(Sme2Config)},
            "settings": {f.name for f in fields(BenchSettings)},
            "gate": {f.name for f in fields(GatePolicy)}}
    for dest, option in OPTIONS.items():
        assert (option.parser is None) == (dest == "device"), dest
        part, _, name = option.to.rpartition(".")
        assert not option.to or name in have[part], (dest, option.to)
    assert all(flag.to.rpartition(".")[2] in have[flag.to.rpartition(".")[0]]
               for flag in FLAGS.values())


def test_the_a_b_options_reach_the_policy():
    c = _config(sme2_gate_mode="ab", sme2_precision="2%", sme2_precision_budget="30",
                sme2_ab_base_runner="python")
    assert (c.gate.mode, c.gate.precision_pct, c.gate.precision_budget_s, c.gate.base_runner) \
        == ("ab", 2.0, 30.0, "python")
    assert _config().gate.precision_budget_s == 60.0 and _config().gate.base_runner is None


@pytest.mark.parametrize("values,message", [
    (dict(sme2_ab_base_runner="python"), "--sme2-ab-base-runner: only used with "
                                         "--sme2-gate-mode ab"),
    (dict(sme2_gate_mode="ab", sme2_ab_base_runner="old_build"),
     "--sme2-ab-base-runner: no runner named 'old_build'; configured: native, python"),
    (dict(sme2_precision="2", sme2_precision_budget="0"),
     "--sme2-precision-budget: expected seconds above 0, got '0'"),
])
def test_bad_a_b_options_are_one_line(values, message):
    with pytest.raises(Sme2Error, match=message):
        _config(**values)


def test_the_generation_matrix_follows_the_threads_the_user_gave():
    """--sme2-threads 1,2 gives the LLMs' scaling table; without it an LLM runs at 1 thread
    (issue 49, item 8: the built-in LLM benchmark ignored the option without a word)."""
    assert (_config().llm_threads, _config().threads_given) == ((1,), False)
    given = _config(sme2_threads="1,2")                 # the default's value, but given
    assert given.llm_threads == (1, 2) and given.threads_given
    from_ini = _config({"sme2_threads": "1,4"})
    assert from_ini.llm_threads == (1, 4) and from_ini.threads_given


def test_a_runner_path_that_does_not_exist_is_one_line_when_configured(tmp_path):
    """Issue 49, item 15: it was accepted and listed as "x (configured, unused)"."""
    dirs = BaseDirs(invocation=tmp_path, rootdir=tmp_path)
    with pytest.raises(Sme2Error) as e:
        config_from_options({"runners": ["x=/nonexistent/runner"]}, {}, dirs)
    assert str(e.value) == ("--runner 'x=/nonexistent/runner': runner /nonexistent/runner does "
                            "not exist; give the path of your executor_runner (or NAME=native, "
                            "NAME=python)")
    with pytest.raises(Sme2Error, match="tokenizer .*tok.model does not exist"):
        config_from_options({"runners": ["llm=/bin/true,tokenizer=tok.model"]}, {}, dirs)
    (tmp_path / "run").write_text("#!/bin/sh\n")
    assert config_from_options({"runners": ["x=./run"]}, {}, dirs).runners == ("x=./run",)


def test_a_generation_takes_what_a_test_left_out_from_the_session():
    settings = BenchSettings(prompt_tokens=16, new_tokens=8, tokenizer=Path("t.json"))
    assert settings.generation() == Generation(16, 8, 0, tokenizer="t.json")
    assert settings.generation(4, 0, 32, "u.json") == Generation(4, 0, 32, tokenizer="u.json")
    # a bad count is one line, as sme2_generate and sme2_compare fail the test with it
    with pytest.raises(Sme2Error, match=r"^a generation needs prompt_tokens >= 1 and "
                                        r"new_tokens >= 0, got 16,-1$"):
        settings.generation(new_tokens=-1)
