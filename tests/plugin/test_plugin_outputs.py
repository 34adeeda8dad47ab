"""A program whose outputs are NaN (a user's .pte: our own exports refuse one whose outputs
are not the eager model's) is measured, and said to be: in its line, results.json and
report.md; it passes unless --sme2-strict-outputs, which fails it with the same sentence."""

from __future__ import annotations

import json

import pytest
import torch


class NanNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x) * float("nan")


@pytest.fixture
def nan_pte(pytester):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    program = torch.export.export(NanNet().eval(), (torch.randn(1, 3, 8, 8),))
    lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    path = pytester.path / "nan_net.pte"
    path.write_bytes(lowered.to_executorch().buffer)
    return path


TEST = """
def test_latency(sme2_bench):
    r = sme2_bench("nan_net.pte", dtype="pte", threads=1)
    assert r.context.output_problem
"""

SENTENCE = "the outputs hold 144 non-finite values (NaN or inf)"      # 4 x 6 x 6


def test_nan_outputs_are_said_and_fail_only_when_asked(pytester, run_pytest, export_cache,
                                                       nan_pte):
    pytester.makepyfile(test_nan=TEST)
    args = (f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1", "-s")
    res = run_pytest(*args)
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([f"*nan_net.pte pte t1 native*| NOT FINITE: {SENTENCE}*",
                              "not finite: 1 benchmark(s) computed NaN or inf (test_latency)*"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    assert doc["benchmarks"][0]["output_problem"].startswith(SENTENCE)
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert f"> **Not finite**: test_latency (native): {SENTENCE}" in report

    strict = run_pytest(*args, "--sme2-strict-outputs")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([f"*nan_net.pte pte (native): {SENTENCE}*(--sme2-strict-outputs)"])
