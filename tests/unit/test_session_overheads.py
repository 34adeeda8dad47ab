"""What a benchmark session costs beside its runs: hypothesis's end-of-session import skipped
when nothing used hypothesis, and the exit's garbage collection skipped. .etrecord files read
once per version and a runtime import that leaves torchao (and its noise) out need a real
export or interpreter: tests/integration/test_session_overheads_real.py."""

from __future__ import annotations

import atexit
import gc
import sys


from pytest_sme2 import plugin


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
    plugin._skip_idle_hypothesis_summary(_Config(idle))
    assert idle.unregistered == [hyp]

    asked = _Plugins(hyp)
    plugin._skip_idle_hypothesis_summary(_Config(asked, statistics=True))
    assert asked.unregistered == []

    monkeypatch.setitem(sys.modules, "hypothesis", object())
    used = _Plugins(hyp)
    plugin._skip_idle_hypothesis_summary(_Config(used))
    assert used.unregistered == []
    absent = _Plugins(None)
    plugin._skip_idle_hypothesis_summary(_Config(absent))   # not installed: nothing to take out
    assert absent.unregistered == []


def test_the_exit_collection_is_skipped_once_however_many_sessions(monkeypatch):
    registered: list = []
    monkeypatch.setattr(plugin, "_EXIT_HOOKS", set())
    monkeypatch.setattr(atexit, "register", registered.append)
    plugin._skip_exit_collection()
    plugin._skip_exit_collection()
    assert registered == [gc.freeze]


def test_a_session_freezes_what_its_imports_made_once_and_gives_it_back():
    from pytest_sme2.config import Sme2Config
    from pytest_sme2.session import BenchSession

    assert gc.get_freeze_count() == 0 and gc.isenabled()
    session = BenchSession(Sme2Config(devices=("host",)))
    try:
        session.prepare()
        frozen = gc.get_freeze_count()
        assert frozen > 0 and gc.isenabled()   # the collector runs again, on new objects
        session.prepare()
        assert gc.get_freeze_count() <= frozen  # once per session, not per block
    finally:
        session.release()
    assert gc.get_freeze_count() == 0
    session.release()   # twice: nothing more to give back


def test_a_session_leaves_objects_someone_else_froze_alone():
    from pytest_sme2.config import Sme2Config
    from pytest_sme2.session import BenchSession

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        session = BenchSession(Sme2Config(devices=("host",)))
        session.prepare()
        session.release()
        assert gc.get_freeze_count() >= frozen - 100   # still theirs, not unfrozen by us
    finally:
        gc.unfreeze()


def test_pytest_run_from_python_gets_the_frozen_objects_back_after_its_collections(pytester):
    """The session freezes what exists before its first measurement; a process that goes on
    after pytest.main() must collect the session's garbage as usual."""
    pytester.makepyfile(test_q="""
        import gc
        from pytest_sme2.plugin import SESSION_KEY

        def test_quiet(request):
            request.config.stash[SESSION_KEY].prepare()
            assert gc.get_freeze_count() > 0
    """)
    assert gc.get_freeze_count() == 0
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert gc.get_freeze_count() == 0
