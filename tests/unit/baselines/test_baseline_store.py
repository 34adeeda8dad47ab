"""baseline_store: the file (round trip, cap, sessions), bad input with its exact messages,
concurrent writers, schema-1 migration, and the environment a baseline was recorded in."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from pytest_sme2.baselines.key import BaselineKey
from pytest_sme2.results import UnderTest
from pytest_sme2.baselines.store import SCHEMA, Baseline, BaselineError, find, load, save
from pytest_sme2.gate.rule import NOT_COMPARED, REGRESSION, evaluate
from pytest_sme2.results import BlockResult
from tests.needs import tool
from tests.fakes.baselines import AT_10, T0, UNDER_TEST, bench_result, under_test_result

REPO = Path(__file__).resolve().parents[3]
FIX = "delete it or re-record it with --save-baseline"

# -- the file --------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    blocks = [(1.0, 1.2, 1.1), (1.3, 1.25, 1.2)]
    path = save([under_test_result(b) for b in blocks], tmp_path, commit="a" * 40, now=T0,
                session_id="s1")
    assert path.name == BaselineKey.from_result(bench_result()).filename
    base = load(path)
    assert base.key == BaselineKey.from_result(bench_result())
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
        save([bench_result((1.0 + i,))], tmp_path, keep=3, commit=None,
             now=T0 + timedelta(days=i))
    (path,) = tmp_path.glob("*.json")
    sessions = load(path).sessions
    assert [s.median_ms for s in sessions] == [3.0, 4.0, 5.0]
    assert sessions[-1].timestamp.startswith("2026-01-05")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary or lock files


def test_same_session_id_adds_blocks_to_one_session(tmp_path):
    save([bench_result((1.0,))], tmp_path, session_id="run-1", commit=None)
    path = save([bench_result((2.0,))], tmp_path, session_id="run-1", commit=None)
    save([bench_result((3.0,))], tmp_path, session_id="run-2", commit=None)
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
    assert load(save([bench_result()], tmp_path / "b1")).sessions[0].git_commit == head
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert load(save([bench_result()], tmp_path / "b2")).sessions[0].git_commit is None


def test_results_of_different_keys_are_not_one_session(tmp_path):
    with pytest.raises(BaselineError, match="different keys"):
        save([bench_result(), bench_result(threads=2)], tmp_path)


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
    good = save([bench_result()], tmp_path / "src", commit=None).read_text()
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
    doc = json.loads(save([bench_result()], tmp_path / "src", commit=None).read_text())
    doc["sessions"][0]["blocks"] = [[1.0, -2.0]]
    p = _file(tmp_path, json.dumps(doc))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p}: malformed (session 0 needs 'blocks': non-empty "
                            f"lists of positive times in ms); {FIX}")


def test_a_corrupt_baseline_fails_the_gate_never_passes(tmp_path):
    name = BaselineKey.from_result(bench_result()).filename
    (tmp_path / name).write_text('{"schema": "pytest-sme2/baseline/2", "sessions": [')
    with pytest.raises(BaselineError, match="corrupt or truncated"):
        evaluate([bench_result()], tmp_path)


def test_save_replaces_a_corrupt_file_and_keeps_it_aside(tmp_path):
    name = BaselineKey.from_result(bench_result()).filename
    (tmp_path / name).write_text("{trunc")
    path = save([bench_result()], tmp_path, commit=None)
    assert len(load(path).sessions) == 1
    assert (tmp_path / (name + ".corrupt")).read_text() == "{trunc"


def test_save_never_overwrites_a_newer_format(tmp_path):
    name = BaselineKey.from_result(bench_result()).filename
    newer = json.dumps({"schema": "pytest-sme2/baseline/3"})
    (tmp_path / name).write_text(newer)
    with pytest.raises(BaselineError, match="upgrade pytest-sme2"):
        save([bench_result()], tmp_path, commit=None)
    assert (tmp_path / name).read_text() == newer


WRITER = """
import sys, time
from pathlib import Path
sys.path[:0] = [{repo!r}]   # tests.fakes
from tests.fakes.baselines import bench_result
from pytest_sme2.baselines.store import save
folder, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
for i in range(20):
    save([bench_result((1.0 + i / 100,))], folder, keep=1000, commit=None,
         session_id=f"{{tag}}-{{i}}")
"""


def test_two_processes_saving_at_once_lose_nothing(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
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
    # the key as a test's, less the test (schema 1 knew none: the asking test takes it)
    assert base.key == replace(BaselineKey.from_result(bench_result()), test="")
    assert base.migrated == [old]
    assert base.sessions[0].under_test == UnderTest(
        export_key="1111111111111111",
        versions={"torch": "2.13.0", "executorch": "1.5.1", "torchao": "0.18.0"},
        runner_labels={"executorch": "1.5.1", "runtime": "executorch.pybindings"})
    # Judged, not refused: the export changed (another export hash), the device did not.
    report = evaluate([under_test_result((3.0, 3.03, 2.97), export_key="2222222222222222")],
                      tmp_path, AT_10)
    j = report.e2e
    assert j.status == REGRESSION and j.baseline_sessions == 3 and not j.foreign
    assert j.changed_since_baseline == (
        "export (model source, recipe or torch/executorch/torchao versions)",)
    # Saving migrates: one schema-2 file with the old sessions first, the old file removed.
    new = save([under_test_result((1.0,))], tmp_path, commit=None, now=T0 + timedelta(days=30))
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
    found = find(tmp_path, BaselineKey.from_result(bench_result()))
    assert found.foreign_reason is None
    assert [s.median_ms for s in found.baseline.sessions] == [1.0, 1.0, 2.0, 2.0]
    assert found.baseline.under_test.versions["executorch"] == "1.5.2"
    save([bench_result((2.0,))], tmp_path, commit=None, now=T0 + timedelta(days=30))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [BaselineKey.from_result(bench_result()).filename,
         "toy_cnn-fp32-t1-python-cccccccccc.json"])


def test_a_schema_1_file_from_another_cpu_is_still_refused(tmp_path):
    _v1_file(tmp_path, "toy_cnn-fp32-t1-python-5ba0d98b94.json", "1111", [1.0], cpu="Intel Xeon")
    j = evaluate([bench_result()], tmp_path, AT_10).e2e
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


def _stored(tmp_path: Path, result: BlockResult) -> Baseline:
    return load(save([result], tmp_path, commit=None))


def _reason(tmp_path: Path, now: BlockResult) -> str | None:
    return find(tmp_path, BaselineKey.from_result(now)).foreign_reason


def test_same_environment_compares(tmp_path):
    _stored(tmp_path, bench_result())
    assert _reason(tmp_path, bench_result()) is None


def test_other_cpu_is_named(tmp_path):
    base = _stored(tmp_path, bench_result())
    assert _reason(tmp_path, bench_result(device={"cpu": "Intel Xeon"})) == (
        f"baseline recorded in another environment ({base.path.name}): "
        "CPU/SoC 'AMD EPYC' -> 'Intel Xeon'")


@pytest.mark.parametrize("now,expected", [
    (dict(device={"abi": "arm64-v8a"}), "ABI 'x86_64' -> 'arm64-v8a'"),
    (dict(device={"sme2": True}), "SME2 capability False -> True"),
    (dict(device={"sme": True}), "SME capability False -> True"),
    (dict(extra={"cpu_mask": "f0"}), "CPU set '0-1' -> 'mask=f0'"),
])
def test_each_environment_difference_is_a_reason(tmp_path, now, expected):
    _stored(tmp_path, bench_result())
    reason = _reason(tmp_path, bench_result(**now))
    assert reason is not None and expected in reason


SME2_PHONE = {"kind": "android", "cpu": "Mediatek MT6993", "abi": "arm64-v8a", "sme": True,
              "sme2": True}


def test_an_sme1_only_session_is_never_judged_against_an_sme2_baseline(tmp_path):
    """Issue 47: the Snapdragon 8 Elite Gen 5 (SME, no SME2) and an SME2 phone run other
    kernels; the key holds both flags, and the reason names the classes."""
    base = _stored(tmp_path, bench_result(device=SME2_PHONE))
    sme1 = bench_result(device={**SME2_PHONE, "sme2": False})
    assert BaselineKey.from_result(sme1).filename != base.path.name
    assert _reason(tmp_path, sme1) == (
        f"baseline recorded in another environment ({base.path.name}): SME2 capability True "
        "-> False; a device of class SME (no SME2) is never judged against a baseline of "
        "class SME2")
    # Saved, the SME1-only session starts its own file: the two never mix.
    assert save([sme1], tmp_path, commit=None) != base.path
    assert _reason(tmp_path, sme1) is None


def test_save_keeps_the_measured_program_once_by_hash(tmp_path):
    from dataclasses import replace

    from pytest_sme2.baselines import programs as base_programs

    pte = tmp_path / "model.pte"
    pte.write_bytes(b"the program")
    folder = tmp_path / "baselines"
    for day in range(2):
        save([replace(bench_result((1.0,)), pte=str(pte))], folder, commit=None,
             now=T0 + timedelta(days=day))
    sha = base_programs.sha256_of(pte)
    assert [p.name for p in (folder / "programs").iterdir()] == [f"{sha}.pte"]
    assert len(list(folder.glob("*.json"))) == 1


# Written by commit dbea006's code (two host sessions of toy_cnn fp32 t1, native runner).
REAL_BASELINE = Path(__file__).parents[2] / "fakes" / "baseline_host_time.json"


def test_a_baseline_file_loads_typed_and_writes_back_byte_for_byte(tmp_path):
    from pytest_sme2.baselines.store import dumps
    from pytest_sme2.results import DeviceFacts

    text = REAL_BASELINE.read_text()
    base = load(REAL_BASELINE)
    assert all(isinstance(s.device, DeviceFacts) for s in base.sessions)
    assert base.sessions[-1].device.spec == "host" and base.sessions[-1].device.sme2 is False
    assert dumps(base) == text
    # a session an older writer recorded with fewer device facts writes back as it was
    doc = json.loads(text)
    doc["sessions"][0]["device"] = {"kind": "host", "cpu": "AMD EPYC", "extra": {"python": "3"}}
    old = tmp_path / REAL_BASELINE.name
    old.write_text(json.dumps(doc, indent=2) + "\n")
    assert json.loads(dumps(load(old)))["sessions"][0]["device"] == doc["sessions"][0]["device"]
