"""LLM programs without torch: the schemes (the LLM's dtype axis), ``executorch:`` specs,
what makes a model an LLM (its entry, or its program's methods) and the facts read from a
program's constant methods."""

from __future__ import annotations

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.library import LibraryModel
from pytest_sme2.programs.spec import LibrarySpec, is_library
from pytest_sme2.programs.executorch_models import MODELS, executorch_model
from pytest_sme2.programs.llm.llama import PARAMS, typed_params
from pytest_sme2.programs.llm.facts import (facts_from_methods, is_llm_methods, is_llm_program,
                                            llm_facts)
from pytest_sme2.programs.llm.schemes import (DEFAULT_SCHEMES, LLM_SCHEMES, SchemeError,
                                              parse_scheme, parse_schemes)
from pytest_sme2.readers.pte_program import MethodInput, MethodSignature, read_signatures
from tests.fakes.pte_programs import write_program

LLAMA_CONSTANTS = {"get_max_seq_len": 128, "get_max_context_len": 128, "get_vocab_size": 512,
                   "get_n_layers": 2, "use_kv_cache": True, "use_sdpa_with_kv_cache": False,
                   "enable_dynamic_shape": True}
TOKENS_AND_POS = [("tensor", 4, [1, 127], True), ("tensor", 4, [1])]


# --- schemes -----------------------------------------------------------------------------

def test_schemes_and_what_they_mean():
    assert DEFAULT_SCHEMES == ("fp32", "8da4w", "8da4w-pc", "8da8w")
    assert LLM_SCHEMES == DEFAULT_SCHEMES + ("8da4w-pc-pt2e",)
    fp32, g32, pc4, pc8 = (parse_scheme(s) for s in DEFAULT_SCHEMES)
    assert {s.quantizer for s in (fp32, g32, pc4, pc8)} == {"torchao"}
    qc4 = parse_scheme("8da4w-pc-pt2e")
    assert (qc4.weight_bits, qc4.group_size, qc4.quantizer) == (4, None, "pt2e")
    assert not fp32.quantized and fp32.granularity == "-"
    assert (g32.weight_bits, g32.group_size, g32.granularity) == (4, 32, "group 32")
    assert (pc4.weight_bits, pc4.group_size, pc4.granularity) == (4, None, "per channel")
    assert (pc8.weight_bits, pc8.group_size) == (8, None)
    assert fp32.tolerance < g32.tolerance


@pytest.mark.parametrize("text, name", [("8DA4W", "8da4w"), (" 8da4w_pc ", "8da4w-pc"),
                                        ("fp32", "fp32")])
def test_scheme_spelling(text, name):
    assert parse_scheme(text).name == name


def test_unknown_scheme_is_one_line_naming_the_schemes():
    with pytest.raises(SchemeError) as e:
        parse_scheme("4w")
    assert "fp32, 8da4w, 8da4w-pc, 8da8w, 8da4w-pc-pt2e" in str(e.value)
    assert "\n" not in str(e.value)


def test_scheme_lists():
    assert parse_schemes("8da8w, fp32,8da8w") == ("8da8w", "fp32")
    assert parse_schemes("") == DEFAULT_SCHEMES


def test_export_accepts_schemes_only_for_llms():
    from pytest_sme2.programs.export import ExportError, dtype_problem

    dtype_problem("tiny_llama", "8da4w-pc")
    dtype_problem("toy_cnn", "int8")
    with pytest.raises(ExportError, match="is an LLM: its dtypes are the schemes"):
        dtype_problem("tiny_llama", "fp16")
    with pytest.raises(ExportError, match="'8da8w' is an LLM scheme and model 'toy_cnn' is not"):
        dtype_problem("toy_cnn", "8da8w")
    with pytest.raises(ExportError, match="unknown dtype 'int3'; choose one of fp32, fp16, "
                                          "int8, int8_dynamic$"):
        dtype_problem("toy_cnn", "int3")
    with pytest.raises(ExportError, match="unknown dtype 'int3'; choose one of fp32, 8da4w, "):
        dtype_problem("tiny_llama", "int3")


# --- the zoo entry and executorch: specs ----------------------------------------------------

def test_tiny_llama_is_an_llm_in_the_zoo_with_the_schemes():
    from pytest_sme2_models import get_model

    entry = get_model("tiny_llama")
    assert entry.llm and entry.dtypes == DEFAULT_SCHEMES and not entry.heavy
    assert not get_model("toy_cnn").llm and get_model("toy_cnn").dtypes == ()


def test_executorch_specs():
    assert is_library("executorch:llama?dim=128")
    spec = LibrarySpec.parse("executorch:llama?dim=128&n_layers=4")
    assert (spec.library, spec.name, spec.overrides) == ("executorch", "llama",
                                                         (("dim", "128"), ("n_layers", "4")))
    llama = LibraryModel("executorch:llama?dim=128")
    assert llama.llm and llama.dtypes == DEFAULT_SCHEMES and not llama.heavy
    sam = LibraryModel("executorch:efficient_sam")
    assert sam.heavy and not sam.llm and sam.dtypes == ()
    assert not LibraryModel("transformers:MobileViTModel").llm
    # A transformers causal LM is an LLM by its class name: nothing imported or built.
    qwen = LibraryModel("transformers:Qwen3ForCausalLM?num_hidden_layers=1")
    assert qwen.llm and qwen.dtypes == DEFAULT_SCHEMES


def test_executorch_spec_key_changes_with_its_settings():
    a = LibraryModel("executorch:llama?dim=128").source_digest()
    assert a == LibraryModel("executorch:llama?dim=128").source_digest()
    assert a != LibraryModel("executorch:llama?dim=64").source_digest()


def test_unknown_executorch_model_lists_the_known_ones():
    with pytest.raises(Sme2Error) as e:
        assert LibraryModel("executorch:mv9").llm
    line = str(e.value)
    assert "unknown ExecuTorch example 'mv9'" in line and "llama, efficient_sam" in line
    assert "\n" not in line
    assert {"llama", "efficient_sam", "ds_cnn", "mul"} <= set(MODELS) and "lstm" not in MODELS
    assert executorch_model("llama").llm


def test_llama_params_are_typed_and_checked():
    assert typed_params([("dim", "128"), ("norm_eps", "1e-6")], "s") == {"dim": 128,
                                                                          "norm_eps": 1e-6}
    with pytest.raises(Sme2Error, match=r"s: llama has no parameter 'depth'; known: dim, "):
        typed_params([("depth", "2")], "s")
    with pytest.raises(Sme2Error, match="s: n_layers='two' must be an integer"):
        typed_params([("n_layers", "two")], "s")
    assert {"dim", "n_layers", "vocab_size", "max_seq_len", "seed"} <= set(PARAMS)


# --- LLM detection from a program's methods --------------------------------------------------

def _sig(name, inputs=(), outputs=()):
    return MethodSignature(name, tuple(inputs), tuple(outputs))


def test_the_rule_needs_both_markers():
    assert is_llm_methods(["forward", "use_kv_cache", "get_max_seq_len"])
    assert not is_llm_methods(["forward", "use_kv_cache"])
    assert not is_llm_methods(["forward", "get_max_seq_len"])
    assert facts_from_methods({"forward": _sig("forward")}) is None


def test_facts_from_synthetic_methods():
    const = lambda name, kind, v: _sig(name, (), [MethodInput(0, kind, value=v)])  # noqa: E731
    methods = {
        "forward": _sig("forward", [MethodInput(0, "Tensor", "int64", 4, (1, 127), True),
                                    MethodInput(1, "Tensor", "int64", 4, (1,))]),
        "use_kv_cache": const("use_kv_cache", "Bool", True),
        "get_max_seq_len": const("get_max_seq_len", "Int", 128),
        "get_vocab_size": const("get_vocab_size", "Int", 512),
    }
    facts = facts_from_methods(methods)
    assert facts.max_seq_len == 128 and facts.vocab_size == 512 and facts.use_kv_cache is True
    assert facts.max_context_len is None and facts.n_layers is None     # not in the program
    assert facts.takes_tokens_and_pos and facts.forward_inputs[0][1:] == ((1, 127), True)


def test_a_constant_the_file_does_not_give_is_none():
    # A method of that name that takes inputs, or returns a tensor: the runner must ask it.
    methods = {"use_kv_cache": _sig("use_kv_cache"),
               "get_max_seq_len": _sig("get_max_seq_len",
                                       outputs=[MethodInput(0, "Tensor", "int64", 4, ())])}
    facts = facts_from_methods(methods)
    assert facts is not None and facts.max_seq_len is None and facts.use_kv_cache is None
    assert not facts.takes_tokens_and_pos and facts.forward_inputs == ()


def test_facts_read_from_a_program_file(tmp_path):
    pte = write_program(tmp_path / "llm.pte", {"forward": TOKENS_AND_POS}, LLAMA_CONSTANTS)
    methods = read_signatures(pte)
    assert methods["get_max_seq_len"].constant == 128 and methods["forward"].constant is None
    # false is the flatbuffer default, left out of the file: still read as False.
    assert methods["use_sdpa_with_kv_cache"].constant is False
    facts = llm_facts(pte)
    assert is_llm_program(pte)
    assert (facts.max_seq_len, facts.max_context_len, facts.vocab_size, facts.n_layers) == \
        (128, 128, 512, 2)
    assert facts.enable_dynamic_shape is True and facts.use_sdpa_with_kv_cache is False
    assert facts.takes_tokens_and_pos and facts.forward_inputs[0][1:] == ((1, 127), True)
    assert "forward" in facts.methods and "get_vocab_size" in facts.methods


def test_a_static_llm_takes_one_token_a_step(tmp_path):
    pte = write_program(tmp_path / "s.pte", {"forward": [("tensor", 4, [1, 1]),
                                                         ("tensor", 4, [1])]},
                        {"use_kv_cache": True, "get_max_seq_len": 64})
    assert llm_facts(pte).forward_inputs[0][1:] == ((1, 1), False)


def test_not_an_llm(tmp_path):
    pte = write_program(tmp_path / "cnn.pte", {"forward": [("tensor", 6, [1, 3, 8, 8])]})
    assert llm_facts(pte) is None and not is_llm_program(pte)


# --- llm_program: the loop's one call ---------------------------------------------------------

def test_llm_program_refuses_a_model_that_is_not_an_llm(tmp_path):
    from pytest_sme2.programs.llm.program import NotAnLlmError, llm_program

    with pytest.raises(NotAnLlmError, match="toy_cnn is not an LLM"):
        llm_program("toy_cnn", "8da8w", tmp_path)
    with pytest.raises(SchemeError, match="unknown LLM scheme 'int8'"):
        llm_program("tiny_llama", "int8", tmp_path)


def test_llm_program_refuses_a_pte_without_the_methods(tmp_path):
    from pytest_sme2.programs.llm.program import NotAnLlmError, llm_program

    pte = write_program(tmp_path / "cnn.pte", {"forward": [("tensor", 6, [1, 3, 8, 8])]})
    with pytest.raises(NotAnLlmError, match="cnn.pte is not an LLM program: it lacks the "
                                            "methods use_kv_cache and get_max_seq_len"):
        llm_program(str(pte), cache_dir=tmp_path / "cache")


def test_llm_program_takes_a_users_llm_pte(tmp_path):
    from pytest_sme2.programs.llm.program import llm_program

    pte = write_program(tmp_path / "llm.pte", {"forward": TOKENS_AND_POS}, LLAMA_CONSTANTS)
    program = llm_program(str(pte), cache_dir=tmp_path / "cache")
    assert program.pte == pte and program.scheme == "pte"
    assert program.facts.max_seq_len == 128
