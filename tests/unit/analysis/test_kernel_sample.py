"""Kernels proven by sampling: the preload library's sample file, attribution through the same
maps and symbol tables as the QEMU trace, the CSV, and the verdict it feeds (SME2 sampled is
proof; nothing sampled is no proof of absence)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.analysis.addresses import MappedRegion, SymbolTable
from pytest_sme2.analysis.kernel_sample import (SAMPLE_COLUMNS, attribute_samples,
                                                parse_samples, read_kernel_sample_csv,
                                                sampled_kernels, write_kernel_sample_csv)
from pytest_sme2.analysis.kernels import ABSENT, PROVEN, DispatchBugError, sme2_verdict
from pytest_sme2.errors import Sme2Error

XNN = "/data/local/tmp/pytest-sme2-cache/runner-0123456789abcdef/libexecutorch_backend_xnnpack.so"
BASE = 0x7F00_0000_0000
SME2_BODY = "kai_kernel_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
SME2_RUN = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
SME1_PACK = "kai_run_lhs_imatmul_pack_x32p2vlx1_x32p_sme"
# Text at file offset 0x1000, loaded at vaddr 0x11000 (attribution goes through PT_LOAD).
TABLE = SymbolTable(segments=((0x1000, 0x11000, 0x8000),), functions=(
    (0x11000, 0x100, SME2_RUN), (0x11100, 0x200, SME2_BODY), (0x11400, 0x100, SME1_PACK),
    (0x11600, 0x100, "xnn_create_convolution2d_nhwc_pf32")))
REGIONS = [MappedRegion(BASE, BASE + 0x8000, 0x1000, True, XNN),
           MappedRegion(0x7FFF_0000_0000, 0x7FFF_0000_1000, 0, True, "[vdso]")]


def at(vaddr: int) -> int:
    return BASE + vaddr - 0x11000


def symbols(path: str) -> SymbolTable | None:
    return TABLE if path == XNN else None


def test_parse_samples_reads_the_header_and_sums_addresses() -> None:
    counts, taken = parse_samples("# samples 12 dropped 2 hz 1000\n7f00 5\n7f04 3\n7f00 1\njunk\n")
    assert counts == {0x7F00: 6, 0x7F04: 3} and taken == 12


def test_a_file_without_the_header_is_not_ours() -> None:
    with pytest.raises(Sme2Error, match="not a pytest-sme2 sample file"):
        parse_samples("7f00 5\n")


def test_samples_attributed_to_micro_kernels_with_their_share() -> None:
    counts = {at(0x11110): 60, at(0x11180): 20, at(0x11000): 5, at(0x11410): 10,
              at(0x11610): 4, 0x7FFF_0000_0010: 1}
    s = attribute_samples(counts, 100, REGIONS, symbols)
    rows = {r.name: (r.isa_family, r.samples, r.share) for r in s.kernels.itertuples()}
    # kai_kernel_X is the body of kai_run_X: one kernel, named by its entry point since it ran.
    assert rows == {SME2_RUN: ("SME2", 85, 0.85), SME1_PACK: ("SME", 10, 0.1)}
    assert s.samples_total == 100 and list(s.kernels.columns) == SAMPLE_COLUMNS
    assert "100 samples, 95 in 2 micro-kernels by ISA: SME 1, SME2 1" in s.summary()


def test_samples_of_another_process_are_refused() -> None:
    with pytest.raises(Sme2Error, match="the map is from another run"):
        attribute_samples({0x1234: 50, at(0x11110): 1}, 51, REGIONS, symbols)


def test_csv_round_trip_keeps_the_total(tmp_path: Path) -> None:
    s = attribute_samples({at(0x11110): 7, at(0x11610): 3}, 10, REGIONS, symbols)
    back = read_kernel_sample_csv(write_kernel_sample_csv(s, tmp_path / "k.csv"))
    assert back.samples_total == 10 and back.sampled == s.sampled


def test_a_csv_without_its_total_row_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "k.csv"
    p.write_text(",".join(SAMPLE_COLUMNS) + "\n")
    with pytest.raises(Sme2Error, match="no total row"):
        read_kernel_sample_csv(p)


def test_a_sampler_that_got_no_samples_says_so(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("# samples 0 dropped 0 hz 1000\n")
    (tmp_path / "m.txt").write_text("")
    with pytest.raises(Sme2Error) as e:
        sampled_kernels(tmp_path / "s.txt", tmp_path / "m.txt")
    assert "got no samples" in str(e.value) and "\n" not in str(e.value)


def test_a_missing_sample_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(Sme2Error, match="s.txt: cannot read the sample file"):
        sampled_kernels(tmp_path / "s.txt", tmp_path / "m.txt")


def _sample(counts: dict[int, int], taken: int):
    return attribute_samples(counts, taken, REGIONS, symbols)


def test_sampled_sme2_kernels_prove_sme2() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=["Convolution (NHWC, PF32)"], device_sme2=True,
                      sampled=_sample({at(0x11110): 80, at(0x11410): 5}, 120))
    assert ev.sme2 == PROVEN and ev.reason.startswith("sampling: 80 of 120 samples in 1 SME2")
    assert ev.samples_total == 120 and ev.sampled_kernels[0].name == SME2_RUN


def test_no_sme2_sampled_is_a_note_not_a_verdict() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=["Convolution (NHWC, PF32)"], device_sme2=True,
                      sampled=_sample({at(0x11410): 5}, 120))
    assert ev.sme2 != PROVEN and ev.sme2 != ABSENT          # indicated by the names, at most
    assert "no SME2 micro-kernel in 120 samples" in ev.reason
    assert "alone proves nothing" in ev.reason


def test_sme2_sampled_in_a_process_without_sme2_is_a_dispatch_bug() -> None:
    # A phone whose hwcaps hide SME2 (an SME1-only phone, or a masked process) cannot have
    # chosen this kernel honestly: one line naming it, never a verdict.
    with pytest.raises(DispatchBugError, match=rf"^dispatch bug: SME2 micro-kernel {SME2_RUN} "
                                               "sampled running in a process whose hwcaps "
                                               "hide SME2"):
        sme2_verdict(kernels=None, kleidiai=[], device_sme2=False,
                     sampled=_sample({at(0x11110): 80}, 100))


def test_sme1_kernels_sampled_prove_the_sme_level_beside_sme2_absent() -> None:
    """An SME1-only phone: its SME1 kernels sampled; SME2 absent by its hwcaps."""
    ev = sme2_verdict(kernels=None, kleidiai=["Convolution (NHWC, PF32)"], device_sme2=False,
                      device_sme=True, sampled=_sample({at(0x11410): 30, 0x10: 5}, 100))
    assert (ev.sme, ev.sme2) == (PROVEN, ABSENT)
    assert ev.sme_reason == f"sampling: 30 of 100 samples in 1 SME1 kernel ({SME1_PACK})"
    assert ev.levels == f"SME: proven (SME1 kernels: {SME1_PACK}); SME2: absent"
