"""End-to-end latency of every case of the matrix (--sme2-models x --sme2-dtypes x
--sme2-threads) on the selected device: each Method::execute timed with no tracer in the process
(the runner's own clock), and the operator breakdown from traced runs of the same program after
them. The runner is the session's default: on the host our native runner where it builds (a run
costs it milliseconds; test_sme2.py checks it agrees with the Python runtime), else the Python
runtime."""


def test_latency(sme2_bench, sme2_case):
    result = sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
    assert result.e2e.n == result.runs
    assert 0 < result.e2e.min_ms <= result.e2e.median_ms <= result.e2e.max_ms
    # Categories are a partition of the traced runs' E2E (Other is what the named ones leave),
    # and nested events are not double counted: a double count would leave Other, or another
    # category, negative.
    assert result.timing is not None and result.timing.mode == "untraced", result.timing
    assert abs(sum(result.categories_ms.values()) - result.breakdown_e2e_ms) <= 1e-6
    assert min(result.categories_ms.values()) >= -1e-6, result.categories_ms
