"""Baselines and the gate: keys (where it ran + what was asked), what is under test, the file
(round trip, cap, bad input, concurrent writers, schema-1 migration), environment checks, and
the gate's entry points on synthetic data with realistic noise."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from statistics import median

import numpy as np
import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.baseline_key import BaselineKey, UnderTest
from pytest_sme2.baseline_store import (SCHEMA, Baseline, BaselineError, find, group_by_key,
                                        load, save)
from pytest_sme2.config import GatePolicy
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate import (IMPROVEMENT, NOT_COMPARED, OK, REGRESSION, evaluate, judge_levels,
                              run_with_confirmation)
from pytest_sme2.plugin import junit_properties
from pytest_sme2.results import BenchmarkResult, ResultAnalysis, RunContext
from tests.needs import tool
from pytest_sme2.stats import noise_floor

REPO = Path(__file__).resolve().parents[2]
FIX = "delete it or re-record it with --save-baseline"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
AT_10 = GatePolicy(fail_on_regression=10)


def _result(samples=(1.0, 1.1, 0.9), **kw) -> BenchmarkResult:
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
    # extra= as results.json has it: categories_ms and block go to their typed homes
    extra = dict(kw.pop("extra", {"categories_ms": {"GEMM": 0.5}}))
    base.update(kw, analysis=ResultAnalysis(categories_ms=extra.pop("categories_ms", {})),
                context=RunContext(block=extra.pop("block", None)), extra=extra)
    return BenchmarkResult(**base)


def _with_device_extra(**extra) -> BenchmarkResult:
    r = _result()
    r.device["extra"] = {**r.device["extra"], **extra}
    return r


UNDER_TEST = {"export_key": "2e9e4915a511dbff", "model_source": "aaaa", "recipe": "rrrr",
              "program": "pppp", "versions": {"torch": "2.13.0", "executorch": "1.5.1",
                                              "torchao": "0.18.0"},
              "runner_labels": {"runtime": "executorch.pybindings", "executorch": "1.5.1"}}


def _under(samples=(1.0, 1.1, 0.9), **changes) -> BenchmarkResult:
    """A result with an explicit record of what is under test (``UNDER_TEST`` amended)."""
    under = {**UNDER_TEST, **changes}
    return _result(samples, extra={"categories_ms": {"GEMM": 0.5}, "under_test": under})


# -- keys ------------------------------------------------------------------------------------


def test_filename_is_readable_and_hash_is_stable():
    key = BaselineKey.from_result(_result())
    assert re.fullmatch(r"toy_cnn-fp32-t1-python-[0-9a-f]{10}\.json", key.filename)
    # Serial numbers, host names, samples, node ids and what is under test (runner labels,
    # the export) do not change the key.
    other = _result(samples=(5.0,), nodeid="other", device={"serial": "x", "kernel": "7"},
                    runner={"name": "python", "kind": "python", "labels": {"executorch": "1.6"}},
                    export_key="0000000000000000")
    assert BaselineKey.from_result(other).digest == key.digest
    # ... nor another process (no hash randomisation, no dict-order dependence).
    code = ("import json, sys; from pytest_sme2.baseline_key import BaselineKey; "
            "print(BaselineKey.from_dict(json.loads(sys.argv[1])).digest)")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(key.to_dict())], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == key.digest


CHANGES = {
    "device kind": lambda: _result(device={"kind": "android"}),
    "cpu": lambda: _result(device={"cpu": "Intel Xeon"}),
    "abi": lambda: _result(device={"abi": "arm64-v8a"}),
    "sme": lambda: _result(device={"sme": True}),
    "sme2": lambda: _result(device={"sme2": True}),
    "cpus allowed": lambda: _with_device_extra(cpus_allowed=[0, 1, 2, 3]),
    "cpu mask": lambda: _result(extra={"cpu_mask": "f0"}),
    "emulated": lambda: _with_device_extra(emulated=True),
    "model": lambda: _result(model="vit_tiny"),
    "dtype": lambda: _result(dtype="fp16"),
    "threads": lambda: _result(threads=2),
    "runner name": lambda: _result(runner={"name": "fast", "kind": "python", "labels": {
        "runtime": "executorch.pybindings", "executorch": "1.5.1"}}),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_each_key_field_changes_the_hash(what):
    assert BaselineKey.from_result(CHANGES[what]()).digest != \
        BaselineKey.from_result(_result()).digest


def test_a_measure_of_another_kind_is_another_key():
    time_key = BaselineKey.from_result(_result())
    assert time_key.measure == "time"
    assert BaselineKey.from_result(_result(), measure="instructions").digest != time_key.digest


def test_results_group_by_key_in_first_seen_order():
    groups = group_by_key([_result(threads=2), _result(), _result(samples=(2.0,))])
    assert [(k.threads, len(rs)) for k, rs in groups.items()] == [(2, 1), (1, 2)]


# -- what is under test ----------------------------------------------------------------------


@pytest.mark.parametrize("old,new,expected", [
    ({}, {}, []),
    ({}, {"model_source": "bbbb", "program": "qqqq"}, ["model source"]),
    # A comment in the model file: the source changed, the exported graph did not.
    ({}, {"model_source": "bbbb"}, ["model source", "exported program unchanged"]),
    ({}, {"recipe": "ssss", "program": "qqqq"}, ["export recipe"]),
    ({}, {"versions": {"torch": "2.13.0", "executorch": "1.5.2", "torchao": "0.18.0"},
          "runner_labels": {"runtime": "executorch.pybindings", "executorch": "1.5.2"},
          "program": "qqqq"}, ["executorch 1.5.1 -> 1.5.2"]),          # said once
    ({}, {"program": "qqqq"}, ["exported program"]),
    ({}, {"runner_labels": {"sme2": "off"}},
     ["runner build labels executorch=1.5.1 -> (none), runtime=executorch.pybindings -> "
      "(none), sme2=(none) -> off"]),
    # A baseline recorded before any of this was known (schema 1): only the export hash.
    ({"model_source": None, "recipe": None, "program": None, "versions": {}},
     {"export_key": "ffff"},
     ["export (model source, recipe or torch/executorch/torchao versions)"]),
    ({"model_source": None, "recipe": None, "program": None}, {"export_key": "ffff",
     "versions": {"torch": "2.13.0", "executorch": "1.6.0", "torchao": "0.18.0"}},
     ["executorch 1.5.1 -> 1.6.0"]),
])
def test_changes_since_the_baseline_are_named(old, new, expected):
    before = UnderTest.from_dict({**UNDER_TEST, **old})
    assert UnderTest.from_dict({**UNDER_TEST, **new}).changes_since(before) == expected


def test_under_test_is_read_from_the_export_and_the_registry(tmp_path, monkeypatch):
    from pytest_sme2_models import registry

    (tmp_path / "net_mod.py").write_text("def build():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._REGISTRY, "tmp_net",
                        registry.ModelEntry("tmp_net", "net_mod:build"))
    export = tmp_path / "export"
    export.mkdir()
    (export / "meta.json").write_text(json.dumps({
        "pte_sha256": "ab" * 32, "versions": {"torch": "2.13.0", "executorch": "1.5.2",
                                              "torchao": "0.18.0"}}))
    result = _result(model="tmp_net", pte=str(export / "model.pte"))
    first = UnderTest.of(result)
    assert first.program == "ab" * 32 and first.versions["executorch"] == "1.5.2"
    assert first.export_key == "2e9e4915a511dbff" and first.recipe
    assert first.runner_labels == {"runtime": "executorch.pybindings", "executorch": "1.5.1"}
    (tmp_path / "net_mod.py").write_text("def build():\n    return None  # wider\n")
    assert UnderTest.of(result).changes_since(first) == ["model source",
                                                         "exported program unchanged"]
    # Recorded once when measured, then read back: the record wins.
    result.extra["under_test"] = first.to_dict()
    assert UnderTest.of(result) == first
    assert UnderTest.of(_result(model="no_such_model")).model_source is None


# -- the file --------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    blocks = [(1.0, 1.2, 1.1), (1.3, 1.25, 1.2)]
    path = save([_under(b) for b in blocks], tmp_path, commit="a" * 40, now=T0,
                session_id="s1")
    assert path.name == BaselineKey.from_result(_result()).filename
    base = load(path)
    assert base.key == BaselineKey.from_result(_result())
    (s,) = base.sessions
    assert s.blocks == [list(b) for b in blocks]
    assert s.block_medians == [1.1, 1.25]
    assert s.median_ms == pytest.approx(1.175)
    assert s.git_commit == "a" * 40
    assert s.timestamp == "2026-01-01T00:00:00+00:00"
    assert s.versions["executorch"] == "1.5.1"
    assert s.categories_ms == [{"GEMM": 0.5}, {"GEMM": 0.5}]
    assert s.under_test == UnderTest.from_dict(UNDER_TEST)
    text = path.read_text()
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA == "pytest-sme2/baseline/2"
    assert doc["digest"] == base.key.digest
    assert doc["sessions"][0]["median_ms"] == pytest.approx(1.175)
    assert doc["sessions"][0]["under_test"]["model_source"] == "aaaa"
    assert '"blocks": [\n' in text and "[1.0, 1.2, 1.1]" in text  # one line per block

    def sorted_keys(pairs):
        assert [k for k, _ in pairs] == sorted(k for k, _ in pairs)
        return dict(pairs)
    json.loads(text, object_pairs_hook=sorted_keys)


def test_newest_session_last_and_capped(tmp_path):
    for i in range(5):
        save([_result((1.0 + i,))], tmp_path, keep=3, commit=None,
             now=T0 + timedelta(days=i))
    (path,) = tmp_path.glob("*.json")
    sessions = load(path).sessions
    assert [s.median_ms for s in sessions] == [3.0, 4.0, 5.0]
    assert sessions[-1].timestamp.startswith("2026-01-05")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary or lock files


def test_same_session_id_adds_blocks_to_one_session(tmp_path):
    save([_result((1.0,))], tmp_path, session_id="run-1", commit=None)
    path = save([_result((2.0,))], tmp_path, session_id="run-1", commit=None)
    save([_result((3.0,))], tmp_path, session_id="run-2", commit=None)
    sessions = load(path).sessions
    assert [s.blocks for s in sessions] == [[[1.0], [2.0]], [[3.0]]]
    assert [s.median_ms for s in load(path).excluding("run-2").sessions] == [1.5]


def test_git_commit_inside_a_repo_and_null_outside(tmp_path, monkeypatch):
    tool("git", "apt-get install git")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", *env, "commit", "-q", "--allow-empty", "-m", "x"], cwd=repo,
                   check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    monkeypatch.chdir(repo)
    assert load(save([_result()], tmp_path / "b1")).sessions[0].git_commit == head
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert load(save([_result()], tmp_path / "b2")).sessions[0].git_commit is None


def test_results_of_different_keys_are_not_one_session(tmp_path):
    with pytest.raises(BaselineError, match="different keys"):
        save([_result(), _result(threads=2)], tmp_path)


# -- bad input: exact messages ---------------------------------------------------------------


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "toy_cnn-fp32-t1-python-0123456789.json"
    p.write_text(text)
    return p


def test_corrupt_json(tmp_path):
    p = _file(tmp_path, '{"schema": ')
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p} is corrupt or truncated (not valid JSON at line 1 "
                            f"column 12: Expecting value); {FIX}")


def test_truncated_file(tmp_path):
    good = save([_result()], tmp_path / "src", commit=None).read_text()
    p = _file(tmp_path, good[: len(good) // 2])
    with pytest.raises(BaselineError) as e:
        load(p)
    assert re.fullmatch(rf"baseline {re.escape(str(p))} is corrupt or truncated \(not valid "
                        rf"JSON at line \d+ column \d+: [^)]+\); {FIX}", str(e.value))


def test_empty_file(tmp_path):
    p = _file(tmp_path, "")
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == f"baseline {p} is corrupt or truncated (empty); {FIX}"


def test_unknown_schema_version(tmp_path):
    p = _file(tmp_path, json.dumps({"schema": "pytest-sme2/baseline/3", "sessions": []}))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p}: schema 'pytest-sme2/baseline/3' is not one this "
                            "pytest-sme2 reads ('pytest-sme2/baseline/2'); upgrade pytest-sme2, "
                            "or re-record it with --save-baseline")


def test_not_a_baseline(tmp_path):
    p = _file(tmp_path, json.dumps({"schema": "pytest-sme2/results/1"}))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p}: not a pytest-sme2 baseline (schema "
                            f"'pytest-sme2/results/1', expected '{SCHEMA}'); {FIX}")


def test_malformed_samples(tmp_path):
    doc = json.loads(save([_result()], tmp_path / "src", commit=None).read_text())
    doc["sessions"][0]["blocks"] = [[1.0, -2.0]]
    p = _file(tmp_path, json.dumps(doc))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p}: malformed (session 0 needs 'blocks': non-empty "
                            f"lists of positive times in ms); {FIX}")


def test_a_corrupt_baseline_fails_the_gate_never_passes(tmp_path):
    name = BaselineKey.from_result(_result()).filename
    (tmp_path / name).write_text('{"schema": "pytest-sme2/baseline/2", "sessions": [')
    with pytest.raises(BaselineError, match="corrupt or truncated"):
        evaluate([_result()], tmp_path)


def test_save_replaces_a_corrupt_file_and_keeps_it_aside(tmp_path):
    name = BaselineKey.from_result(_result()).filename
    (tmp_path / name).write_text("{trunc")
    path = save([_result()], tmp_path, commit=None)
    assert len(load(path).sessions) == 1
    assert (tmp_path / (name + ".corrupt")).read_text() == "{trunc"


def test_save_never_overwrites_a_newer_format(tmp_path):
    name = BaselineKey.from_result(_result()).filename
    newer = json.dumps({"schema": "pytest-sme2/baseline/3"})
    (tmp_path / name).write_text(newer)
    with pytest.raises(BaselineError, match="upgrade pytest-sme2"):
        save([_result()], tmp_path, commit=None)
    assert (tmp_path / name).read_text() == newer


WRITER = """
import sys, time
from pathlib import Path
sys.path[:0] = [{tests!r}, str(Path({tests!r}).parents[1])]   # test_baselines; tests.needs
from test_baselines import _result
from pytest_sme2.baseline_store import save
folder, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
for i in range(20):
    save([_result((1.0 + i / 100,))], folder, keep=1000, commit=None, session_id=f"{{tag}}-{{i}}")
"""


def test_two_processes_saving_at_once_lose_nothing(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(Path(__file__).parent)))
    folder, go = tmp_path / "baselines", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(script), str(folder), tag, str(go)], cwd=REPO)
             for tag in ("a", "b")]
    go.touch()  # both start together
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    (path,) = folder.glob("*.json")
    sessions = load(path).sessions
    assert len(sessions) == 40
    assert sorted(s.session_id for s in sessions) == sorted(
        f"{t}-{i}" for t in "ab" for i in range(20))
    json.loads(path.read_text())
    assert [p.name for p in folder.iterdir()] == [path.name]


# -- schema 1 (the key held the export hash and the runner's build labels) --------------------


def _v1_file(folder: Path, name: str, export_key: str, medians: list[float], day0: int = 0,
             cpu: str = "AMD EPYC", executorch: str = "1.5.1") -> Path:
    """A baseline file exactly as pytest-sme2 wrote schema 1 (docs/regression-gate.md)."""
    key = {"abi": "x86_64", "cpu": cpu, "cpu_set": "0-1", "device_kind": "host",
           "dtype": "fp32", "export_key": export_key, "model": "toy_cnn", "runner": "python",
           "runner_labels": {"executorch": executorch, "runtime": "executorch.pybindings"},
           "sme2": False, "threads": 1}
    device = {"abi": "x86_64", "cores": 2, "cpu": cpu, "executorch": executorch,
              "extra": {"cpus_allowed": [0, 1], "python": "3.11.7"}, "kernel": "6.1",
              "kind": "host", "model": "x86_64", "os": "Linux", "serial": "vm", "sme": False,
              "sme2": False}
    sessions = [{"block_medians": [m], "blocks": [[m, m * 1.01, m * 0.99]],
                 "categories_ms": [{"GEMM": 0.5}], "device": device, "git_commit": None,
                 "median_ms": m, "session_id": f"v1-{day0 + i}",
                 "timestamp": (T0 + timedelta(days=day0 + i)).isoformat(timespec="seconds"),
                 "versions": {"executorch": executorch, "python": "3.11.7",
                              "torch": "2.13.0", "torchao": "0.18.0"}}
                for i, m in enumerate(medians)]
    path = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"digest": "5ba0d98b94a4c1aa", "key": key,
                                "schema": "pytest-sme2/baseline/1", "sessions": sessions},
                               indent=2, sort_keys=True))
    return path


def test_a_schema_1_file_is_migrated_and_judged(tmp_path):
    old = _v1_file(tmp_path, "toy_cnn-fp32-t1-python-5ba0d98b94.json", "1111111111111111",
                   [1.0, 1.01, 0.99])
    base = load(old)
    assert base.key == BaselineKey.from_result(_result()) and base.migrated == [old]
    assert base.sessions[0].under_test == UnderTest(
        export_key="1111111111111111",
        versions={"torch": "2.13.0", "executorch": "1.5.1", "torchao": "0.18.0"},
        runner_labels={"executorch": "1.5.1", "runtime": "executorch.pybindings"})
    # Judged, not refused: the export changed (another export hash), the device did not.
    report = evaluate([_under((3.0, 3.03, 2.97), export_key="2222222222222222")], tmp_path,
                      AT_10)
    j = report.e2e
    assert j.status == REGRESSION and j.baseline_sessions == 3 and not j.foreign
    assert j.changed_since_baseline == (
        "export (model source, recipe or torch/executorch/torchao versions)",)
    # Saving migrates: one schema-2 file with the old sessions first, the old file removed.
    new = save([_under((1.0,))], tmp_path, commit=None, now=T0 + timedelta(days=30))
    assert [p.name for p in tmp_path.iterdir()] == [new.name] != [old.name]
    doc = json.loads(new.read_text())
    assert doc["schema"] == SCHEMA and len(doc["sessions"]) == 4
    assert [s["under_test"]["export_key"] for s in doc["sessions"]] == \
        ["1111111111111111"] * 3 + ["2e9e4915a511dbff"]


def test_schema_1_files_of_one_benchmark_become_one_history(tmp_path):
    """Schema 1 started a new file for every export hash (a model edit, an executorch
    upgrade): those files are one history now, in time order."""
    _v1_file(tmp_path, "toy_cnn-fp32-t1-python-aaaaaaaaaa.json", "1111", [1.0, 1.0], day0=0)
    _v1_file(tmp_path, "toy_cnn-fp32-t1-python-bbbbbbbbbb.json", "2222", [2.0, 2.0], day0=5,
             executorch="1.5.2")
    _v1_file(tmp_path, "toy_cnn-fp32-t1-python-cccccccccc.json", "3333", [9.0], day0=9,
             cpu="Intel Xeon")      # another CPU: another key, left alone
    found = find(tmp_path, BaselineKey.from_result(_result()))
    assert found.foreign_reason is None
    assert [s.median_ms for s in found.baseline.sessions] == [1.0, 1.0, 2.0, 2.0]
    assert found.baseline.under_test.versions["executorch"] == "1.5.2"
    save([_result((2.0,))], tmp_path, commit=None, now=T0 + timedelta(days=30))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [BaselineKey.from_result(_result()).filename, "toy_cnn-fp32-t1-python-cccccccccc.json"])


def test_a_schema_1_file_from_another_cpu_is_still_refused(tmp_path):
    _v1_file(tmp_path, "toy_cnn-fp32-t1-python-5ba0d98b94.json", "1111", [1.0], cpu="Intel Xeon")
    j = evaluate([_result()], tmp_path, AT_10).e2e
    assert j.status == NOT_COMPARED and j.foreign
    assert "(toy_cnn-fp32-t1-python-5ba0d98b94.json): CPU/SoC 'Intel Xeon' -> 'AMD EPYC'" \
        in j.reason


def test_a_schema_1_file_without_its_key_is_malformed(tmp_path):
    p = _v1_file(tmp_path, "toy_cnn-fp32-t1-python-5ba0d98b94.json", "1111", [1.0])
    doc = json.loads(p.read_text())
    del doc["key"]["cpu_set"]
    p.write_text(json.dumps(doc))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == f"baseline {p}: malformed ('key' lacks fields); {FIX}"


# -- environment -----------------------------------------------------------------------------


def _stored(tmp_path: Path, result: BenchmarkResult) -> Baseline:
    return load(save([result], tmp_path, commit=None))


def _reason(tmp_path: Path, now: BenchmarkResult) -> str | None:
    return find(tmp_path, BaselineKey.from_result(now)).foreign_reason


def test_same_environment_compares(tmp_path):
    _stored(tmp_path, _result())
    assert _reason(tmp_path, _result()) is None


def test_other_cpu_is_named(tmp_path):
    base = _stored(tmp_path, _result())
    assert _reason(tmp_path, _result(device={"cpu": "Intel Xeon"})) == (
        f"baseline recorded in another environment ({base.path.name}): "
        "CPU/SoC 'AMD EPYC' -> 'Intel Xeon'")


@pytest.mark.parametrize("now,expected", [
    (dict(device={"abi": "arm64-v8a"}), "ABI 'x86_64' -> 'arm64-v8a'"),
    (dict(device={"sme2": True}), "SME2 capability False -> True"),
    (dict(device={"sme": True}), "SME capability False -> True"),
    (dict(extra={"cpu_mask": "f0"}), "CPU set '0-1' -> 'mask=f0'"),
])
def test_each_environment_difference_is_a_reason(tmp_path, now, expected):
    _stored(tmp_path, _result())
    reason = _reason(tmp_path, _result(**now))
    assert reason is not None and expected in reason


def test_a_change_under_test_is_judged_and_named_never_refused(tmp_path):
    """The change a gate exists for — a wider model, an executorch upgrade, a rebuilt runner —
    is judged against the baseline, and the verdict says what changed."""
    for i in range(3):
        save([_under((1.0 + i / 100,) * 3)], tmp_path, session_id=f"s{i}", commit=None,
             now=T0 + timedelta(days=i))
    now = _under((1.6, 1.61, 1.59), model_source="bbbb", program="qqqq",
                 versions={"torch": "2.13.0", "executorch": "1.5.2", "torchao": "0.18.0"},
                 runner_labels={"runtime": "executorch.pybindings", "executorch": "1.5.2",
                                "sme2": "on"})
    j = evaluate([now], tmp_path, AT_10).e2e
    assert j.status == REGRESSION and not j.foreign
    changed = ("model source", "executorch 1.5.1 -> 1.5.2", "runner build labels sme2=(none) -> on")
    assert j.changed_since_baseline == changed
    assert j.to_dict()["changed_since_baseline"] == list(changed)
    assert j.reason.endswith("; changed since baseline: " + ", ".join(changed))
    assert re.fullmatch(r"regression 1\.\d\dx \[\d\.\d\d, \d\.\d\d\] vs baseline; changed since "
                        r"baseline: model source, executorch 1\.5\.1 -> 1\.5\.2, runner build "
                        r"labels sme2=\(none\) -> on", j.summary)
    same = evaluate([_under((1.0, 1.0, 1.0))], tmp_path, AT_10).e2e
    assert same.status == OK and same.changed_since_baseline == ()
    assert "changed since baseline" not in same.reason + same.summary


def test_gate_refuses_a_foreign_baseline_unless_allowed(tmp_path):
    save([_result(samples=(1.0,))], tmp_path, commit=None)
    now = _result(device={"cpu": "Intel Xeon"})
    found = find(tmp_path, BaselineKey.from_result(now))  # other file: found for the reason
    assert found.baseline is not None and "CPU/SoC" in found.foreign_reason
    refused = evaluate([now], tmp_path, AT_10).e2e
    assert refused.status == NOT_COMPARED and refused.foreign
    assert refused.reason.startswith("not compared: baseline recorded in another environment")
    assert "CPU/SoC 'AMD EPYC' -> 'Intel Xeon'" in refused.reason
    assert "--allow-foreign-baseline" in refused.reason
    assert refused.summary == refused.reason
    allowed = evaluate([now], tmp_path, GatePolicy(fail_on_regression=10, allow_foreign=True)).e2e
    assert allowed.status in (OK, REGRESSION, IMPROVEMENT)
    assert "foreign baseline allowed" in allowed.reason


def test_gate_without_baseline_says_how_to_record_one(tmp_path):
    j = evaluate([_result()], tmp_path).e2e
    assert j.status == NOT_COMPARED and "record one with --save-baseline" in j.reason
    assert BaselineKey.from_result(_result()).filename in j.reason
    assert evaluate([_result()], None).e2e.reason == "no baseline folder configured"


def test_gate_never_judges_a_session_by_itself(tmp_path):
    save([_result((1.0,))], tmp_path, session_id="now", commit=None)
    j = evaluate([_result((1.0,))], tmp_path, exclude_session="now").e2e
    assert j.status == NOT_COMPARED and "no sessions" in j.reason


# -- the rule on synthetic data --------------------------------------------------------------

BLOCK_SD = math.log(1.15) / 1.96   # 95% of blocks within ±15% of the true level
RUNS = 30


def _block(rng: np.random.Generator, level: float, sd: float) -> list[float]:
    """One runner process: its own lognormal drift, then 1-3% run-to-run noise inside."""
    drift = level * math.exp(rng.normal(0, sd))
    return list(drift * np.exp(rng.normal(0, rng.uniform(0.01, 0.03), RUNS)))


def _world(seed: int, effect: float, sessions: int, blocks: int, current: int,
           session_sd: float = 0.0, block_sd: float = BLOCK_SD
           ) -> tuple[list[list[float]], list[float]]:
    """Block medians of ``sessions`` baseline sessions and of the current session."""
    rng = np.random.default_rng(seed)
    past = []
    for _ in range(sessions):
        level = math.exp(rng.normal(0, session_sd))
        past.append([median(_block(rng, level, block_sd)) for _ in range(blocks)])
    level = effect * math.exp(rng.normal(0, session_sd))
    return past, [median(_block(rng, level, block_sd)) for _ in range(current)]


def _count(effect: float, status: str, seeds: int, **world) -> int:
    return sum(judge_levels(*_world(seed, effect, **world), threshold_pct=10, resamples=1000,
                            seed=seed).status == status for seed in range(seeds))


def test_aa_no_false_alarms_with_three_block_sessions():
    """(a) Same code, ±15% drift between processes: 300 seeds, no regression called."""
    alarms = _count(1.0, REGRESSION, 300, sessions=5, blocks=3, current=3)
    assert alarms == 0, f"{alarms}/300 false alarms"
    assert _count(1.0, IMPROVEMENT, 300, sessions=5, blocks=3, current=3) == 0


def test_aa_single_blocks_and_shared_session_drift_rarely_alarm():
    """One block per session (the plugin's default) and a drift shared by a whole session are
    harder: the gate keeps false alarms at or below 1% (counted over 300 seeds each)."""
    single = _count(1.0, REGRESSION, 300, sessions=5, blocks=1, current=1)
    shared = _count(1.0, REGRESSION, 300, sessions=5, blocks=3, current=3, session_sd=0.05)
    assert single <= 3 and shared <= 3, (single, shared)


@pytest.mark.slow    # 300 simulated gates
def test_a_30_percent_slowdown_is_flagged():
    """(b) With ten 3-block baseline sessions and 3 current blocks, a 30% slowdown under ±15%
    drift between processes is flagged in 162 of 200 seeds (81%: three blocks cannot pin a
    median down better), a 50% one in all; the seed-0 case is flagged with the numbers."""
    j = judge_levels(*_world(0, 1.3, sessions=10, blocks=3, current=3), threshold_pct=10)
    assert j.status == REGRESSION and j.regressed
    assert re.match(r"\d+\.\d% slower: median [\d.]+ ms \(3 block\(s\)\) vs baseline [\d.]+ ms "
                    r"\(10 session\(s\)\); ratio [\d.]+x \[[\d.]+, [\d.]+\] 95% CI", j.reason)
    assert _count(1.3, REGRESSION, 200, sessions=10, blocks=3, current=3) >= 150
    assert _count(1.5, REGRESSION, 100, sessions=10, blocks=3, current=3) == 100


def test_a_5_percent_change_at_10_percent_is_not_flagged():
    """(c) Below the threshold: with ±15% drift between processes a 5% slowdown plus noise
    looks like more than 10% in 2 of 200 seeds (1%); with a quiet device (±2%), never."""
    assert _count(1.05, REGRESSION, 200, sessions=5, blocks=3, current=3) <= 2
    quiet = dict(sessions=5, blocks=3, current=3, block_sd=0.01)
    assert _count(1.05, REGRESSION, 200, **quiet) == 0
    assert _count(1.3, REGRESSION, 50, **quiet) == 50


def test_an_improvement_is_reported_not_failed():
    """(d) 30% faster: called an improvement, never a regression."""
    j = judge_levels(*_world(0, 0.7, sessions=10, blocks=3, current=3), threshold_pct=10)
    assert j.status == IMPROVEMENT and not j.regressed and "faster" in j.reason
    assert _count(0.7, REGRESSION, 100, sessions=10, blocks=3, current=3) == 0


def test_few_sessions_get_a_floor_of_at_least_25_percent():
    floor, source = noise_floor([[1.0]])
    assert floor == 0.25 and source == "1 block(s) of 1 session(s), at least 25% below 3 sessions"
    floor, source = noise_floor([[1.0, 1.01, 0.99]])
    assert floor == 0.25 and source.startswith("3 block(s) of 1 session(s)")
    floor, _ = noise_floor([[1.0, 1.1], [1.6, 1.5]])   # two sessions 50% apart
    assert floor > 0.5
    floor, source = noise_floor([[1.0], [1.01], [0.99], [1.0]])
    assert floor < 0.1 and source == "4 sessions"


def test_a_noisy_baseline_raises_the_limit():
    """A baseline whose sessions differ by ±20% cannot vouch for a 25% change."""
    sessions = [[0.8], [1.2], [1.0], [0.85], [1.15]]
    j = judge_levels(sessions, [1.25], threshold_pct=10)
    assert j.status == OK and j.noise_floor_pct > 25 and "within noise" in j.reason


def test_bad_threshold_and_empty_input():
    with pytest.raises(Exception, match="0% or more"):
        judge_levels([[1.0]], [1.0], threshold_pct=-1)
    assert judge_levels([], [1.0]).status == NOT_COMPARED
    assert judge_levels([[1.0]], []).status == NOT_COMPARED


def test_category_gate(tmp_path):
    def res(gemm: float) -> BenchmarkResult:
        return _result(extra={"categories_ms": {"GEMM": gemm, "Convolution": 0.2}})
    for i in range(4):
        save([res(0.5 + i / 1000) for _ in range(3)], tmp_path, commit=None,
             now=T0 + timedelta(days=i))
    policy = GatePolicy(categories=("GEMM", "Convolution", "Pooling"))
    report = evaluate([res(1.0), res(1.01), res(0.99)], tmp_path, policy)
    gemm, conv, pool = (report.categories[c] for c in ("GEMM", "Convolution", "Pooling"))
    assert gemm.status == REGRESSION and gemm.category == "GEMM" and gemm.reason.startswith("GEMM ")
    assert conv.status == OK
    assert pool.status == NOT_COMPARED
    assert [j.category for j in report.judgements] == [None, "GEMM", "Convolution", "Pooling"]


def test_junit_properties():
    j = judge_levels([[1.0, 1.0], [1.0, 1.01], [0.99, 1.0]], [2.0, 2.01], threshold_pct=10)
    props = dict(junit_properties(j))
    assert props["sme2_gate_status"] == "regression"
    assert props["sme2_gate_baseline_median"] == 1.0
    assert props["sme2_gate_current_median"] == pytest.approx(2.005)
    assert props["sme2_gate_ratio"] == pytest.approx(2.005)
    assert props["sme2_gate_ratio_ci_low"] <= props["sme2_gate_ratio"] <= \
        props["sme2_gate_ratio_ci_high"]
    assert props["sme2_gate_threshold_pct"] == 10
    assert props["sme2_gate_baseline_sessions"] == 3 and props["sme2_gate_current_blocks"] == 2
    assert props["sme2_gate_reason"] == j.reason
    assert "sme2_gate_changed_since_baseline" not in props
    nc = dict(junit_properties(judge_levels([], [1.0])))
    assert nc["sme2_gate_status"] == "not_compared" and "sme2_gate_ratio" not in nc
    cat = junit_properties(judge_levels([[1.0]], [1.0], category="Data Movement"))
    assert cat[0] == ("sme2_gate_Data_Movement_status", "ok")
    changed = dict(junit_properties(replace(j, changed_since_baseline=("model source",))))
    assert changed["sme2_gate_changed_since_baseline"] == "model source"


# -- confirmation of a suspected regression (gate.run_with_confirmation) ----------------------


def _steady_past(tmp_path: Path) -> Path:
    """Three sessions at 1.0 ms: a small noise floor."""
    folder = tmp_path / "bl"
    for i in range(3):
        level = 1.0 + 0.01 * i
        save([_result((level, level * 1.01, level * 0.99))], folder,
             session_id=f"s{i}", commit=False, now=T0 + timedelta(days=i))
    return folder


def _confirming(folder: Path, first: BenchmarkResult, later: list[tuple[float, ...]],
                policy: GatePolicy = AT_10):
    """run_with_confirmation with a stand-in for the runner: the blocks it 'measures' are
    ``later``, in order; returns the report and what was measured and said."""
    measured, progress = [], []

    def measure_more(block: int) -> BenchmarkResult:
        measured.append(block)
        return _result(later[len(measured) - 1], extra={"block": block})

    blocks, report = run_with_confirmation([first], measure_more, folder, policy,
                                           progress.append)
    assert blocks[0] is first and [b.block for b in blocks[1:]] == measured
    return report, measured, progress


def test_one_slow_process_is_outvoted_by_the_confirmation_blocks(tmp_path):
    folder = _steady_past(tmp_path)
    first = _result((1.6, 1.61, 1.59))           # a process that lost its second core
    assert evaluate([first], folder, AT_10).e2e.status == REGRESSION
    report, measured, progress = _confirming(folder, first,
                                             [(1.0, 1.01, 0.99), (1.02, 1.0, 1.01)])
    assert report.e2e.status == OK and report.e2e.current_blocks == 3 and report.confirmed
    assert measured == [1, 2]
    assert progress == ["toy_cnn fp32 t1 python: a regression is suspected (end to end "
                        "1.584x); measuring 2 more block(s) to confirm it"]


def test_a_real_regression_is_in_every_block_and_stays_one(tmp_path):
    slow = (1.6, 1.61, 1.59)
    report, measured, _ = _confirming(_steady_past(tmp_path), _result(slow), [slow, slow])
    assert report.e2e.status == REGRESSION and report.e2e.current_blocks == 3
    assert "(3 block(s))" in report.e2e.reason and measured == [1, 2]
    assert report.failure(AT_10).startswith("regression against the baseline: 5")
    assert report.failure(GatePolicy()) is None        # judged and reported, not enforced


def test_nothing_is_measured_again_without_a_suspected_regression_or_when_disabled(tmp_path):
    folder = _steady_past(tmp_path)
    report, measured, _ = _confirming(folder, _result((1.0, 1.0, 1.0)), [])
    assert report.e2e.status == OK and measured == [] and not report.confirmed
    report, measured, _ = _confirming(folder, _result((1.6, 1.6, 1.6)), [],
                                      GatePolicy(fail_on_regression=10, confirm_blocks=0))
    assert report.e2e.status == REGRESSION and report.e2e.current_blocks == 1 and measured == []


def test_blocks_already_measured_count_towards_confirmation(tmp_path):
    """A comparison side judged on 5 interleaved blocks is not measured again; one judged on 2
    gets one more block, so a regression is always called on at least 3 processes."""
    folder, slow = _steady_past(tmp_path), (1.6, 1.61, 1.59)
    blocks, report = run_with_confirmation([_result(slow)] * 5, lambda i: pytest.fail("measured"),
                                           folder, AT_10)
    assert report.e2e.status == REGRESSION and len(blocks) == 5 and not report.confirmed
    measured = []
    blocks, report = run_with_confirmation(
        [_result(slow)] * 2, lambda i: measured.append(i) or _result(slow), folder, AT_10)
    assert measured == [2] and len(blocks) == 3 and report.e2e.current_blocks == 3


# -- per-category gating ---------------------------------------------------------------------


def _history(tmp_path: Path, cats: dict[str, float], sessions: int = 3) -> Path:
    folder = tmp_path / "bl"
    for i in range(sessions):
        level = 1.0 + 0.01 * i
        save([_result((level, level * 1.01, level * 0.99), extra={"categories_ms": cats})],
             folder, session_id=f"s{i}", commit=False, now=T0 + timedelta(days=i))
    return folder


def test_a_category_regression_is_caught_while_end_to_end_is_within_noise(tmp_path):
    folder = _history(tmp_path, {"GEMM": 0.5, "Convolution": 0.4, "Pooling": 0.01})
    # Same end-to-end time, GEMM twice as slow (another category got faster).
    now = _result((1.0, 1.01, 0.99), extra={"categories_ms": {"GEMM": 1.0, "Convolution": 0.4,
                                                              "Pooling": 0.01}})
    report = evaluate([now], folder,
                      GatePolicy(fail_on_regression=10,
                                 categories=("GEMM", "Convolution", "Pooling")))
    e2e, gemm, conv, pool = report.judgements
    assert (e2e.category, e2e.status) == (None, OK)
    assert (gemm.category, gemm.status) == ("GEMM", REGRESSION)
    assert gemm.reason.startswith("GEMM ") and "slower" in gemm.reason
    assert (conv.category, conv.status) == ("Convolution", OK)
    assert pool.status == NOT_COMPARED and "Pooling is 1.0% of the baseline's end-to-end " \
        "time, below the 5% a category needs to be gated" in pool.reason
    assert report.regressions == [gemm]
    assert report.failure(AT_10) == "regression against the baseline: " + gemm.reason
    assert evaluate([now], folder, AT_10).judgements == (e2e,)   # no categories asked


def test_categories_share_the_baselines_fate_when_it_is_missing_or_foreign(tmp_path):
    folder = _history(tmp_path, {"GEMM": 0.5})
    gemm = GatePolicy(categories=("GEMM",))
    missing = evaluate([_result(dtype="int8")], folder, gemm).judgements
    assert [(j.category, j.status) for j in missing] == [(None, NOT_COMPARED),
                                                         ("GEMM", NOT_COMPARED)]
    assert all("record one with --save-baseline" in j.reason for j in missing)
    elsewhere = _result(device={"cpu": "Other CPU"})
    foreign = evaluate([elsewhere], folder, replace(gemm, fail_on_regression=10))
    assert all(j.foreign and j.status == NOT_COMPARED for j in foreign.judgements)
    assert foreign.failure(AT_10) == foreign.e2e.reason        # said once, not per category
    allowed = evaluate([elsewhere], folder, replace(gemm, allow_foreign=True))
    assert all("[foreign baseline allowed: " in j.reason for j in allowed.judgements)


def test_every_category_with_time_is_gated_when_asked_for_all(tmp_path):
    folder = _steady_past(tmp_path)
    report = evaluate([_result((1.0, 1.0, 1.0),
                               extra={"categories_ms": {"GEMM": 0.5, "Other": 0.5}})], folder,
                      GatePolicy(categories=("all",)))
    assert [j.category for j in report.judgements] == [None, "GEMM", "Other"]
    first = _result()
    report.record_on(first)
    assert first.baseline["category"] is None and first.baseline["status"] == OK
    assert set(first.baseline_categories) == {"GEMM", "Other"}
    evaluate([first], folder).record_on(first)
    assert first.baseline_categories == {}          # the key is there whatever was gated


def test_a_suspected_category_regression_is_confirmed_too(tmp_path):
    folder = _steady_past(tmp_path)
    policy = GatePolicy(fail_on_regression=10, categories=("GEMM",))
    first = _result((1.0, 1.0, 1.0), extra={"categories_ms": {"GEMM": 1.5}})
    assert [j.status for j in evaluate([first], folder, policy).judgements] == [OK, REGRESSION]
    measured, progress = [], []

    def measure_more(block):
        measured.append(block)
        return _result((1.0, 1.0, 1.0), extra={"categories_ms": {"GEMM": 0.5}})

    _, again = run_with_confirmation([first], measure_more, folder, policy, progress.append)
    assert measured == [1, 2] and [j.status for j in again.judgements] == [OK, OK]
    assert "(GEMM 3.000x)" in progress[0]


def test_a_failed_confirmation_run_raises_after_reporting_what_it_measured(tmp_path):
    folder = _steady_past(tmp_path)
    first = _result((1.6, 1.6, 1.6))
    reported = []

    def measure_more(block):
        if block == 2:
            raise Sme2Error("runner python: killed by signal 9 (SIGKILL)")
        reported.append(_result((1.6, 1.6, 1.6), extra={"block": block}))
        return reported[-1]

    with pytest.raises(Sme2Error, match="SIGKILL"):
        run_with_confirmation([first], measure_more, folder, AT_10)
    assert [r.block for r in reported] == [1]    # kept; the plugin records the first


# -- pytest-sme2 gate RESULTS.json (the same entry point, outside pytest) ---------------------


def _results_json(tmp_path: Path, blocks: list[BenchmarkResult], session_id: str = "") -> Path:
    from pytest_sme2.results import results_document

    path = tmp_path / "results.json"
    session = {"baseline_session_id": session_id} if session_id else {}
    path.write_text(json.dumps(results_document(blocks, (), session)))
    return path


def _gate_cli(capsys, *args) -> tuple[int, list[str], str]:
    from pytest_sme2.cli import main

    code = main(["gate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_gate_command_judges_each_benchmark_and_exits_1_on_a_regression(tmp_path, capsys):
    folder = _steady_past(tmp_path)
    slow, same = (1.6, 1.61, 1.59), (1.0, 1.01, 0.99)
    doc = _results_json(tmp_path, [_under(slow, model_source="bbbb", program="qqqq"),
                                   _under(slow), _result(same, threads=2)])
    code, lines, err = _gate_cli(capsys, doc, "--baseline-dir", folder)
    assert code == 1 and err == ""
    assert len(lines) == 2           # one per benchmark: its two blocks are judged together
    assert re.fullmatch(r"toy_cnn fp32 t1 python: regression 1\.5\dx \[\d\.\d\d, \d\.\d\d\] vs "
                        r"baseline; changed since baseline: .*", lines[0])
    assert lines[1].startswith("toy_cnn fp32 t2 python: not compared: no baseline "
                               "toy_cnn-fp32-t2-python-")
    assert _gate_cli(capsys, doc, "--baseline-dir", folder, "--fail-on-regression", "200")[0] == 0


def test_gate_command_passes_the_same_code_and_never_judges_a_session_by_itself(tmp_path,
                                                                              capsys):
    folder = _steady_past(tmp_path)
    code, lines, _ = _gate_cli(capsys, _results_json(tmp_path, [_result((1.0, 1.01, 0.99))]),
                               "--baseline-dir", folder)
    assert code == 0 and re.fullmatch(r"toy_cnn fp32 t1 python: ok \d\.\d\dx .* vs baseline",
                                      lines[0])
    # A session saved with --save-baseline names its baseline session in results.json, and is
    # judged against the sessions before it: 5x slower is a regression against those three,
    # while with itself among them the noise floor would swallow it.
    save([_result((5.0,))], folder, session_id="this-one", commit=None)
    assert _gate_cli(capsys, _results_json(tmp_path, [_result((5.0,))], "this-one"),
                     "--baseline-dir", folder)[0] == 1
    assert _gate_cli(capsys, _results_json(tmp_path, [_result((5.0,))]),
                     "--baseline-dir", folder)[0] == 0


def test_gate_command_fails_on_a_foreign_baseline_unless_allowed(tmp_path, capsys):
    folder = _steady_past(tmp_path)
    doc = _results_json(tmp_path, [_result(device={"cpu": "Intel Xeon"})])
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder)
    assert code == 1 and lines[0].startswith(
        "toy_cnn fp32 t1 python: not compared: baseline recorded in another environment")
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder, "--allow-foreign-baseline")
    assert code == 0 and " vs baseline" in lines[0]


def test_gate_command_judges_categories_when_asked(tmp_path, capsys):
    folder = _history(tmp_path, {"GEMM": 0.5, "Convolution": 0.4})
    doc = _results_json(tmp_path, [_result((1.0, 1.01, 0.99), extra={
        "categories_ms": {"GEMM": 1.0, "Convolution": 0.4}})])
    assert _gate_cli(capsys, doc, "--baseline-dir", folder)[0] == 0
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder, "--categories", "all")
    assert code == 1 and re.fullmatch(r"toy_cnn fp32 t1 python: ok .* vs baseline; GEMM "
                                      r"regression 2\.\d\dx .* vs baseline", lines[0])


@pytest.mark.parametrize("setup,args,message", [
    (lambda d: None, ["--baseline-dir", "{bl}"], "results.json: no such results file"),
    (lambda d: d.write_text("{}"), ["--baseline-dir", "{bl}"],
     "not a pytest-sme2 results document"),
    (lambda d: d.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": []}'),
     ["--baseline-dir", "{bl}"], "no benchmarks to judge"),
    (lambda d: d.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": [{}]}'),
     ["--baseline-dir", "{bl}"], "a results document this version cannot read"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        _result().to_json()]})), ["--baseline-dir", "{bl}/missing"], "no such folder"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        _result().to_json()]})), ["--baseline-dir", "{bl}", "--fail-on-regression", "-1"],
     "--fail-on-regression must be a percentage of 0 or more"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        _result().to_json()]})), ["--baseline-dir", "{bl}", "--categories", "Attention"],
     "--categories: unknown category 'Attention'"),
])
def test_gate_command_bad_input_exits_2_with_one_line(tmp_path, capsys, setup, args, message):
    doc = tmp_path / "results.json"
    setup(doc)
    (tmp_path / "bl").mkdir()
    code, lines, err = _gate_cli(capsys, doc, *[a.format(bl=tmp_path / "bl") for a in args])
    assert code == 2 and lines == [] and message in err and len(err.splitlines()) == 1


def test_gate_command_a_corrupt_baseline_is_bad_input_never_a_pass(tmp_path, capsys):
    (tmp_path / "bl").mkdir()
    (tmp_path / "bl" / BaselineKey.from_result(_result()).filename).write_text("{trunc")
    code, _, err = _gate_cli(capsys, _results_json(tmp_path, [_result()]), "--baseline-dir",
                             tmp_path / "bl")
    assert code == 2 and "is corrupt or truncated" in err
