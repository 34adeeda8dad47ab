"""Progress lines of a long session (case i of n, elapsed) as users see them: a line per
interval in a normal run, ten times fewer with -q, none with -qq. The inner session's progress
clock moves 100 s per look (its conftest), so "long" needs no waiting and no timing."""

import pytest

pytestmark = pytest.mark.usefixtures("inner_session_env")

# Five benchmark cases that measure nothing (the cases are counted from the fixtures they
# use), and a plain test that is not a case.
CASES = """
import pytest

@pytest.mark.parametrize("i", range(5))
def test_case(sme2_bench, i):
    pass

def test_plain():
    pass
"""

FAKE_CLOCK = """
import itertools

import pytest_sme2.plugin.progress

_now = itertools.count(0, 100)
pytest_sme2.plugin.progress.clock = lambda: float(next(_now))
"""

COMPARE = """
def test_cmp(sme2_compare):
    sme2_compare("a", "b", "toy_cnn", dtype="fp32", blocks=2)
"""


def _progress_lines(res) -> list[str]:
    return [line for line in res.stdout.lines if line.startswith("sme2: case ")]


@pytest.fixture
def long_session(pytester, run_pytest):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest(FAKE_CLOCK)
    return run_pytest


def test_a_long_session_prints_case_i_of_n_with_the_elapsed_time(long_session):
    res = long_session()
    res.assert_outcomes(passed=6)
    # Every case starts 100 s after the last look: each one is due (auto: every 30 s).
    assert _progress_lines(res) == [
        f"sme2: case {i} of 5: test_case[{i - 1}] ({elapsed} elapsed)"
        for i, elapsed in enumerate(["1 min 40 s", "3 min 20 s", "5 min 00 s", "6 min 40 s",
                                     "8 min 20 s"], start=1)]


def test_quiet_prints_one_line_per_5_minutes_and_very_quiet_none(long_session):
    res = long_session("-q")
    res.assert_outcomes(passed=6)
    assert _progress_lines(res) == ["sme2: case 3 of 5: test_case[2] (5 min 00 s elapsed)"]
    res = long_session("-qq")                  # no summary line to count outcomes from
    assert res.ret == 0 and _progress_lines(res) == []


def test_the_option_sets_the_interval_in_every_mode(long_session):
    res = long_session("-q", "--sme2-progress=250")        # at 300 s and 600 s... of 500
    assert [line.split(":")[1] for line in _progress_lines(res)] == [" case 3 of 5"]
    res = long_session("-q", "--sme2-progress=100")
    assert len(_progress_lines(res)) == 5
    res = long_session("--sme2-progress=off")
    assert _progress_lines(res) == []


def test_blocks_of_a_comparison_report_as_they_finish(pytester, export_cache, toy_export,
                                                       run_pytest):
    pytester.makepyfile(test_c=COMPARE)
    # --sme2-max-pairs 2: the planned blocks only (a "cannot tell" would add pairs of unknown
    # number, reported without a total: below)
    res = run_pytest("-q", f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     "--runner=a=native", "--runner=b=native", "--sme2-progress=0",
                     "--sme2-max-pairs=2")
    res.assert_outcomes(passed=1)
    lines = _progress_lines(res)
    assert lines[0].startswith("sme2: case 1 of 1: test_cmp (")
    assert [line.split(" done:")[0] for line in lines[1:]] == [
        f"sme2: case 1 of 1, block {b} of 4" for b in range(1, 5)]
    assert all(line.endswith(" elapsed)") for line in lines)
