"""pytest_sme2.measure.cost alone: each measure that keeps a session's own cost small, without
a pytest session or a runner (README, "What a session costs")."""

from __future__ import annotations

import atexit
import gc
import sys
import types

from pytest_sme2.measure import cost as session_cost


class _Plugins:
    def __init__(self, hypothesis):
        self.plugin = hypothesis
        self.unregistered: list = []

    def get_plugin(self, name):
        return self.plugin if name == "hypothesispytest" else None

    def unregister(self, plugin):
        self.unregistered.append(plugin)


class _Config:
    def __init__(self, plugins, statistics=False):
        self.pluginmanager = plugins
        self.statistics = statistics

    def getoption(self, name, default=None):
        assert name == "--hypothesis-show-statistics"
        return self.statistics


def test_hypothesis_sits_the_summary_out_only_when_nothing_used_it(monkeypatch):
    hyp = object()
    monkeypatch.delitem(sys.modules, "hypothesis", raising=False)
    idle = _Plugins(hyp)
    session_cost.skip_idle_hypothesis_summary(_Config(idle))
    assert idle.unregistered == [hyp]

    asked = _Plugins(hyp)
    session_cost.skip_idle_hypothesis_summary(_Config(asked, statistics=True))
    assert asked.unregistered == []

    monkeypatch.setitem(sys.modules, "hypothesis", object())
    used = _Plugins(hyp)
    session_cost.skip_idle_hypothesis_summary(_Config(used))
    assert used.unregistered == []
    absent = _Plugins(None)
    session_cost.skip_idle_hypothesis_summary(_Config(absent))   # not installed: nothing to do
    assert absent.unregistered == []


def test_the_exit_collection_is_skipped_once_however_many_sessions(monkeypatch):
    registered: list = []
    monkeypatch.setattr(session_cost, "_EXIT_HOOKS", set())
    monkeypatch.setattr(atexit, "register", registered.append)
    session_cost.skip_exit_collection()
    session_cost.skip_exit_collection()
    assert registered == [gc.freeze]


def test_settling_runs_its_body_without_the_collector_then_freezes_what_exists():
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    try:
        with session_cost.settling() as froze:
            assert not gc.isenabled()
            kept = [object() for _ in range(10)]
        assert froze == [True] and gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        session_cost.unfreeze()
    assert gc.get_freeze_count() == 0 and kept


def test_settling_leaves_someone_elses_frozen_objects_to_them():
    gc.freeze()
    try:
        with session_cost.settling() as froze:
            pass
        assert froze == [False]        # theirs: the caller must not unfreeze them
    finally:
        gc.unfreeze()


def test_settling_restores_a_collector_that_was_off():
    gc.disable()
    try:
        with session_cost.settling():
            pass
        assert not gc.isenabled()
    finally:
        session_cost.unfreeze()
        gc.enable()


def test_the_fork_server_waits_around_a_measured_process_even_when_it_fails(monkeypatch):
    calls: list[str] = []
    server = types.SimpleNamespace(pause=lambda: calls.append("pause"),
                                   resume=lambda: calls.append("resume"))
    monkeypatch.setattr(session_cost, "shared_server", lambda: server)
    with session_cost.fork_server_paused():
        calls.append("measure")
    try:
        with session_cost.fork_server_paused():
            raise RuntimeError("runner died")
    except RuntimeError:
        pass
    assert calls == ["pause", "measure", "resume", "pause", "resume"]


def test_warm_imports_read_each_collected_export_once_and_never_fail(monkeypatch, tmp_path):
    asked: list[tuple] = []
    read: list = []

    def cached(model, dtype, cache_dir):
        asked.append((model, dtype, cache_dir))
        if model == "broken":
            raise ValueError("corrupt cache entry")
        return None if model == "missing" else types.SimpleNamespace(etrecord=f"{model}.et")

    monkeypatch.setattr(session_cost, "cached_export", cached)
    monkeypatch.setattr(session_cost, "read_etrecord", read.append)
    session_cost.warm_imports([("toy_cnn", "fp32"), ("missing", "fp16"), ("broken", "int8")],
                              tmp_path)
    assert asked == [("toy_cnn", "fp32", tmp_path), ("missing", "fp16", tmp_path),
                     ("broken", "int8", tmp_path)]
    assert read == ["toy_cnn.et"]
