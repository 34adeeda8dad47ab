"""results.json written after every benchmark at the cost of what changed, byte for byte what
one json.dumps of the whole document gives."""

from __future__ import annotations

import json

from pytest_sme2.results.timing import LatencyStats
from pytest_sme2.results import BlockResult, ResultsWriter, results_document


def _result(i: int) -> BlockResult:
    stats = LatencyStats(n=2, median_ms=1.0 + i, mean_ms=1.0, p10_ms=1.0, p90_ms=1.0, min_ms=1.0,
                         max_ms=1.0, std_ms=0.0, cv_pct=0.0, mad_ms=0.0, outliers=0)
    return BlockResult(nodeid=f"t[{i}]", model="toy_cnn", dtype="fp32", threads=1,
                           runner={"name": "native", "kind": "native", "labels": {"a": "b\nc"}},
                           device={"kind": "host"}, runs=2, warmup=1, e2e_ms=[1.0, 2.5],
                           e2e=stats, etdump="x.etdump", pte="m.pte",
                           extra={"operators": [{"name": "Conv #1", "paths": ["a", "b"]}],
                                  "categories_ms": {}, "nested": {"empty": [], "d": {}}})


def _expected(results, comparisons, session) -> str:
    return json.dumps(results_document(results, comparisons, session), indent=2) + "\n"


def test_each_write_matches_the_whole_document_byte_for_byte():
    writer = ResultsWriter()
    results: list[BlockResult] = []
    comparisons = [{"model": "toy_cnn", "speedup": {"point": 1.0}}]
    session = {"versions": {"python": "3.11"}, "config": {"runs": 2}}
    assert writer.text(results, [], session) == _expected(results, [], session)
    for i in range(3):
        results.append(_result(i))
        assert writer.text(results, comparisons, session) == \
            _expected(results, comparisons, session)


def test_a_result_is_laid_out_once(monkeypatch):
    writer = ResultsWriter()
    results = [_result(0), _result(1)]
    writer.text(results)
    calls: list[str] = []
    original = BlockResult.to_json
    monkeypatch.setattr(BlockResult, "to_json",
                        lambda self: calls.append(self.nodeid) or original(self))
    results.append(_result(2))
    writer.text(results)
    assert calls == ["t[2]"]


def test_write_puts_the_text_in_the_file(tmp_path):
    path = tmp_path / "out" / "results.json"
    ResultsWriter().write(path, [_result(0)], [], {})
    assert path.read_text() == _expected([_result(0)], [], {})
