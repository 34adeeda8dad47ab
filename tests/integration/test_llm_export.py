"""tiny_llama exported in each LLM scheme through the cached, verified export path (once per
test session: the session's export cache), and what the program then says about itself: its
constant methods, its dynamic (tokens, input_pos) forward, LLM detection, ExecuTorch's custom
SDPA and KV-cache operators in its operator table. Plus the
``executorch:`` library's other models, built or exported."""

from __future__ import annotations

import json
import time

import pytest

from pytest_sme2.programs.export import ExportError, export_model
from pytest_sme2.programs.kernel_libraries import program_operators
from pytest_sme2.programs.llm.facts import llm_facts
from pytest_sme2.programs.llm.schemes import LLM_SCHEMES

CONSTANTS = {"get_max_seq_len": 128, "get_max_context_len": 128, "get_vocab_size": 512,
             "get_n_layers": 2, "use_kv_cache": True, "use_sdpa_with_kv_cache": True,
             "enable_dynamic_shape": True}


@pytest.fixture(scope="session")
def llm_export(export_cache):
    """``llm_export(scheme)``: tiny_llama in that scheme, exported once per session
    (``llm_export(scheme, "tiny_llama_plain")``: its plain-attention twin, which QEMU runs)."""
    done = {}

    def get(scheme: str, model: str = "tiny_llama"):
        if (model, scheme) not in done:
            done[(model, scheme)] = export_model(model, scheme, export_cache)
        return done[(model, scheme)]

    return get


@pytest.mark.parametrize("scheme", [pytest.param(s, marks=pytest.mark.exports(("tiny_llama", s)))
                                    for s in LLM_SCHEMES])
def test_each_scheme_exports_verified_with_its_methods(llm_export, scheme):
    exported = llm_export(scheme)
    meta = json.loads((exported.folder / "meta.json").read_text())
    assert meta["dtype"] == scheme and meta["llm"]["scheme"] == scheme
    assert exported.pte.is_file() and exported.has_etrecord and exported.inputs.is_file()
    # Verified: a prefill then a decode step in one loaded program, against eager (quantized
    # eager for a quantized scheme), within the scheme's tolerance.
    assert meta["llm"]["verify_steps"] == [[[1, 16], [1]], [[1, 1], [1]]]
    assert meta["max_abs_error"] <= meta["max_abs_eager"] * (1e-3 if scheme == "fp32" else 0.05)
    assert meta["reference"] == ("eager" if scheme == "fp32" else "quantized eager")
    assert (meta["max_abs_quantization_error"] is None) == (scheme == "fp32")
    partitioners = meta["partitioners"]
    assert partitioners[-1] == "XnnpackPartitioner"
    assert ("XnnpackDynamicallyQuantizedPartitioner" in partitioners) == (scheme != "fp32")
    assert meta["delegates"] > 0
    # What the program says about itself, read from the file alone.
    facts = llm_facts(exported.pte)
    assert facts is not None, "an LLM program must be detected by its methods"
    assert {k: getattr(facts, k.removeprefix("get_")) for k in CONSTANTS} == CONSTANTS
    assert facts.takes_tokens_and_pos and facts.forward_inputs[0][1:] == ((1, 127), True)
    # export_llama --use_sdpa_with_kv_cache's operators, outside the delegate.
    assert {"llama::custom_sdpa.out", "llama::update_cache.out"} <= set(
        program_operators(exported.pte))
    print(f"{scheme}: exported in {meta['export_seconds']:.1f} s "
          f"({meta.get('export_cpu_seconds', 0):.1f} s CPU), {exported.pte.stat().st_size} B")


@pytest.mark.exports(("tiny_llama", "8da8w"))
def test_the_runtime_answers_the_constant_methods(llm_export):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(str(llm_export("8da8w").pte))
    assert module.run_method("get_max_seq_len", ())[0] == 128
    assert module.run_method("use_kv_cache", ())[0] is True


@pytest.mark.exports(("tiny_llama", "fp32"), ("tiny_llama", "8da4w"))
def test_a_cached_scheme_is_a_hit(llm_export, export_cache):
    first = llm_export("fp32")
    t0 = time.perf_counter()
    again = export_model("tiny_llama", "fp32", export_cache)
    assert time.perf_counter() - t0 < 0.5 and again.folder == first.folder
    assert export_model("tiny_llama", "8da4w", export_cache).key != first.key


def test_a_model_dtype_is_refused_for_an_llm(export_cache):
    with pytest.raises(ExportError, match="is an LLM: its dtypes are the schemes"):
        export_model("tiny_llama", "int8", export_cache)


def test_executorch_llama_builds_from_params():
    from pytest_sme2.programs.library import LibraryModel

    definition = LibraryModel("executorch:llama?dim=32&n_layers=1&vocab_size=256").build()
    assert definition.llm.constant_methods["get_vocab_size"] == 256
    assert definition.llm.constant_methods["get_n_layers"] == 1
    logits = definition.module(*definition.example_inputs)
    assert tuple(logits.shape) == (1, 256)


@pytest.mark.exports(("executorch:ds_cnn", "fp32"))
def test_executorch_registry_model_exports(export_cache):
    exported = export_model("executorch:ds_cnn", "fp32", export_cache)
    assert exported.meta["max_abs_error"] < 1e-3 and llm_facts(exported.pte) is None


def test_efficient_sam_builds_with_random_weights():
    from pytest_sme2.programs.library import LibraryModel

    definition = LibraryModel("executorch:efficient_sam").build()
    params = sum(p.numel() for p in definition.module.parameters())
    assert 10.0e6 < params < 10.5e6
    assert [tuple(t.shape) for t in definition.example_inputs] == [(1, 3, 1024, 1024),
                                                                   (1, 1, 1, 2), (1, 1, 1)]


CAUSAL_LM = "transformers:{}?num_hidden_layers=1&max_seq_len=64"


@pytest.mark.parametrize("cls", [pytest.param(c, marks=pytest.mark.exports((CAUSAL_LM.format(c),
                                                                            "fp32")))
                                 for c in ("LlamaForCausalLM", "Qwen3ForCausalLM")])
def test_transformers_causal_lm_exports_as_an_llm(export_cache, cls):
    try:
        import transformers  # noqa: F401
    except ImportError:
        from tests.needs import missing

        missing("transformers", "pip install -e '.[transformers]'")
    spec = CAUSAL_LM.format(cls)
    exported = export_model(spec, "fp32", export_cache)
    assert exported.meta["max_abs_error"] <= 1e-3 * exported.meta["max_abs_eager"]
    facts = llm_facts(exported.pte)
    assert facts.max_seq_len == 64 and facts.n_layers == 1 and facts.vocab_size == 512
    assert facts.takes_tokens_and_pos and facts.forward_inputs[0][1:] == ((1, 63), True)


@pytest.mark.exports(("tiny_llama", "8da8w"))
def test_llm_program_is_the_cached_export_and_its_facts(llm_export, export_cache):
    from pytest_sme2.programs.llm.program import llm_program

    program = llm_program("tiny_llama", "8da8w", export_cache)
    assert program.pte == llm_export("8da8w").pte and program.scheme == "8da8w"
    assert program.facts.max_seq_len == 128 and program.facts.takes_tokens_and_pos


# --- which kernels a scheme reaches on the emulated SME2 CPU (docs/measurements/llm-kernels.md)

@pytest.fixture(scope="module")
def prefill_inputs(tmp_path_factory):
    """A 127-token prefill at position 0: today's runner feeds a dynamic input at its bound."""
    import numpy as np

    from pytest_sme2.readers.tensorfile import write_tensors

    path = tmp_path_factory.mktemp("llm-inputs") / "prefill127.bin"
    rng = np.random.default_rng(0)
    write_tensors(path, [rng.integers(0, 512, (1, 127)).astype(np.int64),
                         np.array([0], dtype=np.int64)])
    return path


def _traced_int_matmuls(pte, inputs, runner: str, out) -> set[str]:
    import csv
    import subprocess
    import sys

    from tests.needs import emulated_sme2

    emulated_sme2()
    trace = out / "kernels.csv"
    proc = subprocess.run([sys.executable, "-m", "pytest_sme2.cli", "run", str(pte), "--device",
                           "qemu", "--runner", runner, "--kernel-trace", str(trace), "--inputs",
                           str(inputs), "--runs", "1", "--warmup", "0", "--etdump",
                           str(out / "e.etdp")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(trace, newline="") as fh:
        return {f"{r['name']} {r['isa_family']}" for r in csv.DictReader(fh)
                if r["kind"] == "kleidiai" and "matmul" in r["name"] and "_qai8dxp" in r["name"]}


@pytest.mark.exports(("tiny_llama_plain", "8da8w"))
def test_8da8w_prefill_runs_sme2_int8_kernels_and_masked_neon(llm_export, prefill_inputs,
                                                              tmp_path):
    pte = llm_export("8da8w", "tiny_llama_plain").pte
    on = _traced_int_matmuls(pte, prefill_inputs, "native", tmp_path)
    assert any("qsi8cxp4vlx4_1vlx4vl_sme2_mopa SME2" in k for k in on), on
    off = _traced_int_matmuls(pte, prefill_inputs, "native,sme2=off", tmp_path)
    assert off and all(k.endswith(" NEON") for k in off), off


def test_8da4w_prefill_runs_no_sme2_int4_kernel(tiny_llama_8da4w, prefill_inputs, tmp_path):
    # export_llama's plain-attention 8da4w program (the session's, shared): QEMU runs it.
    on = _traced_int_matmuls(tiny_llama_8da4w, prefill_inputs, "native", tmp_path)
    assert on and all(k.endswith(" NEON") and "qsi4c32p" in k for k in on), on
