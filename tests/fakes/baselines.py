"""Benchmark results as the baseline and gate tests need them: a host result with realistic
device facts, and one carrying an explicit record of what is under test."""

from __future__ import annotations

from datetime import datetime, timezone

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.results import BlockResult, ResultAnalysis, RunContext

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
AT_10 = GatePolicy(fail_on_regression=10)


def bench_result(samples=(1.0, 1.1, 0.9), **kw) -> BlockResult:
    device = {"kind": "host", "serial": "vm", "model": "x86_64", "cpu": "AMD EPYC",
              "abi": "x86_64", "os": "Linux", "kernel": "6.1", "cores": 2, "sme": False,
              "sme2": False, "executorch": "1.5.1",
              "extra": {"python": "3.11.7", "cpus_allowed": [0, 1]}}
    device.update(kw.pop("device", {}))
    base = dict(nodeid="b.py::t[x]", model="toy_cnn", dtype="fp32", threads=1,
                runner={"name": "python", "kind": "python",
                        "labels": {"runtime": "executorch.pybindings", "executorch": "1.5.1"}},
                device=device, runs=len(samples), warmup=1, e2e_ms=list(samples),
                e2e=latency_stats(samples), etdump="a.etdump", pte="m.pte",
                export_key="2e9e4915a511dbff")
    # extra= as results.json has it: categories_ms, block and cpu_mask go to their typed homes
    extra = dict(kw.pop("extra", {"categories_ms": {"GEMM": 0.5}}))
    base.update(kw, analysis=ResultAnalysis(categories_ms=extra.pop("categories_ms", {})),
                context=RunContext(block=extra.pop("block", None)),
                cpu_mask=extra.pop("cpu_mask", None), extra=extra)
    return BlockResult(**base)


def result_with_device_extra(**extra) -> BlockResult:
    r = bench_result()
    r.device = {**r.device.to_dict(), "extra": {**r.device.to_dict()["extra"], **extra}}
    return r


UNDER_TEST = {"export_key": "2e9e4915a511dbff", "model_source": "aaaa", "recipe": "rrrr",
              "program": "pppp", "versions": {"torch": "2.13.0", "executorch": "1.5.1",
                                              "torchao": "0.18.0"},
              "runner_labels": {"runtime": "executorch.pybindings", "executorch": "1.5.1"}}


def under_test_result(samples=(1.0, 1.1, 0.9), **changes) -> BlockResult:
    """A result with an explicit record of what is under test (``UNDER_TEST`` amended)."""
    under = {**UNDER_TEST, **changes}
    return bench_result(samples, under_test=under)
