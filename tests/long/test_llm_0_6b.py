"""Qwen3-0.6B's shape (:mod:`pytest_sme2_models.qwen3_0_6b`, 0.75B parameters) end to end in
8da8w and 8da4w with plain attention (it runs on every device): the export (in the user's
export cache: minutes and GBs once, then a hit), a host generation, a short one under QEMU
(each phase's kernels) and the fake phone (a second session pushes nothing); and the same
weights with ExecuTorch's custom SDPA (8da4w): the native runner and ExecuTorch's own
TextLLMRunner on the host sample the plain program's tokens, and QEMU refuses it in one line.
Marked ``llm_large``: deselected unless asked for, ``pytest tests/long -m llm_large`` (three
exports of about 40 minutes each on 2 cores the first time; figures:
docs/measurements/llm-0.6b.md)."""

import json
import re
import subprocess
import sys

import pytest

from pytest_sme2.api import export_model
from pytest_sme2.programs.export import default_cache_dir
from pytest_sme2.programs.export_watch import memory_needed
from pytest_sme2_models.qwen3_0_6b import PARAMS, PLAIN_SPEC, SCHEMES, SPEC

pytestmark = [pytest.mark.llm_large, pytest.mark.usefixtures("inner_session_env")]
# Read at import, before inner_session_env points XDG_CACHE_HOME at a fresh folder: the inner
# sessions find the exports in the user's cache instead of exporting again.
CACHE = default_cache_dir()
SHORT = ["--sme2-prompt-tokens=8", "--sme2-new-tokens=2", "--sme2-threads=1", "--runs=1",
         "--warmup=0", "--sme2-loads=1", "-s"]
GENERATE = """
def test_generation(sme2_generate, sme2_llm_case):
    gen = sme2_generate(sme2_llm_case.model, scheme=sme2_llm_case.dtype, threads=1)
    assert len(gen.tokens) == gen.new_tokens + 1 and gen.decode.tokens_per_s > 0
"""
KERNELS = """
def test_generation(sme2_generate, sme2_llm_case):
    gen = sme2_generate(sme2_llm_case.model, scheme=sme2_llm_case.dtype, threads=1)
    for phase in (gen.prefill, gen.decode):
        ev = phase.kernel_evidence
        print("KERNELS", phase.phase, ev.sme2 if ev else None,
              sorted({k.name for k in ev.executed_kernels if k.name.startswith("kai_")})
              if ev else [])
"""


CUSTOM = """
import json

import pytest


@pytest.mark.parametrize("runner", ["native", "text_llm_runner"])
def test_custom_sdpa(sme2_generate, sme2_llm_case, runner):
    gen = sme2_generate(sme2_llm_case.model, scheme=sme2_llm_case.dtype, threads=1,
                        runner=runner)
    print("TOKENS", runner, json.dumps(gen.tokens))
"""


@pytest.fixture(scope="module", params=SCHEMES)
def exported(request):
    return export_model(PLAIN_SPEC, request.param, CACHE, progress=print)


def _session(pytester, run_pytest, scheme: str, body: str, *args: str, spec: str = PLAIN_SPEC):
    pytester.makepyfile(test_big=body)
    return run_pytest(f"--sme2-llm-models={spec}", f"--sme2-llm-schemes={scheme}",
                      f"--sme2-cache-dir={CACHE}", *SHORT, *args)


def test_the_export_holds_the_size_and_its_memory_estimate(exported):
    meta = exported.meta
    assert 0.7e9 < meta["parameters"] < 0.8e9
    # The estimate the check makes before an export covers what this one took at its peak.
    assert 0 < meta["export_peak_rss_bytes"] <= memory_needed(meta["parameters"], meta["dtype"])
    assert exported.pte.stat().st_size > 300e6


def test_a_host_generation(exported, pytester, run_pytest):
    res = _session(pytester, run_pytest, exported.dtype, GENERATE)
    res.assert_outcomes(passed=1)
    (b,) = json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]
    assert b["startup"]["load_ms"] > 0 and b["startup"]["peak_rss_kb"] > 300e3


def test_a_generation_under_qemu_shows_each_phases_kernels(exported, pytester, run_pytest,
                                                            provisioned_qemu):
    res = _session(pytester, run_pytest, exported.dtype, KERNELS, "--device=qemu")
    res.assert_outcomes(passed=1)
    kernels = [line for line in res.outlines if line.startswith("KERNELS")]
    assert len(kernels) == 2
    if exported.dtype == "8da8w":         # int8 weights: KleidiAI's SME2 kernels in each phase
        assert all(" proven " in line and "_sme2_" in line for line in kernels), kernels


def test_the_fake_phone_pushes_the_program_once(exported, pytester, run_pytest, fake_android,
                                                adb_server, monkeypatch):
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    pushed = []
    for _ in range(2):
        res = _session(pytester, run_pytest, exported.dtype, GENERATE,
                       f"--device=android:{fake_android.serial}")
        res.assert_outcomes(passed=1)
        pushed.append([m.group(1) for line in res.outlines
                       if (m := re.search(r"pushed \d+ files \(([\d.]+) MB\)", line))])
    assert sum(float(mb) for mb in pushed[0]) > 300      # the program, once
    assert sum(float(mb) for mb in pushed[1]) < 1        # content-addressed: nothing again



LOGITS = """
import sys
from pathlib import Path

import numpy as np
import torch

from executorch.extension.pybindings import _C as runtime
from pytest_sme2.programs.kernel_libraries import import_for_python, program_libraries
from pytest_sme2.results.generation import prompt_token_ids

pte = Path(sys.argv[1])
import_for_python(program_libraries(pte))
torch.set_num_threads(1)
runtime._unsafe_reset_threadpool(1)
module = runtime._load_for_executorch(str(pte))
ids = prompt_token_ids(8, int(sys.argv[2]))
np.save(sys.argv[3], module.forward((torch.tensor([ids]), torch.tensor([0])))[0].numpy())
"""


def _prompt_logits(pte, folder, name: str):
    """The logits of an 8-token prompt, Python runtime, 1 thread (its own process)."""
    import numpy as np  # numpy: this long test only

    out = folder / f"{name}.npy"
    done = subprocess.run([sys.executable, "-c", LOGITS, str(pte), str(PARAMS["vocab_size"]),
                           str(out)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return np.load(out)


def test_custom_sdpa_on_the_host_and_refused_on_qemu(pytester, run_pytest, provisioned_qemu,
                                                     tmp_path):
    plain = export_model(PLAIN_SPEC, "8da4w", CACHE, progress=print)
    export_model(SPEC, "8da4w", CACHE, progress=print)
    res = _session(pytester, run_pytest, "8da4w", CUSTOM, spec=SPEC)
    res.assert_outcomes(passed=2)
    tokens = {line.split()[1]: json.loads(line.split(" ", 2)[2]) for line in res.outlines
              if line.startswith("TOKENS ")}
    assert tokens["native"] == tokens["text_llm_runner"]      # one BLAS, the same numerics
    # The two forms: the same answer within the scheme's tolerance (8da4w: 5% of the largest
    # logit; measured 2%), not the same greedy tokens (random weights: near-ties).
    custom = _prompt_logits(export_model(SPEC, "8da4w", CACHE).pte, tmp_path, "custom")
    reference = _prompt_logits(plain.pte, tmp_path, "plain")
    assert abs(custom - reference).max() <= 0.05 * abs(reference).max()
    if provisioned_qemu:
        res = _session(pytester, run_pytest, "8da4w", GENERATE, "--device=qemu", spec=SPEC)
        res.assert_outcomes(failed=1)
        res.stdout.fnmatch_lines(["*calls llama::update_cache.out, llama::custom_sdpa.out, "
                                  "which the executorch wheel registers from "
                                  "libcustom_ops_aot_lib.so; our runner cannot load that on "
                                  "--device qemu*"])
