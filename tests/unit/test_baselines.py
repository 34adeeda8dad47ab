"""Baselines: keys, the file (round trip, cap, bad input, concurrent writers), environment
checks and the gate on synthetic data with realistic noise."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.baselines import (IMPROVEMENT, NOT_COMPARED, OK, REGRESSION, SCHEMA, Baseline,
                                   BaselineError, BaselineKey, Session, compare_environment,
                                   find_baseline, gate, gate_all, group_by_key, judge,
                                   judge_category, judge_levels, junit_properties, load,
                                   noise_floor, save)
from pytest_sme2.results import BenchmarkResult

REPO = Path(__file__).resolve().parents[2]
FIX = "delete it or re-record it with --save-baseline"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


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
                export_key="2e9e4915a511dbff", extra={"categories_ms": {"GEMM": 0.5}})
    base.update(kw)
    return BenchmarkResult(**base)


def _with_device_extra(**extra) -> BenchmarkResult:
    r = _result()
    r.device["extra"] = {**r.device["extra"], **extra}
    return r


# -- keys ------------------------------------------------------------------------------------


def test_filename_is_readable_and_hash_is_stable():
    key = BaselineKey.from_result(_result())
    assert re.fullmatch(r"toy_cnn-fp32-t1-python-[0-9a-f]{10}\.json", key.filename)
    # Label order, serial numbers, host names, samples and node ids do not change the key.
    other = _result(samples=(5.0,), nodeid="other", device={"serial": "x", "kernel": "7"},
                    runner={"name": "python", "kind": "python",
                            "labels": {"executorch": "1.5.1",
                                       "runtime": "executorch.pybindings"}})
    assert BaselineKey.from_result(other).digest == key.digest
    # ... nor another process (no hash randomisation, no dict-order dependence).
    code = ("import json, sys; from pytest_sme2.baselines import BaselineKey; "
            "print(BaselineKey.from_dict(json.loads(sys.argv[1])).digest)")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(key.to_dict())], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == key.digest


CHANGES = {
    "device kind": lambda: _result(device={"kind": "android"}),
    "cpu": lambda: _result(device={"cpu": "Intel Xeon"}),
    "abi": lambda: _result(device={"abi": "arm64-v8a"}),
    "sme2": lambda: _result(device={"sme2": True}),
    "cpus allowed": lambda: _with_device_extra(cpus_allowed=[0, 1, 2, 3]),
    "cpu mask": lambda: _result(extra={"cpu_mask": "f0"}),
    "model": lambda: _result(model="vit_tiny"),
    "dtype": lambda: _result(dtype="fp16"),
    "threads": lambda: _result(threads=2),
    "runner name": lambda: _result(runner={"name": "fast", "kind": "python", "labels": {
        "runtime": "executorch.pybindings", "executorch": "1.5.1"}}),
    "runner labels": lambda: _result(runner={"name": "python", "kind": "python", "labels": {
        "runtime": "executorch.pybindings", "executorch": "1.4.1"}}),
    "export key": lambda: _result(export_key="0000000000000000"),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_each_key_field_changes_the_hash(what):
    assert BaselineKey.from_result(CHANGES[what]()).digest != \
        BaselineKey.from_result(_result()).digest


def test_results_group_by_key_in_first_seen_order():
    groups = group_by_key([_result(threads=2), _result(), _result(samples=(2.0,))])
    assert [(k.threads, len(rs)) for k, rs in groups.items()] == [(2, 1), (1, 2)]


# -- the file --------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    blocks = [(1.0, 1.2, 1.1), (1.3, 1.25, 1.2)]
    path = save([_result(b) for b in blocks], tmp_path, commit="a" * 40, now=T0,
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
    text = path.read_text()
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA and doc["digest"] == base.key.digest
    assert doc["sessions"][0]["median_ms"] == pytest.approx(1.175)
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
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
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
    p = _file(tmp_path, json.dumps({"schema": "pytest-sme2/baseline/2", "sessions": []}))
    with pytest.raises(BaselineError) as e:
        load(p)
    assert str(e.value) == (f"baseline {p}: schema 'pytest-sme2/baseline/2' is not one this "
                            "pytest-sme2 reads ('pytest-sme2/baseline/1'); upgrade pytest-sme2, "
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
    (tmp_path / name).write_text('{"schema": "pytest-sme2/baseline/1", "sessions": [')
    with pytest.raises(BaselineError, match="corrupt or truncated"):
        gate([_result()], tmp_path)


def test_save_replaces_a_corrupt_file_and_keeps_it_aside(tmp_path):
    name = BaselineKey.from_result(_result()).filename
    (tmp_path / name).write_text("{trunc")
    path = save([_result()], tmp_path, commit=None)
    assert len(load(path).sessions) == 1
    assert (tmp_path / (name + ".corrupt")).read_text() == "{trunc"


def test_save_never_overwrites_a_newer_format(tmp_path):
    name = BaselineKey.from_result(_result()).filename
    newer = json.dumps({"schema": "pytest-sme2/baseline/2"})
    (tmp_path / name).write_text(newer)
    with pytest.raises(BaselineError, match="upgrade pytest-sme2"):
        save([_result()], tmp_path, commit=None)
    assert (tmp_path / name).read_text() == newer


WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_baselines import _result
from pytest_sme2.baselines import save
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


# -- environment -----------------------------------------------------------------------------


def _stored(tmp_path: Path, result: BenchmarkResult) -> Baseline:
    return load(save([result], tmp_path, commit=None))


def test_same_environment_compares(tmp_path):
    assert compare_environment(_stored(tmp_path, _result()), _result()) is None


def test_other_cpu_is_named(tmp_path):
    base = _stored(tmp_path, _result())
    reason = compare_environment(base, _result(device={"cpu": "Intel Xeon"}))
    assert reason == (f"baseline recorded in another environment ({base.path.name}): "
                      "CPU/SoC 'AMD EPYC' -> 'Intel Xeon'")


@pytest.mark.parametrize("now,expected", [
    (dict(device={"abi": "arm64-v8a"}), "ABI 'x86_64' -> 'arm64-v8a'"),
    (dict(device={"sme2": True}), "SME2 capability False -> True"),
    (dict(extra={"cpu_mask": "f0"}), "CPU set '0-1' -> 'mask=f0'"),
    (dict(export_key="ffff"), "export hash (model source, recipe, torch/executorch versions) "
                              "'2e9e4915a511dbff' -> 'ffff'"),
    (dict(runner={"name": "python", "kind": "python", "labels": {
        "runtime": "executorch.pybindings", "executorch": "1.4.1"}},
          device={"executorch": "1.4.1"}), "runner build labels executorch=1.5.1 -> 1.4.1"),
])
def test_each_environment_difference_is_a_reason(tmp_path, now, expected):
    reason = compare_environment(_stored(tmp_path, _result()), _result(**now))
    assert reason is not None and expected in reason


def test_binary_runner_flags_and_executorch_version(tmp_path):
    on = {"name": "sme2", "kind": "binary", "labels": {"sme2": "on"}}
    off = {"name": "sme2", "kind": "binary", "labels": {"sme2": "off"}}
    base = _stored(tmp_path, _result(runner=on))
    reason = compare_environment(base, _result(runner=off, device={"executorch": "1.6.0"}))
    assert reason.endswith("runner build labels sme2=on -> off; executorch 1.5.1 -> 1.6.0")


def test_gate_refuses_a_foreign_baseline_unless_allowed(tmp_path):
    save([_result(samples=(1.0,))], tmp_path, commit=None)
    now = _result(device={"cpu": "Intel Xeon"})
    found = find_baseline(tmp_path, now)  # same benchmark, other file: found for the reason
    assert found.baseline is not None and "CPU/SoC" in found.foreign_reason
    refused = gate([now], tmp_path, threshold_pct=10)
    assert refused.status == NOT_COMPARED
    assert refused.reason.startswith("not compared: baseline recorded in another environment")
    assert "CPU/SoC 'AMD EPYC' -> 'Intel Xeon'" in refused.reason
    assert "--allow-foreign-baseline" in refused.reason
    allowed = gate([now], tmp_path, threshold_pct=10, allow_foreign=True)
    assert allowed.status in (OK, REGRESSION, IMPROVEMENT)
    assert "foreign baseline allowed" in allowed.reason


def test_gate_without_baseline_says_how_to_record_one(tmp_path):
    j = gate([_result()], tmp_path)
    assert j.status == NOT_COMPARED and "record one with --save-baseline" in j.reason
    assert BaselineKey.from_result(_result()).filename in j.reason


def test_gate_never_judges_a_session_by_itself(tmp_path):
    save([_result((1.0,))], tmp_path, session_id="now", commit=None)
    j = gate([_result((1.0,))], tmp_path, exclude_session="now")
    assert j.status == NOT_COMPARED and "no sessions" in j.reason


# -- the gate on synthetic data --------------------------------------------------------------

BLOCK_SD = math.log(1.15) / 1.96   # 95% of blocks within ±15% of the true level
RUNS = 30


def _block(rng: np.random.Generator, level: float, sd: float) -> list[float]:
    """One runner process: its own lognormal drift, then 1-3% run-to-run noise inside."""
    drift = level * math.exp(rng.normal(0, sd))
    return list(drift * np.exp(rng.normal(0, rng.uniform(0.01, 0.03), RUNS)))


def _world(seed: int, effect: float, sessions: int, blocks: int, current: int,
           session_sd: float = 0.0, block_sd: float = BLOCK_SD
           ) -> tuple[Baseline, list[list[float]]]:
    rng = np.random.default_rng(seed)
    key = BaselineKey.from_result(_result())
    past = []
    for i in range(sessions):
        level = math.exp(rng.normal(0, session_sd))
        past.append(Session(timestamp=str(i),
                            blocks=[_block(rng, level, block_sd) for _ in range(blocks)]))
    level = effect * math.exp(rng.normal(0, session_sd))
    return Baseline(key, past), [_block(rng, level, block_sd) for _ in range(current)]


def _count(effect: float, status: str, seeds: int, **world) -> int:
    return sum(judge(*_world(seed, effect, **world), threshold_pct=10, resamples=1000,
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


def test_a_30_percent_slowdown_is_flagged():
    """(b) With ten 3-block baseline sessions and 3 current blocks, a 30% slowdown under ±15%
    drift between processes is flagged in 162 of 200 seeds (81%: three blocks cannot pin a
    median down better), a 50% one in all; the seed-0 case is flagged with the numbers."""
    base, cur = _world(0, 1.3, sessions=10, blocks=3, current=3)
    j = judge(base, cur, threshold_pct=10)
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
    base, cur = _world(0, 0.7, sessions=10, blocks=3, current=3)
    j = judge(base, cur, threshold_pct=10)
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
    (path,) = tmp_path.glob("*.json")
    base = load(path)
    j = judge_category(base, "GEMM", [1.0, 1.01, 0.99])
    assert j.status == REGRESSION and j.category == "GEMM" and j.reason.startswith("GEMM ")
    assert judge_category(base, "Convolution", [0.2, 0.2, 0.2]).status == OK
    assert judge_category(base, "Pooling", [0.1]).status == NOT_COMPARED


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
    nc = dict(junit_properties(judge_levels([], [1.0])))
    assert nc["sme2_gate_status"] == "not_compared" and "sme2_gate_ratio" not in nc
    cat = junit_properties(judge_levels([[1.0]], [1.0], category="Data Movement"))
    assert cat[0] == ("sme2_gate_Data_Movement_status", "ok")


# -- confirmation of a suspected regression (BenchSession.confirm) ------------------------------


def _gated_session(tmp_path: Path, confirm_blocks: int = 2):
    from pytest_sme2.session import BenchSession
    from pytest_sme2.settings import BenchSettings

    session = BenchSession(BenchSettings(report_dir=tmp_path / "report"))
    session.baseline_dir = tmp_path / "bl"
    session.confirm_blocks = confirm_blocks
    for i in range(3):  # a steady past at 1.0 ms: a small noise floor
        level = 1.0 + 0.01 * i
        save([_result((level, level * 1.01, level * 0.99))], session.baseline_dir,
             session_id=f"s{i}", commit=False, now=T0 + timedelta(days=i))
    return session


def _confirming(session, first, later: list[tuple[float, ...]]):
    """Run BenchSession.confirm with a stand-in for the runner: the blocks it 'measures' are
    ``later``, in order; returns the judgement and what was measured and reported."""
    from pytest_sme2.bench import BenchmarkRun

    measured, reported, progress = [], [], []

    def measure(run: BenchmarkRun) -> BenchmarkResult:
        r = _result(later[len(measured)], extra={"block": run.block})
        measured.append(run.block)
        return r

    judgements = session.confirm(BenchmarkRun("toy_cnn"), "python", None, first,
                                 session.judge_all([first]), on_block=reported.append,
                                 progress=progress.append, measure=measure)
    return judgements[0], measured, reported, progress


def test_one_slow_process_is_outvoted_by_the_confirmation_blocks(tmp_path):
    session = _gated_session(tmp_path)
    first = _result((1.6, 1.61, 1.59))           # a process that lost its second core
    assert session.judge([first]).status == REGRESSION
    judgement, measured, reported, progress = _confirming(
        session, first, [(1.0, 1.01, 0.99), (1.02, 1.0, 1.01)])
    assert judgement.status == OK and judgement.current_blocks == 3
    assert measured == [1, 2] and [r.extra["block"] for r in reported] == [1, 2]
    assert "a regression is suspected (end to end 1.5" in progress[0]
    assert "2 more block(s)" in progress[0]


def test_a_real_regression_is_in_every_block_and_stays_one(tmp_path):
    session = _gated_session(tmp_path)
    slow = (1.6, 1.61, 1.59)
    judgement, measured, _, _ = _confirming(session, _result(slow), [slow, slow])
    assert judgement.status == REGRESSION and judgement.current_blocks == 3
    assert "(3 block(s))" in judgement.reason and measured == [1, 2]


def test_nothing_is_measured_again_without_a_suspected_regression_or_when_disabled(tmp_path):
    session = _gated_session(tmp_path)
    judgement, measured, _, _ = _confirming(session, _result((1.0, 1.0, 1.0)), [])
    assert judgement.status == OK and measured == []
    session.confirm_blocks = 0
    judgement, measured, _, _ = _confirming(session, _result((1.6, 1.6, 1.6)), [])
    assert judgement.status == REGRESSION and judgement.current_blocks == 1 and measured == []


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
    e2e, gemm, conv, pool = gate_all([now], folder, 10.0,
                                     categories=["GEMM", "Convolution", "Pooling"])
    assert (e2e.category, e2e.status) == (None, OK)
    assert (gemm.category, gemm.status) == ("GEMM", REGRESSION)
    assert gemm.reason.startswith("GEMM ") and "slower" in gemm.reason
    assert (conv.category, conv.status) == ("Convolution", OK)
    assert pool.status == NOT_COMPARED and "Pooling is 1.0% of the baseline's end-to-end " \
        "time, below the 5% a category needs to be gated" in pool.reason
    assert gate([now], folder, 10.0).status == OK          # gate() stays end to end only


def test_categories_share_the_baselines_fate_when_it_is_missing_or_foreign(tmp_path):
    folder = _history(tmp_path, {"GEMM": 0.5})
    missing = gate_all([_result(dtype="int8")], folder, categories=["GEMM"])
    assert [(j.category, j.status) for j in missing] == [(None, NOT_COMPARED),
                                                         ("GEMM", NOT_COMPARED)]
    assert all("record one with --save-baseline" in j.reason for j in missing)
    elsewhere = _result(device={"cpu": "Other CPU"})
    foreign = gate_all([elsewhere], folder, categories=["GEMM"])
    assert all(j.foreign and j.status == NOT_COMPARED for j in foreign)
    allowed = gate_all([elsewhere], folder, categories=["GEMM"], allow_foreign=True)
    assert all("[foreign baseline allowed: " in j.reason for j in allowed)


def test_session_gates_every_category_with_time_when_asked_for_all(tmp_path):
    session = _gated_session(tmp_path)
    session.gate_categories = ["all"]
    judged = session.judge_all([_result((1.0, 1.0, 1.0),
                                        extra={"categories_ms": {"GEMM": 0.5, "Other": 0.5}})])
    assert [j.category for j in judged] == [None, "GEMM", "Other"]
    assert session.judge([_result()]).category is None     # judge(): end to end only


def test_a_suspected_category_regression_is_confirmed_too(tmp_path):
    session = _gated_session(tmp_path)
    session.gate_categories = ["GEMM"]
    first = _result((1.0, 1.0, 1.0), extra={"categories_ms": {"GEMM": 1.5}})
    judged = session.judge_all([first])
    assert [j.status for j in judged] == [OK, REGRESSION]
    from pytest_sme2.bench import BenchmarkRun

    measured, progress = [], []

    def measure(run):
        measured.append(run.block)
        return _result((1.0, 1.0, 1.0), extra={"categories_ms": {"GEMM": 0.5}})

    again = session.confirm(BenchmarkRun("toy_cnn"), "python", None, first, judged,
                            progress=progress.append, measure=measure)
    assert measured == [1, 2] and [j.status for j in again] == [OK, OK]
    assert "(GEMM 3.000x)" in progress[0]


def test_a_failed_confirmation_run_raises_after_reporting_what_it_measured(tmp_path):
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.errors import Sme2Error

    session = _gated_session(tmp_path)
    first = _result((1.6, 1.6, 1.6))
    reported = []

    def measure(run):
        if run.block == 2:
            raise Sme2Error("runner python: killed by signal 9 (SIGKILL)")
        return _result((1.6, 1.6, 1.6), extra={"block": run.block})

    with pytest.raises(Sme2Error, match="SIGKILL"):
        session.confirm(BenchmarkRun("toy_cnn"), "python", None, first,
                        session.judge_all([first]), on_block=reported.append, measure=measure)
    assert [r.extra["block"] for r in reported] == [1]    # kept; the plugin records the first
