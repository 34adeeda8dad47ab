"""The search alone: which commit it probes, where it ends, skipped and unclear commits, and a
range with two steps."""

import pytest

from pytest_sme2.bisect.search import (BAD, GOOD, SKIP, UNCLEAR, Step, bisect_range,
                                       expected_probes, find_steps, next_probe)


def sides(step_at: set[int], skip=frozenset(), unclear=frozenset(), probed=None):
    """A probe for commits where the benchmark steps at each of ``step_at`` (a commit is bad
    when a step lies in (lo, commit])."""
    def probe(m, lo, hi):
        if probed is not None:
            probed.append(m)
        if m in skip:
            return SKIP
        if m in unclear:
            return UNCLEAR
        return BAD if any(lo < s <= m for s in step_at) else GOOD
    return probe


def test_next_probe_takes_the_middle_and_steps_round_skipped_commits():
    assert next_probe(0, 10, set()) == 5
    assert next_probe(0, 9, set()) == 4                  # a tie goes to the older
    assert next_probe(0, 10, {5}) == 4
    assert next_probe(4, 7, {5}) == 6
    assert next_probe(3, 4, set()) is None
    assert next_probe(3, 5, {4}) is None


@pytest.mark.parametrize("culprit", range(1, 11))
def test_every_culprit_is_found_in_about_log2_probes(culprit):
    probed = []
    assert bisect_range(0, 10, sides({culprit}, probed=probed)) == Step(culprit - 1, culprit)
    assert len(probed) <= expected_probes(9)


def test_a_skipped_commit_is_never_the_culprit_and_is_named_beside_it():
    probed = []
    assert bisect_range(0, 10, sides({7}, skip={5}, probed=probed)) == Step(6, 7)
    assert probed == [5, 4, 7, 6]
    # Skipped next to the step: the culprit is it or the skipped commit before it.
    assert bisect_range(0, 10, sides({7}, skip={6})) == Step(5, 7, (6,))


def test_a_probe_that_cannot_tell_ends_the_search_with_the_range_left():
    assert bisect_range(0, 10, sides({7}, unclear={7})) == Step(5, 10, (), unclear=7)


def test_every_step_of_a_range_is_found():
    steps = sides({3, 8})

    def ends_differ(a, b):
        return any(a < s <= b for s in {3, 8})

    found = find_steps(10, steps, ends_differ)
    assert [(s.lo, s.hi) for s in found.steps] == [(2, 3), (7, 8)]


def test_the_steps_stop_at_most():
    found = find_steps(10, sides({3, 8}), lambda a, b: any(a < s <= b for s in {3, 8}), most=1)
    assert len(found.steps) == 1 and found.unchecked


def test_expected_probes():
    assert [expected_probes(n) for n in (1, 2, 3, 7, 8, 63)] == [1, 2, 2, 3, 4, 6]
