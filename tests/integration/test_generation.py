"""LLM generations on the host, end to end: ExecuTorch's export_llama .pte (a user's .pte, tiny
and seeded: tests/llm_export.py) run by the native runner's C++ token loop and by the Python
runtime's loop, analysed per phase; the same checkpoint exported with ExecuTorch's custom SDPA
on every host runner (ExecuTorch's TextLLMRunner too); and the one-line refusals (prompt over
the limits, a forward that is not (tokens, input_pos), a program whose state leaks between
generations, a missing custom operator)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sme2.analysis.phases import analyze_generation_file
from pytest_sme2.analysis.runner_summary import parse_summary
from pytest_sme2.results.generation import Generation
from pytest_sme2.runners.base import Runner, RunRequest


@pytest.fixture(scope="module")
def native():
    from pytest_sme2.runners.native import native_runner

    return native_runner()


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def _python_argv(request: RunRequest) -> list[str]:
    from pytest_sme2.runners.python import PythonRunner

    return [sys.executable, "-m", "pytest_sme2.runners.python_child",
            *PythonRunner(fork=False).child_args(request)]


def _refusal(argv: list[str]) -> str:
    """A runner's refusal: status 1, and the last line of stderr (the one line it is)."""
    done = _run(argv)
    assert done.returncode == 1, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1]


def _refusals(native: Runner, request: RunRequest) -> list[str]:
    """How the native and the Python runner each refuse ``request``."""
    return [_refusal(argv) for argv in (native.command(request), _python_argv(request))]


def test_native_and_python_generate_the_same_tokens(native, tiny_llama_8da4w, tmp_path):
    g = Generation(16, 8)
    results = {}
    for name in ("native", "python"):
        req = RunRequest(tiny_llama_8da4w, tmp_path / f"{name}.etdump", runs=3, warmup=1,
                         generation=g)
        done = _run(native.command(req) if name == "native" else _python_argv(req))
        assert done.returncode == 0, done.stderr[-2000:]
        summary = parse_summary(done.stdout)
        assert summary.executions == 4 * (1 + 8)      # dynamic length: one prefill execute
        results[name] = analyze_generation_file(req.etdump, done.stdout)
    n, p = results["native"], results["python"]
    assert n.tokens == p.tokens and len(n.tokens) == 9
    assert len(set(n.tokens)) > 1                     # seeded weights: not one token repeated
    for r in (n, p):
        assert r.generations == 3 and r.dynamic_shape
        assert r.max_seq_len == 128 and r.vocab_size == 512
        assert r.prefill.tokens_per_s > 0 and r.decode.tokens_per_s > 0
        assert r.decode.token_median_ms > 0 and r.ttft_ms >= r.prefill.median_ms
        assert r.prefill.categories_ms["GEMM"] > 0 and r.decode.categories_ms["GEMM"] > 0


def test_llm_programs_are_told_by_their_methods(tiny_llama_8da4w, toy_export, tmp_path):
    from pytest_sme2.programs.llm.facts import is_llm_program
    from tests.llm_export import export_static_program

    assert is_llm_program(tiny_llama_8da4w)
    assert not is_llm_program(toy_export.pte)
    assert not is_llm_program(export_static_program(tmp_path / "s.pte"))  # no constant methods


def test_phase_only_processes(native, tiny_llama_8da4w, tmp_path):
    base = RunRequest(tiny_llama_8da4w, tmp_path / "x.etdump", generation=Generation(16, 8))
    for phase, executes in (("prefill", 1), ("decode", 8)):
        req = base.phase_only(phase)
        done = _run(native.command(req))
        assert done.returncode == 0, done.stderr[-2000:]
        assert parse_summary(done.stdout).executions == executes
        r = analyze_generation_file(req.etdump, done.stdout)
        assert r.phase(phase).median_ms > 0


def test_a_generation_at_depth_fills_the_cache_untimed(native, tiny_llama_8da4w, tmp_path):
    """64 tokens in the cache first (one execute; four of 16 with a chunk), then the timed
    prompt and decode steps at positions 64..: both runners agree on the tokens, the fill is
    in the process's executes but in neither phase, and the tokens are not depth 0's."""
    results = {}
    for name, g in (("native", Generation(16, 8, 64)), ("python", Generation(16, 8, 64)),
                    ("chunked", Generation(16, 8, 64, 16)), ("d0", Generation(16, 8))):
        req = RunRequest(tiny_llama_8da4w, tmp_path / f"{name}.etdump", runs=2, warmup=1,
                         generation=g, untraced=name == "python", trace_runs=0)
        done = _run(_python_argv(req) if name == "python" else native.command(req))
        assert done.returncode == 0, done.stderr[-2000:]
        summary = parse_summary(done.stdout)
        fill = 4 if name == "chunked" else 0 if name == "d0" else 1
        assert summary.generation.depth_executes == fill
        assert summary.executions == 3 * (fill + 1 + 8)
        if name == "python":     # untraced: each execute by the runner's clock, the fill's too
            assert len(summary.execute_ms) == summary.executions
            from pytest_sme2.analysis.timing import process_runs
            from pytest_sme2.analysis.phases import analyze_generation

            runs = process_runs(None, summary, 1, name)
            results[name] = analyze_generation(runs.timed, summary.generation)
        else:
            results[name] = analyze_generation_file(req.etdump, done.stdout)
    n, p, c, d0 = (results[k] for k in ("native", "python", "chunked", "d0"))
    assert n.tokens == p.tokens == c.tokens and n.tokens != d0.tokens
    for r in (n, p, c):
        assert r.depth == 64 and r.generations == 2
        assert r.prefill.executes == 1 and r.decode.executes == 8
        assert r.bench_name("decode") == "tg8 @ d64"
    # The fill (64 tokens) is not the 16-token prefill: the prefill is no slower than at depth 0
    # by the fill's cost (within this VM's noise: a 4x margin).
    assert n.prefill.median_ms < 4 * d0.prefill.median_ms


def test_phase_only_processes_at_depth(native, tiny_llama_8da4w, tmp_path):
    """The decode-only process fills its depth one token per execute: one-token executes only
    (decode kernels), 32 fill + 8 steps."""
    base = RunRequest(tiny_llama_8da4w, tmp_path / "x.etdump", generation=Generation(16, 8, 32))
    for phase, fill, executes in (("prefill", 1, 1), ("decode", 32, 8)):
        req = base.phase_only(phase)
        done = _run(native.command(req))
        assert done.returncode == 0, done.stderr[-2000:]
        assert parse_summary(done.stdout).executions == fill + executes
        r = analyze_generation_file(req.etdump, done.stdout)
        assert r.depth_executes == fill and r.phase(phase).median_ms > 0


@pytest.mark.parametrize("generation,said", [
    (Generation(16, 16, 100),
     "depth 100 + prompt 16 + new 16 tokens is over the program's limits (max_seq_len 128, "
     "max_context_len 128: depth 100 + prompt + new tokens <= 128; one prefill takes at most "
     "127 tokens)"),
    (Generation(120, 16),
     "prompt 120 + new 16 tokens is over the program's limits (max_seq_len 128, "
     "max_context_len 128: prompt + new tokens <= 128; one prefill takes at most 127 tokens)")],
    ids=["depth", "prompt"])
def test_a_generation_over_the_context_is_one_line(native, tiny_llama_8da4w, tmp_path,
                                                   generation, said):
    req = RunRequest(tiny_llama_8da4w, tmp_path / "x.etdump", generation=generation)
    for last in _refusals(native, req):
        assert last.endswith(said)


def test_a_forward_without_tokens_and_positions_is_one_line(native, toy_export, tmp_path):
    req = RunRequest(toy_export.pte, tmp_path / "x.etdump", generation=Generation(4, 2))
    for last in _refusals(native, req):
        assert "not (tokens int64[1, n], input_pos int64[1])" in last
        assert "export_llama -kv" in last


def test_a_static_length_program_prefills_token_by_token(native, tmp_path):
    from tests.llm_export import export_static_program

    pte = export_static_program(tmp_path / "static.pte")
    g = Generation(5, 3)
    req = RunRequest(pte, tmp_path / "x.etdump", runs=2, warmup=1, generation=g)
    tokens = {}
    for name, argv in (("native", native.command(req)), ("python", _python_argv(req))):
        done = _run(argv)
        assert done.returncode == 0, done.stderr[-2000:]
        summary = parse_summary(done.stdout)
        assert summary.executions == 3 * (5 + 3)
        assert summary.generation.prefill_executes == 5 and not summary.generation.dynamic_shape
        r = analyze_generation_file(req.etdump, done.stdout)
        assert r.prefill.executes == 5 and r.prefill.token_median_ms > 0
        assert r.generations == 2
        tokens[name] = r.tokens
    # next = (5 token + 3 position + 1) mod 32, from the last prompt token at position 4
    prompt = [1 + (7919 * i + 13) % 31 for i in range(5)]
    expected = [(prompt[-1] * 5 + 4 * 3 + 1) % 32]
    for pos in range(5, 8):
        expected.append((expected[-1] * 5 + pos * 3 + 1) % 32)
    assert tokens["native"] == tokens["python"] == expected


def test_state_leaking_between_generations_is_refused(native, tmp_path):
    from tests.llm_export import export_leaky_program

    pte = export_leaky_program(tmp_path / "leaky.pte")
    req = RunRequest(pte, tmp_path / "x.etdump", runs=2, warmup=0, generation=Generation(3, 4))
    for last in _refusals(native, req):
        assert "generation 2 sampled other tokens than generation 1" in last
        assert "does not reset its KV cache between generations" in last


def test_a_custom_sdpa_program_runs_on_every_host_runner(native, tiny_llama_8da4w,
                                                         tiny_llama_8da4w_sdpa, tmp_path):
    """export_llama --use_sdpa_with_kv_cache (llama::custom_sdpa, llama::update_cache from the
    wheel's libcustom_ops_aot_lib.so): the native runner loads it with --kernel_lib, the
    Python runtime imports it, ExecuTorch's own TextLLMRunner runs it; every one samples the
    tokens the plain-attention export of the same checkpoint samples."""
    from pytest_sme2.runners.text_llm_runner import TextLlmRunner

    g = Generation(16, 8)
    tokens = {}
    for name, pte in (("plain", tiny_llama_8da4w), ("native", tiny_llama_8da4w_sdpa),
                      ("python", tiny_llama_8da4w_sdpa),
                      ("text_llm_runner", tiny_llama_8da4w_sdpa)):
        req = RunRequest(pte, tmp_path / f"{name}.etdump", runs=2, warmup=1, generation=g,
                         untraced=name == "text_llm_runner")
        argv = (_python_argv(req) if name == "python" else
                TextLlmRunner().command(req) if name == "text_llm_runner" else
                native.command(req))
        done = _run(argv)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        summary = parse_summary(done.stdout)
        assert summary.executions == 3 * (1 + 8), name
        tokens[name] = list(summary.generation.tokens)
        if name in ("python", "text_llm_runner"):
            # The custom ops' GEMMs run libtorch's BLAS on torch's OpenMP pool in a Python
            # process: held to the request's thread count (it took every core before).
            assert json.loads(done.stdout.strip().splitlines()[-1])["torch_threads"] == 1
    assert "--kernel_lib" in native.command(RunRequest(tiny_llama_8da4w_sdpa, tmp_path / "e"))
    assert len(set(tokens["plain"])) > 1
    assert tokens["native"] == tokens["python"] == tokens["text_llm_runner"] == tokens["plain"]


def test_a_runner_without_the_custom_ops_names_them_in_one_line(native, tiny_llama_8da4w_sdpa,
                                                                tmp_path):
    req = RunRequest(tiny_llama_8da4w_sdpa, tmp_path / "x.etdump", generation=Generation(8, 2))
    argv = native.command(req)
    while "--kernel_lib" in argv:               # the runner as it was before issue 45
        at = argv.index("--kernel_lib")
        del argv[at:at + 2]
    last = _refusal(argv)
    assert "needs operators" in last and "llama::custom_sdpa.out" in last
    assert "nor the wheel's operator libraries register" in last
    assert "export_llama -kv without --use_sdpa_with_kv_cache" in last


def test_phase_kernels_on_emulated_sme2(tiny_llama_8da4w):
    """The phase-only processes under QEMU -cpu max, traced: int4 (8da4w) ran KleidiAI NEON
    kernels (i8mm for the prompt's rows, dotprod for one row) and no SME code in either phase,
    with SME2 present or masked; the token ids agree."""
    from pytest_sme2.errors import Sme2Error
    from tests.needs import missing

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evaluations"))
    from llm_phase_kernels import phase_kernels

    try:
        result = phase_kernels(tiny_llama_8da4w, Generation(16, 4))
    except Sme2Error as e:
        missing("the emulated SME2 device", f"run `pytest-sme2 setup qemu` ({e})")
    for (side, phase), r in result.items():
        names = [k[0] for k in r["kernels"]]
        assert r["streaming_blocks"] == 0, (side, phase)
        assert r["sme2"] == "absent", (side, phase, r["reason"])
        assert any("qsi4c32p4x8_1x4x32_neon_dotprod" in n for n in names), (side, phase, names)
        assert not any("sme" in n for n in names), (side, phase, names)
        if phase == "prefill":
            assert any("neon_i8mm" in n for n in names), (side, names)
        else:
            assert not any("neon_i8mm" in n for n in names), (side, names)
    for phase in ("prefill", "decode"):
        assert result[("sme2_on", phase)]["tokens"] == result[("sme2_off", phase)]["tokens"]


def test_the_custom_ops_gemms_are_executorchs_in_every_host_runner(native, tiny_llama_8da4w_sdpa,
                                                                    tmp_path):
    """libcustom_ops_aot_lib.so calls sgemm_: in a Python process it would bind to libtorch's
    (MKL on torch's OpenMP pool), unlike the native runner; a 0.6B-class program then sampled
    other tokens from its second on (other numerics: 2% of the largest logit). Every runner
    binds it to ExecuTorch's own BLAS."""
    from pytest_sme2.runners.text_llm_runner import TextLlmRunner

    req = RunRequest(tiny_llama_8da4w_sdpa, tmp_path / "x.etdump", runs=1, warmup=0,
                     generation=Generation(8, 2), untraced=True)
    for name, argv in (("native", native.command(req)), ("python", _python_argv(req)),
                       ("text_llm_runner", TextLlmRunner().command(req))):
        log = tmp_path / name
        env = {**os.environ, "LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(log)}
        done = subprocess.run(argv, capture_output=True, timeout=600, env=env)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        bound = [line for f in tmp_path.glob(f"{name}.*") for line in f.read_text().splitlines()
                 if "libcustom_ops_aot_lib.so" in line and "`sgemm_'" in line]
        assert bound and all("libexecutorch_kernels_optimized.so" in b for b in bound), (
            name, bound)
