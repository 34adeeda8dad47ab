"""The one LLM scheme table: every list of the schemes, and the export's dispatch, read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.analysis.isa import WEIGHT_TYPES
from pytest_sme2.measure.options import OPTIONS
from pytest_sme2.programs.llm.schemes import (DEFAULT_SCHEMES, LLM_SCHEMES, QUANTIZERS, SCHEMES,
                                              SchemeError, parse_scheme)

ROOT = Path(__file__).resolve().parents[3]


def test_the_error_and_the_option_help_name_every_scheme():
    with pytest.raises(SchemeError) as e:
        parse_scheme("8da2w")
    for s in SCHEMES.values():
        assert s.name in str(e.value) and s.name in OPTIONS["sme2_llm_schemes"].help
        assert f"{s.name}: {s.short}" in str(e.value) or not s.short


def test_the_default_axis_is_every_scheme_not_asked_for_by_name():
    assert DEFAULT_SCHEMES == ("fp32", "8da4w", "8da4w-pc", "8da8w")
    assert set(LLM_SCHEMES) - set(DEFAULT_SCHEMES) == {"8da4w-pc-pt2e"}


def test_every_quantizer_a_scheme_names_is_applied_by_the_export():
    from pytest_sme2.programs.recipes import LLM_QUANTIZE   # torch: only this test needs it

    assert {s.quantizer for s in SCHEMES.values()} <= set(QUANTIZERS) == set(LLM_QUANTIZE)


def test_the_kernel_phrase_knows_every_schemes_weight_type():
    """analysis/isa.py reads weight types from kernel names; a scheme of other weights needs
    its kernels' tag there first."""
    known = {w for _, w in WEIGHT_TYPES}
    assert {f"int{s.weight_bits}" for s in SCHEMES.values() if s.quantized} <= known


def test_the_guides_name_every_scheme():
    for page in ("docs/llms.md", "docs/models.md"):
        text = (ROOT / page).read_text()
        assert all(f"`{name}`" in text for name in LLM_SCHEMES), page
