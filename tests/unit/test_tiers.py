"""The folder is the tier (tests/conftest.py): everything under a slow folder is marked `slow`
there, once; nothing under a fast folder is marked `slow` by hand; every folder of tests is one
or the other."""

from __future__ import annotations

import ast

from tests.conftest import FAST_FOLDERS, ON_REQUEST, SLOW_FOLDERS, TESTS, folder_of


def _slow_marks(path) -> list[int]:
    """Lines of ``path`` that name ``mark.slow`` (a decorator, a pytestmark, add_marker)."""
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "slow"
            and isinstance(node.value, ast.Attribute) and node.value.attr == "mark"]


def test_every_folder_of_tests_has_a_tier():
    folders = {p.relative_to(TESTS).parts[0] for p in TESTS.glob("*/**/test_*.py")}
    assert folders <= SLOW_FOLDERS | FAST_FOLDERS, folders - SLOW_FOLDERS - FAST_FOLDERS
    assert not SLOW_FOLDERS & FAST_FOLDERS


def test_no_test_in_a_fast_folder_is_marked_slow_by_hand():
    marked = [f"{path.relative_to(TESTS)}:{line}" for folder in sorted(FAST_FOLDERS)
              for path in sorted((TESTS / folder).rglob("*.py")) for line in _slow_marks(path)]
    assert not marked, f"slow by hand in a fast folder (move the test to a slow one): {marked}"


def test_every_collected_test_is_slow_exactly_when_its_folder_is(request):
    """Over this session's tests: under `-m "not slow"`, a slow folder's test without the
    marker would be here; in a full run, every test is checked both ways."""
    wrong = [item.nodeid for item in request.session.items
             if folder_of(item.path) is not None
             and (folder_of(item.path) in SLOW_FOLDERS) != bool(item.get_closest_marker("slow"))]
    assert not wrong


def test_a_marker_that_runs_on_request_is_registered_and_left_out_unless_asked_for(request):
    """ON_REQUEST markers (tests/conftest.py): registered in pyproject.toml, and no test of
    theirs is in a session whose -m does not name them (CI's `pytest tests`)."""
    registered = {line.split(":")[0] for line in request.config.getini("markers")}
    assert ON_REQUEST <= registered
    asked = request.config.option.markexpr or ""
    assert not [item.nodeid for item in request.session.items for m in ON_REQUEST
                if item.get_closest_marker(m) and m not in asked]
