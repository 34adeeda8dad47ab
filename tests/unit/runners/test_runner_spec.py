from pathlib import Path

import pytest

from pytest_sme2.measure.matrix import (Case, build_llm_matrix, build_matrix, llm_models_on,
                                        parse_depths,
                                       parse_threads)
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners import RunnerError, parse_runner_spec, runner_specs


def test_builtins():
    s = parse_runner_spec("python")
    assert (s.name, s.kind, s.path) == ("python", "python", None)
    s = parse_runner_spec("fast=native,build=release")
    assert (s.name, s.kind, s.labels) == ("fast", "native", {"build": "release"})


def test_binary_with_libs_and_labels():
    s = parse_runner_spec("sme2_on=/opt/on/executor_runner,libs=/opt/on/lib,sme2=on,"
                          "flags=-DXNNPACK_ENABLE_ARM_SME2=ON")
    assert s.kind == "binary" and s.path == Path("/opt/on/executor_runner")
    assert s.lib_dir == Path("/opt/on/lib")
    assert s.labels == {"sme2": "on", "flags": "-DXNNPACK_ENABLE_ARM_SME2=ON"}


@pytest.mark.parametrize("text,msg", [
    ("", "empty --runner spec"),
    ("a b=python", "the name 'a b' must be letters"),
    ("x=", "nothing after '='"),
    ("x=pyton",
     "'pyton' is neither a built-in runner (python, native, text_llm_runner) nor a path"),
    ("x=/bin/r,sme2", "'sme2' is not key=value"),
    ("x=python,libs=/lib", "libs= applies to a binary path only"),
])
def test_malformed_specs(text, msg):
    with pytest.raises(RunnerError) as ei:
        parse_runner_spec(text)
    assert msg in str(ei.value)


def test_runner_specs_keep_builtins_and_reject_duplicates():
    specs = runner_specs(["sme2_on=/x/r,sme2=on"])
    assert set(specs) == {"python", "native", "text_llm_runner", "sme2_on"}
    with pytest.raises(RunnerError, match="already configured"):
        runner_specs(["a=python", "a=native"])


def test_missing_binary_is_reported_when_made(tmp_path):
    with pytest.raises(RunnerError, match=r"runner 'x': .*nope does not exist"):
        parse_runner_spec(f"x={tmp_path}/nope").make()


def test_matrix_ids_and_validation():
    cases = build_matrix(["toy_cnn"], ["fp32", "int8"], (1, 2))
    assert [c.id for c in cases] == ["toy_cnn-fp32-t1", "toy_cnn-fp32-t2", "toy_cnn-int8-t1",
                                     "toy_cnn-int8-t2"]
    with pytest.raises(Sme2Error, match="unknown model 'resnet'; registered models: "):
        build_matrix(["resnet"], ["fp32"], (1,))
    with pytest.raises(Sme2Error, match="unknown dtype 'bf16'"):
        build_matrix(["toy_cnn"], ["bf16"], (1,))
    with pytest.raises(Sme2Error, match="give 1 or more"):
        parse_threads("1,0")
    with pytest.raises(Sme2Error, match="--sme2-threads: 'two' is not a whole number of threads"):
        parse_threads("1,two")
    assert parse_threads("1, 2,2") == (1, 2)


def test_bare_path_is_named_after_the_file():
    s = parse_runner_spec("/opt/builds/sme2 on/executor_runner")
    assert (s.name, s.kind, s.path) == ("executor_runner", "binary",
                                        Path("/opt/builds/sme2 on/executor_runner"))


def test_context_depths_are_an_axis_of_the_generation_matrix():
    assert parse_depths("0, 512,512") == (0, 512)
    for bad, says in (("x", "not a whole number"), ("-1", "0 or more"), ("", "no depth")):
        with pytest.raises(Sme2Error, match=f"--sme2-context-depth: .*{says}"):
            parse_depths(bad)
    cases = build_llm_matrix(["tiny_llama"], ("8da8w",), (1,), (0, 512))
    assert [c.id for c in cases] == ["tiny_llama-8da8w-t1", "tiny_llama-8da8w-t1-d512"]
    assert Case("m.pte", "as-exported", 2, depth=64).id.endswith("-t2-d64")


def test_the_auto_llm_is_custom_sdpa_where_our_runners_load_its_operators():
    # The host loads ExecuTorch's custom SDPA from the wheel; QEMU and phones take the
    # plain-attention twin of the same weights (their runner bundle cannot carry the library).
    assert llm_models_on(["auto"], "host") == ["tiny_llama"]
    assert llm_models_on(["auto"], "qemu:max") == ["tiny_llama_plain"]
    assert llm_models_on(["auto", "tiny_llama_plain"], "android:R5CX") == ["tiny_llama_plain"]
    assert llm_models_on(["tiny_llama", "x.pte"], "qemu") == ["tiny_llama", "x.pte"]
    assert llm_models_on(["auto"], "board:1") == ["tiny_llama_plain"]   # a plugin's kind
