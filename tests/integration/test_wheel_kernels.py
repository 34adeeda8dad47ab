"""The kernel map against the kernels the aarch64 ExecuTorch wheel really carries (issue 47):
every KleidiAI and XNNPACK kernel its backend library names is placed in a category and an ISA
family, or listed with the reason, never dropped; the families an SME-level verdict rests on are
there and placed. Needs the cached wheel (`pytest-sme2 setup qemu`; CI provisions it)."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.kernel_map import NO_ISA, kernel_of, library_kernels, map_kernels
from pytest_sme2.emulation import EmulationError
from pytest_sme2.emulation.wheel import cached_executorch_dir
from tests.needs import missing


@pytest.fixture(scope="module")
def wheel_map():
    try:
        folder = cached_executorch_dir()
    except EmulationError as e:
        folder = None
        why = str(e)
    else:
        why = "not cached"
    if folder is None:
        missing("the aarch64 ExecuTorch wheel", f"run `pytest-sme2 setup qemu` ({why})")
    lib = folder / "lib" / "libexecutorch_backend_xnnpack.so"
    names = library_kernels(lib, weight_packers=True)
    return names, map_kernels(names)


def test_every_kernel_of_the_wheel_is_placed_or_listed(wheel_map):
    names, m = wheel_map
    assert len(names) > 100
    assert sorted(k.name for k in m.placed + m.unplaced) == sorted({kernel_of(n) for n in names})
    # What cannot be placed is a name without an ISA (portable packing), said so.
    assert m.unplaced and all(k.why_not == NO_ISA and k.category == "Packing"
                              for k in m.unplaced), [(k.name, k.why_not) for k in m.unplaced]
    # A kernel of an SME level is always placed: the verdicts rest on them.
    assert not [k for k in m.unplaced if "_sme" in k.name or "neonsme" in k.name]


def test_the_families_of_each_sme_level_are_there_and_placed(wheel_map):
    _, m = wheel_map
    families = m.families()
    have = {(c, f, v) for c, f, v, _ in families}
    # SME1 GEMM (mopa for many rows, mla/dot for one) and packing: a device without SME2
    assert {("GEMM", "SME", "sme_mopa"), ("GEMM", "SME", "sme_mla"), ("GEMM", "SME", "sme_dot"),
            ("Packing", "SME", "sme")} <= have
    # SME2 mopa, dot and mla
    assert {("GEMM", "SME2", "sme2_mopa"), ("GEMM", "SME2", "sme2_dot"),
            ("GEMM", "SME2", "sme2_mla")} <= have
    # int4 weights at both levels; int2 only as a weight packer (its GEMM kernels are hidden)
    weights = {(f, w) for _, f, _, w in families}
    assert {("SME", "int4"), ("SME2", "int4"), ("SME", "int8"), ("SME2", "int8")} <= weights
    assert any(k.weights == "int2" for k in m.unplaced)
    # A depthwise convolution the wheel exports, if any, is a convolution.
    assert all(k.category == "Convolution" for k in m.placed if "dwconv" in k.name)
