"""Base programs kept by hash beside the baselines (pytest_sme2.baselines.programs)."""

from __future__ import annotations

import hashlib

import pytest

from pytest_sme2.baselines import programs as base_programs
from pytest_sme2.errors import Sme2Error


def test_kept_once_by_hash(tmp_path):
    pte = tmp_path / "model.pte"
    pte.write_bytes(b"program")
    sha = base_programs.keep(tmp_path / "baselines", pte)
    assert sha == hashlib.sha256(b"program").hexdigest()
    stored = tmp_path / "baselines" / "programs" / f"{sha}.pte"
    assert stored.read_bytes() == b"program"
    before = stored.stat().st_mtime_ns
    assert base_programs.keep(tmp_path / "baselines", pte) == sha
    assert stored.stat().st_mtime_ns == before                  # never written twice
    assert list((tmp_path / "baselines" / "programs").iterdir()) == [stored]
    assert base_programs.find(tmp_path / "baselines", sha).path == stored


def test_missing_programs_say_why_in_one_line(tmp_path):
    none = base_programs.find(tmp_path, None)
    assert none.path is None and "do not record which program" in none.missing
    gone = base_programs.find(tmp_path, "a" * 64)
    assert gone.path is None and gone.missing.startswith("programs/aaaaaaaaaaaa….pte is not in")


def test_a_bad_hash_is_refused(tmp_path):
    with pytest.raises(Sme2Error, match="'../x' is not a sha256 hex digest"):
        base_programs.program_path(tmp_path, "../x")
