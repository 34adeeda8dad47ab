"""Outputs that are not numbers: one sentence with the likely cause, from the runner's summary."""

import json

from pytest_sme2.analysis.output_values import UNINITIALISED, output_problem
from pytest_sme2.analysis.runner_summary import parse_summary


def _summary(**keys) -> str:
    return json.dumps({"threads": 1, "executions": 3, **keys})


def _generation(tokens, nonfinite_steps) -> dict:
    return {"prompt_tokens": 8, "new_tokens": len(tokens) - 1, "warmup": 0, "generations": 1,
            "prefill_executes": 1, "decode_executes": len(tokens) - 1, "dynamic_shape": True,
            "tokens": tokens, "nonfinite_steps": nonfinite_steps}


def test_finite_or_unchecked_outputs_say_nothing():
    assert output_problem(parse_summary(_summary(nonfinite_outputs=0))) is None
    assert output_problem(parse_summary(_summary())) is None          # a user's runner
    assert output_problem(parse_summary("")) is None
    assert output_problem(parse_summary(_summary(generation=_generation([3, 7, 9], 0)))) is None


def test_nan_outputs_are_named_with_their_count():
    said = output_problem(parse_summary(_summary(nonfinite_outputs=144)))
    assert said.startswith("the outputs hold 144 non-finite values (NaN or inf): the timings "
                           "are of NaN/inf arithmetic")


def test_an_llm_whose_every_token_is_the_same_looks_uninitialised():
    said = output_problem(parse_summary(_summary(generation=_generation([0] * 9, 9))))
    assert said == f"{UNINITIALISED}; every sampled token is 0"
    assert said.startswith("the logits are not finite: weights look uninitialised "
                           "(export_llama without --checkpoint?)")
    other = output_problem(parse_summary(_summary(generation=_generation([1, 5, 5, 2], 2))))
    assert other.startswith("the logits are not finite at 2 of 4 sampled steps")
