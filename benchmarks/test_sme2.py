"""SME2-off vs SME2-on, per case, on a device that has SME2 — and, everywhere, the comparison
machinery on two host runners that must agree.

Configure the SME2 pair with two executor_runner builds that differ in one flag
(docs/native-runner.md):

    pytest benchmarks --device android \
        --runner sme2_off=/path/off/executor_runner,sme2=off \
        --runner sme2_on=/path/on/executor_runner,sme2=on

Without them, or on a device whose hwcaps show no SME2, the SME2 tests are skipped and say why.
"""

import pytest

EVIDENCE = ("proven", "indicated")


@pytest.mark.sme2(threads=[1])
def test_sme2_speedup(sme2_compare, sme2_off, sme2_on, sme2_capable_device, sme2_case,
                      sme2_min_speedup):
    cmp = sme2_compare(sme2_off, sme2_on, sme2_case.model, dtype=sme2_case.dtype,
                       threads=sme2_case.threads)
    on_evidence = cmp.candidate_blocks[0].kernel_evidence
    assert on_evidence["sme2"] in EVIDENCE, (
        f"no evidence that the SME2-on runner used SME2: {on_evidence['reason']}")
    assert cmp.speedup.low >= sme2_min_speedup(sme2_case.dtype), str(cmp)


# Same program, same XNNPACK kernels: only the thin layer around Method::execute differs, which
# can shift a 65 us inference by a percent or two. Differences under 5% are not called real here.
EQUIVALENCE_MARGIN = 0.05


def test_host_runners_agree(sme2_compare):
    """Python runtime vs our native runner on one .pte: the comparison must find no
    significant difference, and equal outputs."""
    cmp = sme2_compare("python", "native", "toy_cnn", dtype="fp32", threads=1,
                       margin=EQUIVALENCE_MARGIN)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs
    assert cmp.verdict == "no significant difference", str(cmp)
