"""SME on vs SME hidden, per case, on a device with SME but no SME2: the class of the 2026
Snapdragon flagship (the Snapdragon 8 Elite Gen 5 reports `sme` and no `sme2`), whose KleidiAI
kernels are the SME1 ones.

On such a phone (`pytest benchmarks --device android`, its hwcaps saying SME without SME2) and
on `--device qemu:sme1` (QEMU -cpu max with SME2 hidden from every process), the pair comes by
itself: one native binary, `sme_on` as the device is and `sme_off` with SME hidden from its
process (docs/devices.md). Which SME level ran is proven: traced under QEMU, sampled on a phone.
An SME2 kernel seen on either side fails the benchmark before these asserts (a dispatch bug:
SME2 is hidden from both). Emulated timings say nothing about speed, so no speed-up is asserted;
on a phone the speed-up is reported, not asserted: whether SME1 beats NEON is what the pair is
there to measure.

On a device with SME2 (its SME2 pair is benchmarks/test_sme2.py) or without SME, these tests say
that they do not apply, and why."""

import pytest

EVIDENCE = ("proven", "indicated")


@pytest.mark.sme2(threads=[1])
def test_sme_speedup(sme2_compare, sme_off, sme_on, sme2_case, sme2_emulated):
    cmp = sme2_compare(sme_off, sme_on, sme2_case.model, dtype=sme2_case.dtype,
                       threads=sme2_case.threads)
    on = cmp.candidate_blocks[0].kernel_evidence
    off = cmp.base_blocks[0].kernel_evidence
    assert on.sme2 not in EVIDENCE and off.sme2 not in EVIDENCE, (on.levels, off.levels)
    assert off.sme == "absent", f"the SME-off runner shows SME: {off.levels}; {off.sme_reason}"
    if on.kleidiai_ops:
        # KleidiAI's packed path on a device with SME but no SME2 is its SME1 kernels.
        assert on.sme in EVIDENCE, f"{on.kleidiai_ops} ran without SME1 kernels: {on.sme_reason}"
    if cmp.outputs is not None:       # runners that write outputs (ours): SME must not change them
        assert cmp.outputs.equal, f"SME on and off disagree beyond tolerance: {cmp.outputs}"
    if sme2_emulated:
        # Executed kernels are the evidence here: SME1 kernels on the SME side (traced under
        # QEMU; on an emulated phone sampled), no SME code at all on the masked side.
        if on.kleidiai_ops:
            assert on.sme == "proven", on.sme_reason
        assert off.traced or off.sampled, off.reason
        seen = off.executed_kernels + off.sampled_kernels
        assert not any(k.isa_family in ("SME", "SME2") for k in seen), off.levels


@pytest.mark.sme2(threads=[1])
def test_generation_sme(sme2_compare, sme_off, sme_on, sme2_llm_case):
    cmp = sme2_compare(sme_off, sme_on, sme2_llm_case.model, dtype=sme2_llm_case.dtype,
                       threads=sme2_llm_case.threads, depth=sme2_llm_case.depth)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs   # the same token ids
    on, off = cmp.candidate_blocks[0].generation, cmp.base_blocks[0].generation
    for phase in ("prefill", "decode"):
        masked, kept = off.phase(phase).kernel_evidence, on.phase(phase).kernel_evidence
        assert kept is not None, f"{phase}: no kernel evidence on the SME side"
        seen = masked.executed_kernels + masked.sampled_kernels
        assert not any(k.isa_family in ("SME", "SME2") for k in seen), (
            f"{phase}: the SME-off runner ran SME code: {masked.levels}")
        assert kept.sme2 not in EVIDENCE, f"{phase}: {kept.levels}"
