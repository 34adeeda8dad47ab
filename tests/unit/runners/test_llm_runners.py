"""The runners' generation argv, and a user's llama_main: its spec, its argv, and the parser of
its ``PyTorchObserver {json}`` line.

No llama_main can be built here (the wheel ships neither its sources nor the tokenizer and
custom-op libraries), so the parser is tested on lines shaped exactly as ExecuTorch's runner
prints them: ``extension/llm/runner/stats.h`` ``print_report`` writes
``printf("PyTorchObserver %s\\n", stats_to_json_string(stats))``, whose keys and order are
copied below from that source (pytorch/executorch at cff6f4d, 2026-08), and the older
``examples/models/llama2/runner`` form without the rate and model-execution keys.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_sme2.analysis.llm_observer import parse_observer, parse_observer_line
from pytest_sme2.results.generation import Generation
from pytest_sme2.runners.base import RunnerError, RunRequest
from pytest_sme2.runners.native.runner import NativeRunner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.spec import parse_runner_spec

# stats_to_json_string at upstream main: rates first (only when their span > 0), then counts
# and timestamps, SCALING_FACTOR_UNITS_PER_SECOND last. Values of a 1B-class run.
CURRENT = ('PyTorchObserver {"prefill_token_per_sec":266.667,"decode_token_per_sec":39.2157,'
           '"prompt_tokens":32,"generated_tokens":40,"model_load_start_ms":1717000000000,'
           '"model_load_end_ms":1717000001250,"inference_start_ms":1717000001251,'
           '"inference_end_ms":1717000002391,"model_execution_start_ms":1717000002360,'
           '"model_execution_end_ms":1717000002385,"prompt_eval_end_ms":1717000001371,'
           '"first_token_ms":1717000001371,"aggregate_sampling_time_ms":12,'
           '"aggregate_model_execution_time_ms":1100,"SCALING_FACTOR_UNITS_PER_SECOND":1000}')
# The llama2 runner's Stats (2024): no rates, no model_execution keys.
OLDER = ('PyTorchObserver {"prompt_tokens":6,"generated_tokens":122,"model_load_start_ms":'
         '1710000000000,"model_load_end_ms":1710000000500,"inference_start_ms":1710000000500,'
         '"inference_end_ms":1710000002940,"prompt_eval_end_ms":1710000000560,'
         '"first_token_ms":1710000000560,"aggregate_sampling_time_ms":30,'
         '"SCALING_FACTOR_UNITS_PER_SECOND":1000}')


def test_current_observer_line():
    s = parse_observer_line(CURRENT)
    assert (s.prompt_tokens, s.generated_tokens) == (32, 40)
    assert s.load_ms == 1250 and s.prefill_ms == 120 and s.decode_ms == 1020
    assert s.ttft_ms == 120 and s.sampling_ms == 12
    assert s.prefill_tokens_per_s == pytest.approx(266.667)   # the runner's own figure
    assert s.decode_tokens_per_s == pytest.approx(39.2157)


def test_older_observer_line_derives_the_rates():
    s = parse_observer_line("I 00:00:02.940 executorch:stats.h:97] " + OLDER)
    assert s.load_ms == 500 and s.ttft_ms == 60
    assert s.prefill_tokens_per_s == pytest.approx(6 / 60 * 1e3)
    assert s.decode_tokens_per_s == pytest.approx(122 / 2380 * 1e3)


def test_observer_lines_in_output_in_order():
    out = "\n".join(["Resetting threadpool", OLDER, "some text", CURRENT, "PyTorchObserver {bad"])
    assert [s.prompt_tokens for s in parse_observer(out)] == [6, 32]
    with pytest.raises(ValueError):
        parse_observer_line("no marker")


def _exe(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n")
    os.chmod(p, 0o755)
    return p


def test_llama_main_without_tokenizer_is_one_line(tmp_path):
    exe = _exe(tmp_path, "llama_main")
    with pytest.raises(RunnerError, match="a llama_main needs its tokenizer"):
        parse_runner_spec(str(exe))
    spec = parse_runner_spec(f"llm={exe},tokenizer={tmp_path / 'missing.model'}")
    with pytest.raises(RunnerError, match="tokenizer .* does not exist"):
        spec.make()


def test_llama_main_argv(tmp_path):
    exe = _exe(tmp_path, "llama_main")
    tok = tmp_path / "tokenizer.model"
    tok.write_bytes(b"x")
    runner = parse_runner_spec(f"llm={exe},tokenizer={tok}").make()
    req = RunRequest(Path("m.pte"), Path("o.etdump"), threads=2, runs=1, warmup=1,
                     generation=Generation(4, 8))
    argv = runner.command(req)
    assert argv[0] == str(exe)
    flags = dict(zip(argv[1::2], argv[2::2]))
    assert flags["--model_path"] == "m.pte" and flags["--tokenizer_path"] == str(tok)
    assert flags["--prompt"] == "hello hello hello hello" and flags["--seq_len"] == "13"
    assert flags["--cpu_threads"] == "2" and flags["--etdump_path"] == "o.etdump"
    assert "--warmup" in argv and "--ignore_eos" in argv
    assert runner.info.labels["runner"] == "llama_main"
    assert runner.data_files() == [tok]        # a phone gets it pushed beside the runner
    with pytest.raises(RunnerError, match="runs LLM generations only"):
        runner.command(RunRequest(Path("m.pte"), Path("o.etdump")))
    with pytest.raises(RunnerError, match="cannot fill a context depth"):
        runner.command(replace(req, generation=Generation(4, 8, depth=16)))


def test_native_and_python_generation_argv(tmp_path):
    req = RunRequest(Path("m.pte"), Path("o.etdump"), runs=5, warmup=2,
                     inputs=Path("ignored.bin"), generation=Generation(64, 32))
    native = NativeRunner(_exe(tmp_path, "sme2_runner")).command(req)
    assert native[-2:] == ["--generate", "64,32"] and "--input_file" not in native
    assert native[native.index("--num_executions") + 1] == "5"
    child = PythonRunner(fork=False).child_args(req)
    assert child[-2:] == ["--generate", "64,32"] and "--inputs" not in child
    deep = replace(req, generation=Generation(64, 32, depth=512))
    assert NativeRunner(_exe(tmp_path, "sme2_runner")).command(deep)[-1] == "64,32,512"
    assert PythonRunner(fork=False).child_args(deep)[-1] == "64,32,512"


def test_native_and_python_tensor_file_argv(tmp_path):
    req = RunRequest(Path("m.pte"), Path("o.etdump"), inputs=Path("in.bin"),
                     outputs=Path("out.bin"))
    native = NativeRunner(_exe(tmp_path, "sme2_runner")).command(req)
    assert native[-4:] == ["--input_file", "in.bin", "--output_file", "out.bin"]
    child = PythonRunner(fork=False).child_args(req)
    assert child[-4:] == ["--inputs", "in.bin", "--outputs", "out.bin"]
    no_outputs = replace(req, outputs=None)
    assert PythonRunner(fork=False).child_args(no_outputs)[-2:] == ["--inputs", "in.bin"]


def test_untraced_requests_ask_each_runner_for_traced_runs_apart(tmp_path):
    req = RunRequest(Path("m.pte"), Path("o.etdump"), runs=30, warmup=3, untraced=True,
                     trace_runs=10, trace_warmup=3)
    native = NativeRunner(_exe(tmp_path, "sme2_runner")).command(req)
    assert native[native.index("--trace_executions") + 1] == "10"
    assert native[native.index("--trace_warmup") + 1] == "3"
    child = PythonRunner(fork=False).child_args(req)
    assert child[child.index("--trace-runs") + 1] == "10"
    traced = RunRequest(Path("m.pte"), Path("o.etdump"))
    assert "--trace_executions" not in NativeRunner(_exe(tmp_path, "r2")).command(traced)
    assert "--trace-runs" not in PythonRunner(fork=False).child_args(traced)
    assert NativeRunner.times_untraced and PythonRunner.times_untraced
    # An ETDump is expected where anything was traced, and only there.
    assert traced.writes_etdump and req.writes_etdump
    assert not RunRequest(Path("m.pte"), Path("o.etdump"), untraced=True).writes_etdump


def test_text_llm_runner_argv_and_tokenizer(tmp_path, monkeypatch):
    from pytest_sme2.runners import text_llm_runner as tlr

    monkeypatch.setattr(tlr.TextLlmRunner, "_clock", lambda self: Path("/c/libclock.so"))
    req = RunRequest(Path("m.pte"), Path("o.etdump"), runs=5, warmup=1, untraced=True,
                     trace_runs=10, generation=Generation(16, 8))
    runner = tlr.TextLlmRunner()
    argv = runner.command(req)
    # Our clock is preloaded; its own stats come from its callback in the child.
    assert argv[:2] == ["env", "LD_PRELOAD=/c/libclock.so"]
    assert argv[argv.index("-m") + 1] == "pytest_sme2.runners.text_llm_child"
    assert argv[-2:] == ["--generate", "16,8"] and "--tokenizer" not in argv
    assert not runner.traces and not runner.brings_own_operators and runner.times_untraced
    own = tlr.TextLlmRunner(tokenizer=Path("/t/tokenizer.model"))
    assert own.command(req)[-2:] == ["--tokenizer", "/t/tokenizer.model"]
    # sme2_generate(tokenizer=...) beats the runner's own.
    asked = replace(req, generation=Generation(16, 8, tokenizer="/u/tokenizer.json"))
    assert own.command(asked)[-2:] == ["--tokenizer", "/u/tokenizer.json"]
    assert asked.phase_only("decode").generation.tokenizer == "/u/tokenizer.json"
    with pytest.raises(RunnerError, match="cannot fill a context depth"):
        runner.command(replace(req, generation=Generation(16, 8, depth=64)))
    with pytest.raises(RunnerError, match="runs LLM generations only"):
        runner.command(RunRequest(Path("m.pte"), Path("o.etdump")))
    with pytest.raises(RunnerError, match="runs only on the host"):
        runner.device_files()


def test_text_llm_runner_specs(tmp_path):
    tokenizer = tmp_path / "tokenizer.bin"
    tokenizer.write_bytes(b"x")
    spec = parse_runner_spec(f"et=text_llm_runner,tokenizer={tokenizer}")
    assert (spec.kind, spec.tokenizer) == ("text_llm_runner", tokenizer)
    runner = spec.make()
    assert runner.tokenizer == tokenizer and runner.info.kind == "text_llm_runner"
    assert parse_runner_spec("text_llm_runner").make().tokenizer is None
    with pytest.raises(RunnerError, match="tokenizer .*missing.bin does not exist"):
        parse_runner_spec(f"et=text_llm_runner,tokenizer={tmp_path / 'missing.bin'}")
    with pytest.raises(RunnerError, match="tokenizer= applies to text_llm_runner"):
        parse_runner_spec(f"n=native,tokenizer={tokenizer}")
    with pytest.raises(RunnerError, match="the text_llm_runner runner runs on the host"):
        parse_runner_spec("et=text_llm_runner,mask=sme")


def test_phase_only_requests():
    req = RunRequest(Path("m.pte"), Path("o.etdump"), runs=5, warmup=2,
                     generation=Generation(64, 32))
    pre, dec = req.phase_only("prefill"), req.phase_only("decode")
    # Their kernels are what they are for: no traced runs beside them.
    assert pre.trace_runs == 0 and dec.trace_runs == 0
    assert (pre.generation, pre.runs, pre.warmup) == (Generation(64, 0), 1, 0)
    assert dec.generation == Generation(1, 31)
    with pytest.raises(RunnerError):
        RunRequest(Path("m.pte"), Path("o.etdump")).phase_only("prefill")


def test_an_executor_runner_refuses_a_generation(tmp_path):
    runner = parse_runner_spec(str(_exe(tmp_path, "executor_runner"))).make()
    req = RunRequest(Path("m.pte"), Path("o.etdump"), generation=Generation(4, 2))
    with pytest.raises(RunnerError, match="has no token loop"):
        runner.command(req)
