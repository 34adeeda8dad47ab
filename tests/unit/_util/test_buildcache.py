"""The one way cache entries are filled (native runner, target helpers, aarch64 wheel): a hit
builds nothing, a build lands whole or not at all, and a build that leaves its entry
incomplete is an error, not a hit."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2._util.buildcache import cached_build
from pytest_sme2.errors import Sme2Error


def _lookup(entry: Path) -> Path | None:
    done = entry / "done"
    return done if done.is_file() else None


def test_a_build_lands_whole_and_the_next_call_is_a_hit(tmp_path):
    builds: list[Path] = []

    def build(out: Path) -> str:
        builds.append(out)
        assert out.parent == tmp_path and out.name.startswith(".tmp-entry-")
        (out / "done").write_text("x")
        return "manifest"

    entry = tmp_path / "entry"
    assert cached_build(entry, _lookup, build) == (entry / "done", "manifest")
    assert cached_build(entry, _lookup, build) == (entry / "done", None)      # a hit
    assert len(builds) == 1
    assert cached_build(entry, _lookup, build, force=True)[1] == "manifest"   # again
    assert len(builds) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".entry.lock", "entry"]


def test_a_failed_build_leaves_neither_entry_nor_temporary_folder(tmp_path):
    def build(out: Path) -> None:
        (out / "half").write_text("x")
        raise Sme2Error("compiler said no")

    with pytest.raises(Sme2Error, match="compiler said no"):
        cached_build(tmp_path / "entry", _lookup, build)
    assert [p.name for p in tmp_path.iterdir()] == [".entry.lock"]


def test_a_build_that_leaves_its_entry_incomplete_is_an_error(tmp_path):
    with pytest.raises(Sme2Error, match=r"entry: built, but incomplete; remove it"):
        cached_build(tmp_path / "entry", _lookup, lambda out: None)
