"""The same-job A/B gate (``--sme2-gate-mode ab``) and ``--sme2-precision`` in a real session:
the base program kept beside the baseline, re-measured interleaved with a changed program and
judged by the paired rule; nothing to re-measure said in the verdict; precision's outcome on
each block. The changed program is ~5x heavier than the base (a chain of 512x512 matmuls
against toy_cnn), so the regression is far beyond any noise of a shared machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_sme2.gate.ab import AGAINST

TEST = """
def test_latency(sme2_bench, sme2_case):
    sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
"""


@pytest.fixture(scope="module")
def heavy_pte(tmp_path_factory) -> Path:
    """A program of our own exported with ExecuTorch's API, as a user's pipeline would."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    net = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).eval()
    # toy_cnn's input shape, so the same file name can hold either program
    edge = to_edge_transform_and_lower(
        torch.export.export(torch.nn.Sequential(torch.nn.Flatten(2), torch.nn.Linear(4096, 512),
                                                net), (torch.randn(1, 3, 64, 64),)),
        partitioner=[XnnpackPartitioner()])
    out = tmp_path_factory.mktemp("heavy") / "heavy.pte"
    out.write_bytes(edge.to_executorch().buffer)
    return out


def _blocks(pytester) -> list[dict]:
    return json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]


def test_a_changed_program_is_judged_against_the_base_re_measured(
        pytester, run_pytest, export_cache, toy_export, heavy_pte):

    pytester.makepyfile(test_ab=TEST)
    (pytester.path / "exported").mkdir()
    model = pytester.path / "exported" / "m.pte"
    shutil.copyfile(toy_export.pte, model)
    common = (f"--sme2-cache-dir={export_cache}", "--runs=5", "--warmup=1", "--sme2-threads=1",
              "--sme2-models=exported/m.pte", f"--baseline-dir={pytester.path / 'b'}")
    run_pytest(*common, "--save-baseline").assert_outcomes(passed=1)
    kept = list((pytester.path / "b" / "programs").glob("*.pte"))
    assert [p.read_bytes() for p in kept] == [toy_export.pte.read_bytes()]

    # The same program: nothing to re-measure; the stored rule judges and says why, and
    # --sme2-precision still takes its blocks (it once did not, in this fallback).
    res = run_pytest(*common, "--sme2-gate-mode=ab", "--sme2-precision=60")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*A/B gate not run: the program under test is the baseline's;"
                              " judged against the stored sessions*"])
    fallback = _blocks(pytester)
    assert fallback[0]["precision"]["blocks"] == len(fallback) >= 3
    assert not fallback[0]["precision"]["paired"]

    # A heavier program under the same name: the base is measured again, pair by pair.
    shutil.copyfile(heavy_pte, model)
    res = run_pytest(*common, "--sme2-gate-mode=ab", "--fail-on-regression=10", "-v")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines([f"*regression against the baseline: *slower: * interleaved "
                              f"pair(s) of blocks against {AGAINST}*"])
    blocks = _blocks(pytester)
    verdict = blocks[0]["baseline"]
    assert verdict["status"] == "regression" and verdict["against"] == AGAINST
    assert verdict["ratio"]["low"] > 2          # ~5x: far beyond noise
    assert verdict["changed_since_baseline"] == ["exported program"]
    # only the program under test is recorded (its blocks, one per pair); the base's are not
    assert len(blocks) == verdict["current_blocks"] >= 3
    assert all(b["model"].endswith("m.pte") for b in blocks)


def test_precision_takes_blocks_until_reached_or_says_what_stopped_it(
        pytester, run_pytest, export_cache, toy_export):
    pytester.makepyfile(test_precision=TEST)
    common = (f"--sme2-cache-dir={export_cache}", "--runs=5", "--warmup=1", "--sme2-threads=1",
              "--sme2-models=toy_cnn", "--sme2-dtypes=fp32")
    run_pytest(*common, "--sme2-precision=60").assert_outcomes(passed=1)
    blocks = _blocks(pytester)
    got = blocks[0]["precision"]
    assert got["reached"] and got["half_width_pct"] <= 60 and got["target_pct"] == 60
    assert len(blocks) == got["blocks"] >= 3 and not got["paired"]

    res = run_pytest(*common, "--sme2-precision=0.0001", "--sme2-precision-budget=1")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*--sme2-precision 0.0001% not reached: time budget 1 s spent "
                              "after * block(s): interval ±*",
                              "*--sme2-precision 0.0001%: 0 of 1 within ±0.0001%; not reached: "
                              "test_latency?toy_cnn-fp32-t1? (time budget 1 s spent*"])
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "--sme2-precision 0.0001%: 0 of 1 within" in report
    got = _blocks(pytester)[0]["precision"]
    assert not got["reached"] and got["why"].startswith("time budget 1 s spent")


COMPARE = """
def test_runners(sme2_compare):
    cmp = sme2_compare("python", "native", "toy_cnn", blocks=2)
    assert len(cmp.base_blocks) == len(cmp.candidate_blocks) >= 3
"""


def test_a_comparison_takes_pairs_until_its_speedup_is_precise(
        pytester, run_pytest, export_cache, toy_export):
    pytester.makepyfile(test_cmp=COMPARE)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=5", "--warmup=1",
                     "--sme2-precision=80")
    res.assert_outcomes(passed=1)
    blocks = _blocks(pytester)
    got = {json.dumps(b["precision"], sort_keys=True) for b in blocks}
    assert len(got) == 1                       # one outcome, on every block of both sides
    got = json.loads(got.pop())
    assert got["paired"] and got["reached"] and got["blocks"] * 2 == len(blocks)
