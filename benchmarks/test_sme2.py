"""SME2-off vs SME2-on, per case, on a device that has SME2 — and, everywhere, the comparison
machinery on two host runners that must agree.

On a phone, configure the SME2 pair with two executor_runner builds that differ in one flag
(docs/native-runner.md):

    pytest benchmarks --device android \
        --runner sme2_off=/path/off/executor_runner,sme2=off \
        --runner sme2_on=/path/on/executor_runner,sme2=on

On the emulated Arm64 CPU (`pytest benchmarks --device qemu`, after `pytest-sme2 setup qemu`)
the pair comes by itself: one native binary, with SME and SME2 hidden from the SME2-off process.
There SME2 kernels really run and are traced, so the test proves which kernels executed and that
the outputs agree; emulated timings say nothing about speed, so no speed-up is asserted.

Without a pair, or on a device whose hwcaps show no SME2, the SME2 tests are skipped and say why.
"""

import pytest

EVIDENCE = ("proven", "indicated")


@pytest.mark.sme2(threads=[1])
def test_sme2_speedup(sme2_compare, sme2_off, sme2_on, sme2_capable_device, sme2_case,
                      sme2_min_speedup, sme2_emulated):
    cmp = sme2_compare(sme2_off, sme2_on, sme2_case.model, dtype=sme2_case.dtype,
                       threads=sme2_case.threads)
    on_evidence = cmp.candidate_blocks[0].kernel_evidence
    off_evidence = cmp.base_blocks[0].kernel_evidence
    assert on_evidence.sme2 in EVIDENCE, (
        f"no evidence that the SME2-on runner used SME2: {on_evidence.reason}")
    assert off_evidence.sme2 not in EVIDENCE, (
        f"the SME2-off runner shows SME2: {off_evidence.reason}")
    if cmp.outputs is not None:       # runners that write outputs (ours): SME2 must not change them
        assert cmp.outputs.equal, f"SME2 on and off disagree beyond tolerance: {cmp.outputs}"
    if sme2_emulated:
        # Executed kernels, not timings, are the evidence here: the SME2-on side ran SME2
        # micro-kernels and the masked side ran no SME code at all.
        assert on_evidence.sme2 == "proven", on_evidence.reason
        assert off_evidence.traced, off_evidence.reason
        assert not any(k.isa_family in ("SME", "SME2")
                       for k in off_evidence.executed_kernels), off_evidence.reason
        return                        # emulated speed is not speed: nothing to assert on it
    assert cmp.speedup.low >= sme2_min_speedup(sme2_case.dtype), str(cmp)


# Same program, same XNNPACK kernels: only the thin layer around Method::execute differs, which
# can shift a 65 us inference by a percent or two. Differences under 5% are not called real here.
EQUIVALENCE_MARGIN = 0.05


@pytest.mark.sme2(runners=["python", "native"])   # prepared before the session measures
def test_host_runners_agree(sme2_compare, sme2_device):
    """Python runtime vs our native runner on one .pte: the comparison must find no
    significant difference, and equal outputs."""
    # The host device itself: a phone that runs host programs (pytest-sme2's fake) still
    # cannot run the Python runtime.
    if sme2_device.spec != "host":
        pytest.skip(f"the Python runtime runs on the host only, not on --device "
                    f"{sme2_device.spec}")
    cmp = sme2_compare("python", "native", "toy_cnn", dtype="fp32", threads=1,
                       margin=EQUIVALENCE_MARGIN)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs
    assert cmp.verdict == "no significant difference", str(cmp)
