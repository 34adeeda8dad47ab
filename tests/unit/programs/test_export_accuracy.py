"""The export's accuracy check: fp32/fp16 within a tolerance of eager; int8 within a tolerance
of the quantized eager model, or no further from the float model than quantization explains
(figures: mobilevit_small's static int8 export, evaluations/int8_accuracy.py)."""

from __future__ import annotations

from pytest_sme2.programs.export import INT8_FLOAT_MARGIN, accuracy_problem


def _info(err, scale, vs_float, quant, reference="quantized eager"):
    return {"max_abs_error": err, "max_abs_eager": scale, "reference": reference,
            "max_abs_error_vs_float": vs_float, "max_abs_quantization_error": quant}


def test_close_to_the_quantized_model_passes_by_the_first_rule():
    info = _info(0.002, 0.0374, 0.0154, 0.015)
    assert accuracy_problem("int8", info) is None
    assert info["accuracy_rule"].startswith("max |pte - quantized eager| <= 0.1")


def test_mobilevits_rounding_divergence_passes_as_faithful_to_the_float_model():
    # Measured: max |pte - quantized eager| 0.0107 of max 0.0743; both ~0.0205 from float.
    info = _info(0.01074, 0.07434, 0.02042, 0.02062)
    assert accuracy_problem("int8", info) is None
    assert info["accuracy_rule"].startswith("max |pte - float eager| <= 1.25")


def test_a_program_further_from_float_than_quantization_explains_is_wrong():
    # The same divergence from the quantized model, but the program is also twice as far from
    # the float model as the quantized model is: a lowering error, not rounding.
    info = _info(0.01074, 0.07434, 2 * 0.02062, 0.02062)
    problem = accuracy_problem("int8", info)
    assert problem == ("max |pte - quantized eager| = 0.0107 exceeds 0.1 x max |quantized "
                       "eager| (0.0743), and max |pte - float eager| = 0.0412 exceeds 1.25 x "
                       "the quantization error max |quantized eager - float eager| (0.0206)")
    just_over = _info(0.01074, 0.07434, INT8_FLOAT_MARGIN * 0.02062 * 1.01, 0.02062)
    assert accuracy_problem("int8_dynamic", just_over) is not None


def test_float_dtypes_have_no_second_rule():
    info = _info(0.002, 1.0, 0.002, None, reference="eager")
    assert accuracy_problem("fp32", info) == ("max |pte - eager| = 0.002 exceeds 0.001 x max "
                                             "|eager| (1)")
    assert accuracy_problem("fp16", info) is None
