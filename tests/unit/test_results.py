import json

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.results import (RESULTS_SCHEMA, BenchmarkResult, atomic_write_text,
                                 write_results)


def _result(**kw) -> BenchmarkResult:
    samples = [1.0, 1.2, 1.1]
    base = dict(nodeid="b.py::t[x]", model="toy_cnn", dtype="fp32", threads=1,
                runner={"name": "python", "kind": "python", "labels": {"sme2": "off"}},
                device={"kind": "host", "cpu": "x"}, runs=3, warmup=1, e2e_ms=samples,
                e2e=latency_stats(samples), etdump="a.etdump", pte="m.pte", export_key="k")
    base.update(kw)
    return BenchmarkResult(**base)


def test_json_has_the_contract_keys():
    d = _result().to_json()
    for key in ("nodeid", "model", "dtype", "threads", "runner", "device", "runs", "warmup",
                "e2e_ms", "median_ms", "p90_ms", "cv_pct", "etdump", "pte"):
        assert key in d
    assert d["runner"] == "python"
    assert d["median_ms"] == 1.1


def test_round_trip_keeps_everything_including_extra_keys():
    r = _result(extra={"categories_ms": {"GEMM": 0.5}})
    back = BenchmarkResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r


def test_results_file_is_versioned(tmp_path):
    p = tmp_path / "out" / "results.json"
    write_results(p, [_result(), _result(nodeid="b.py::t[y]")])
    doc = json.loads(p.read_text())
    assert doc["schema"] == RESULTS_SCHEMA
    assert [b["nodeid"] for b in doc["benchmarks"]] == ["b.py::t[x]", "b.py::t[y]"]


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    p = tmp_path / "f.json"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [q.name for q in tmp_path.iterdir()] == ["f.json"]
