"""What `pytest benchmarks` runs on any machine: end-to-end latency of the built-in models on the
selected device, measured from the ETDump's Method::execute events."""

import pytest

CASES = [("toy_cnn", "fp32", 1)]


@pytest.mark.parametrize("model,dtype,threads", CASES,
                         ids=[f"{m}-{d}-t{t}" for m, d, t in CASES])
def test_e2e_latency(sme2_bench, model, dtype, threads):
    result = sme2_bench(model, dtype=dtype, threads=threads)
    assert result.e2e.n == result.runs
    assert 0 < result.e2e.min_ms <= result.e2e.median_ms <= result.e2e.max_ms
