"""baseline_key: the key (where it ran + what was asked: readable file name, stable hash, every
field in it) and what is under test (read from the export and the registry, changes named)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sme2.baselines.key import BaselineKey, under_test_of
from pytest_sme2.results import UnderTest
from pytest_sme2.baselines.store import group_by_key
from tests.fakes.baselines import UNDER_TEST, bench_result, result_with_device_extra

REPO = Path(__file__).resolve().parents[3]

# -- keys ------------------------------------------------------------------------------------


def test_filename_is_readable_and_hash_is_stable():
    key = BaselineKey.from_result(bench_result())
    assert re.fullmatch(r"toy_cnn-fp32-t1-python-[0-9a-f]{10}\.json", key.filename)
    # Serial numbers, host names, samples, a block's own suffix and what is under test (runner
    # labels, the export) do not change the key.
    other = bench_result(samples=(5.0,), nodeid="b.py::t[x][native#3]",
                         device={"serial": "x", "kernel": "7"},
                         runner={"name": "python", "kind": "python",
                                 "labels": {"executorch": "1.6"}},
                         export_key="0000000000000000")
    other.context.benchmark = "b.py::t[x]"      # as a comparison's block names its test
    assert BaselineKey.from_result(other).digest == key.digest
    # A document written before blocks named their test: a numbered block's suffix is its own.
    other.context.benchmark, other.context.block = None, 3
    assert BaselineKey.from_result(other).digest == key.digest
    # The test does: another test's blocks never join this one's baseline.
    assert BaselineKey.from_result(bench_result(nodeid="b.py::t2[x]")).digest != key.digest
    # ... nor another process (no hash randomisation, no dict-order dependence).
    code = ("import json, sys; from pytest_sme2.baselines.key import BaselineKey; "
            "print(BaselineKey.from_dict(json.loads(sys.argv[1])).digest)")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(key.to_dict())], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == key.digest


CHANGES = {
    "device kind": lambda: bench_result(device={"kind": "android"}),
    "cpu": lambda: bench_result(device={"cpu": "Intel Xeon"}),
    "abi": lambda: bench_result(device={"abi": "arm64-v8a"}),
    "sme": lambda: bench_result(device={"sme": True}),
    "sme2": lambda: bench_result(device={"sme2": True}),
    "cpus allowed": lambda: result_with_device_extra(cpus_allowed=[0, 1, 2, 3]),
    "cpu mask": lambda: bench_result(extra={"cpu_mask": "f0"}),
    "emulated": lambda: result_with_device_extra(emulated=True),
    "model": lambda: bench_result(model="vit_tiny"),
    "dtype": lambda: bench_result(dtype="fp16"),
    "threads": lambda: bench_result(threads=2),
    "runner name": lambda: bench_result(runner={"name": "fast", "kind": "python", "labels": {
        "runtime": "executorch.pybindings", "executorch": "1.5.1"}}),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_each_key_field_changes_the_hash(what):
    assert BaselineKey.from_result(CHANGES[what]()).digest != \
        BaselineKey.from_result(bench_result()).digest


def test_a_measure_of_another_kind_is_another_key():
    time_key = BaselineKey.from_result(bench_result())
    assert time_key.measure == "time"
    assert BaselineKey.from_result(bench_result(), measure="instructions").digest != time_key.digest


def test_a_context_depth_is_another_key_and_depth_0_keeps_the_old_one():
    from pytest_sme2.results import GenerationResult

    plain = BaselineKey.from_result(bench_result())
    at_0 = bench_result()
    at_0.generation = GenerationResult(prompt_tokens=64, new_tokens=32)
    assert BaselineKey.from_result(at_0) == plain and "depth" not in plain.to_dict()
    deep = bench_result()
    deep.generation = GenerationResult(prompt_tokens=64, new_tokens=32, depth=512)
    key = BaselineKey.from_result(deep)
    assert key.digest != plain.digest and key.stem == "toy_cnn-fp32-t1-d512-python"
    assert BaselineKey.from_dict(key.to_dict()) == key
    assert BaselineKey.from_dict(plain.to_dict()) == plain
    assert plain.differences(key) == ["context depth 0 -> 512"]


def test_results_group_by_key_in_first_seen_order():
    groups = group_by_key([bench_result(threads=2), bench_result(), bench_result(samples=(2.0,))])
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
    # A baseline from before the timing mode was recorded was timed through the tracer.
    ({}, {"timing": "untraced"},
     ["timing: operator-traced -> untraced (re-record the baseline: --save-baseline)"]),
    ({"timing": "untraced"}, {"timing": "operator-traced"},
     ["timing: untraced -> operator-traced (re-record the baseline: --save-baseline)"]),
    ({"timing": "untraced"}, {"timing": "untraced"}, []),
    ({}, {"timing": "operator-traced"}, []),     # a user's executor_runner, then and now
    ({"timing": "untraced"}, {}, []),             # a result that does not say: not compared
])
def test_changes_since_the_baseline_are_named(old, new, expected):
    before = UnderTest.from_dict({**UNDER_TEST, **old})
    assert UnderTest.from_dict({**UNDER_TEST, **new}).changes_since(before) == expected


def test_under_test_is_read_from_the_export_and_the_registry(tmp_path, monkeypatch):
    from pytest_sme2.programs import registry

    (tmp_path / "net_mod.py").write_text("def build():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._REGISTRY, "tmp_net",
                        registry.ModelEntry("tmp_net", "net_mod:build"))
    export = tmp_path / "export"
    export.mkdir()
    (export / "meta.json").write_text(json.dumps({
        "pte_sha256": "ab" * 32, "versions": {"torch": "2.13.0", "executorch": "1.5.2",
                                              "torchao": "0.18.0"}}))
    result = bench_result(model="tmp_net", pte=str(export / "model.pte"))
    first = under_test_of(result)
    assert first.program == "ab" * 32 and first.versions["executorch"] == "1.5.2"
    assert first.export_key == "2e9e4915a511dbff" and first.recipe
    assert first.runner_labels == {"runtime": "executorch.pybindings", "executorch": "1.5.1"}
    (tmp_path / "net_mod.py").write_text("def build():\n    return None  # wider\n")
    assert under_test_of(result).changes_since(first) == ["model source",
                                                         "exported program unchanged"]
    # Recorded once when measured, then read back: the record wins.
    result.under_test = first.to_dict()
    assert under_test_of(result) == first
    assert under_test_of(bench_result(model="no_such_model")).model_source is None


def test_a_users_pte_is_judged_by_its_content(tmp_path):
    """A .pte taken as exported: no model source or recipe of ours; the program hash is the
    file's, so a changed file reads ``exported program``."""
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"ET12 one")
    first = under_test_of(bench_result(model=str(pte), pte=str(pte), dtype="pte"))
    assert first.model_source is None and first.recipe is None and first.program
    pte.write_bytes(b"ET12 two, longer")
    now = under_test_of(bench_result(model=str(pte), pte=str(pte), dtype="pte"))
    assert now.changes_since(first) == ["exported program"]


def test_the_history_keys_a_point_by_the_devices_sme_and_sme2_flags():
    """A session on an SME1-only phone and one on an SME2 phone of the same SoC name and model
    are two series in the history, as they are two baseline files."""
    from pytest_sme2.history.records import point   # the history's points: pure, no database

    phone = {"kind": "android", "cpu": "QTI SM8850", "abi": "arm64-v8a", "sme": True}
    sme1 = point([bench_result(device={**phone, "sme2": False})])
    sme2 = point([bench_result(device={**phone, "sme2": True})])
    assert (sme1.key["sme"], sme1.key["sme2"]) == (True, False)
    assert sme1.key_digest != sme2.key_digest
    assert sme1.key_digest == BaselineKey.from_result(bench_result(
        device={**phone, "sme2": False})).digest
