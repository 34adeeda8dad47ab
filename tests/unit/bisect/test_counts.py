"""--measure instructions: a count per program (counted once, kept by its sha256), compared by
their ratio against a small threshold; never "cannot tell"."""

from types import SimpleNamespace

import pytest

from pytest_sme2.bisect import measures
from pytest_sme2.bisect.programs import Program


def _program(sha):
    return Program("test_mlp", sha, f"/store/{sha}.pte", "native", "native", "host", 1)


@pytest.mark.parametrize("base,candidate,status", [
    (1_000_000, 1_004_000, "no_change"),        # +0.4%: under 0.5%
    (1_000_000, 1_006_000, "regression"),
    (1_000_000, 990_000, "improvement"),
])
def test_a_count_compares_by_its_ratio_against_the_threshold(monkeypatch, base, candidate,
                                                            status):
    seen = []

    def count(pte, threads):
        seen.append(str(pte))
        return SimpleNamespace(per_execute={"/store/a.pte": base}.get(str(pte), candidate))

    monkeypatch.setattr(measures, "count_instructions", count)
    bench = measures.InstructionBench(0.5)
    got = bench.compare(_program("a"), _program("b"), "b vs a")
    assert got.status == status and got.pairs == 0 and got.low == got.high == got.point
    assert got.evidence == "instructions counted" and "x [" not in got.interval
    bench.compare(_program("b"), _program("a"), "a vs b")
    assert seen == ["/store/a.pte", "/store/b.pte"]       # each program counted once
