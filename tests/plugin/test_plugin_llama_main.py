"""A user's llama_main as a runner, end to end: ExecuTorch's LLM runner binary cannot be built
here, so tests/fakes/llama_main.py stands in for it (upstream's flags, its constant-method and
warm-up executes in the ETDump, its PyTorchObserver report; the model really runs). The block is
its last generation, read from its ETDump and its report; without an ETDump, one line carries
its own figures."""

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("inner_session_env")

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "llama_main.py"

TESTS = """
def test_llama_main(sme2_generate):
    g = sme2_generate("llm.pte", scheme="8da4w", prompt_tokens=8, new_tokens=4, runner="llm")
    assert g.prefill.tokens == 8 and g.decode.executes == 4 and g.generations == 1
    assert g.decode.tokens_per_s > 0 and g.ttft_ms is not None
    assert g.runner.labels["runner"] == "llama_main"
"""


@pytest.fixture
def llama_main(pytester, tiny_llama_8da4w) -> tuple[Path, Path]:
    exe = pytester.path / "bin" / "llama_main"
    exe.parent.mkdir()
    exe.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    tokenizer = pytester.path / "tokenizer.model"
    tokenizer.write_text("words\n")
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "llm.pte")
    pytester.makepyfile(test_lm=TESTS)
    return exe, tokenizer


def test_a_llama_main_generation_is_its_last_one(pytester, run_pytest, export_cache,
                                                  llama_main):
    exe, tokenizer = llama_main
    res = run_pytest(f"--sme2-cache-dir={export_cache}", f"--runner=llm={exe},"
                     f"tokenizer={tokenizer}", "--sme2-loads=2", "-s")
    print(res.stdout.str())
    res.assert_outcomes(passed=1)
    [block] = json.loads((pytester.path / "sme2-report" / "results.json").read_text()
                         )["benchmarks"]
    g = block["generation"]
    # 8 words, one execute of forward for the prompt (dynamic length), 4 decode executes:
    # the constant methods' executes and the warm-up generation before them are left out
    assert (g["prompt_tokens"], g["new_tokens"], g["generations"]) == (8, 4, 1)
    assert g["prefill"]["executes"] == 1 and g["decode"]["executes"] == 4
    assert len(block["e2e_ms"]) == 4                 # the decode steps, one per token
    assert "PyTorchObserver" in g["source"]
    assert block["runner_info"]["labels"]["runner"] == "llama_main"
    assert (block["runs"], block["warmup"], g["warmup"]) == (1, 1, 1)
    # its own process and a load-only one, each read from its first forward on
    assert len(block["startup"]["processes"]) == 2
    assert all(p["first_inference_ms"] for p in block["startup"]["processes"])
    report = g["runner_report"]             # its own figures, kept beside the ETDump's
    assert report["runner"] == "llama_main" and report["prompt_tokens"] == 8
    assert report["generated_tokens"] == 4 and report["decode_tokens_per_s"] > 0
    res.stdout.fnmatch_lines(["*llm.pte pte t1 llm: generation of 8 prompt + 4 new tokens*"
                              "n=1 generations (+1 warm-up discarded)*"])


def test_a_llama_main_without_the_event_tracer_is_one_line_with_its_figures(
        pytester, run_pytest, export_cache, llama_main, monkeypatch):
    exe, tokenizer = llama_main
    monkeypatch.setenv("FAKE_LLAMA_MAIN_NO_TRACER", "1")
    res = run_pytest(f"--sme2-cache-dir={export_cache}", f"--runner=llm={exe},"
                     f"tokenizer={tokenizer}", "--sme2-loads=1")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines([
        "*runner 'llm' on llm.pte succeeded but wrote no ETDump at *llm.etdump (a llama_main "
        "built without the event tracer (ExecuTorch 1.1 or newer, "
        "EXECUTORCH_ENABLE_EVENT_TRACER=ON) writes none, and cannot be analysed per phase; "
        "its own report: prefill * tok/s, decode * tok/s, TTFT * ms, load * ms (8 prompt + 4 "
        "generated tokens))*"])
    assert "Traceback" not in res.stdout.str()


def test_a_llama_main_older_than_1_2_is_named_in_one_line(pytester, run_pytest, export_cache,
                                                          llama_main, monkeypatch):
    exe, tokenizer = llama_main
    monkeypatch.setenv("FAKE_LLAMA_MAIN_1_1", "1")
    res = run_pytest(f"--sme2-cache-dir={export_cache}", f"--runner=llm={exe},"
                     f"tokenizer={tokenizer}", "--sme2-loads=1")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*runner 'llm' on llm.pte does not accept the flag --ignore_eos "
                              "(a llama_main older than ExecuTorch 1.2, which added it) "
                              "(exited with status 1)*"])
