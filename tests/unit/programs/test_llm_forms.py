"""The two attention forms of one Llama, by name (issue 45): the report pairs them."""

from __future__ import annotations

from pytest_sme2.programs.llm.forms import attention_of, pairs_of_forms, same_weights
from pytest_sme2.programs.registry import get_model


def test_the_zoo_llm_is_custom_sdpa_and_its_twin_plain():
    assert attention_of("tiny_llama") == "custom_sdpa"
    assert attention_of("tiny_llama_plain") == "plain"
    assert get_model("tiny_llama_plain").kwargs == {"attention": "plain"}
    assert get_model("tiny_llama").kwargs == {}
    assert attention_of("executorch:llama?dim=128") == "custom_sdpa"
    assert attention_of("executorch:llama?attention=plain&dim=128") == "plain"
    assert attention_of("mobilenet_v3_small") is None and attention_of("m.pte") is None


def test_forms_pair_by_their_other_parameters_in_any_order():
    assert same_weights("executorch:llama?dim=128&n_layers=4",
                        "executorch:llama?n_layers=4&attention=plain&dim=128")
    assert not same_weights("executorch:llama?dim=128", "executorch:llama?dim=64&attention=plain")
    assert not same_weights("tiny_llama", "executorch:llama?attention=plain")
    assert pairs_of_forms(["tiny_llama", "tiny_llama_plain", "executorch:llama?dim=128",
                           "toy_cnn"]) == [("tiny_llama", "tiny_llama_plain")]
    assert pairs_of_forms(["tiny_llama"]) == []
