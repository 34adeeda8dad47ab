"""What a benchmark session costs beside its runs, through the session and pytest: the frozen
objects given back. Each measure alone: test_session_cost.py; the ones that need a real export
or interpreter (.etrecord read once per version, a runtime import without torchao):
tests/integration/test_session_overheads_real.py."""

from __future__ import annotations

import gc


def test_a_session_freezes_what_its_imports_made_once_and_gives_it_back():
    from pytest_sme2.measure.config import Sme2Config
    from pytest_sme2.measure.session import BenchSession

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
    from pytest_sme2.measure.config import Sme2Config
    from pytest_sme2.measure.session import BenchSession

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
