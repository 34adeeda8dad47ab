"""The base programs the A/B gate re-measures (``--sme2-gate-mode ab``): each baseline
session's exported ``.pte``, kept content-addressed beside the baseline JSON files as
``programs/<sha256>.pte``. The session already records that hash (``under_test.program``), so
the JSON files stay as they were (diff-friendly) and a program shared by many sessions or
benchmarks is stored once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2.errors import Sme2Error

FOLDER = "programs"


@dataclass(frozen=True)
class BaseProgram:
    """The base to re-measure, or why there is none (``path`` None, ``missing`` says why)."""

    path: Path | None
    sha256: str | None
    missing: str = ""


def sha256_of(pte: Path) -> str:
    return file_sha256(Path(pte))


def program_path(baseline_dir: Path, sha256: str) -> Path:
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise Sme2Error(f"base program: {sha256!r} is not a sha256 hex digest")
    return Path(baseline_dir) / FOLDER / f"{sha256}.pte"


def keep(baseline_dir: Path, pte: Path) -> str:
    """Store ``pte`` under its hash (once: an existing copy is left alone); its sha256."""
    data = Path(pte).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    target = program_path(baseline_dir, sha)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".pte.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)       # atomic: a reader never sees half a program
    return sha


def find(baseline_dir: Path, sha256: str | None) -> BaseProgram:
    """The stored program of that hash; ``missing`` the one line why not."""
    if not sha256:
        return BaseProgram(None, None, "the baseline's sessions do not record which program "
                                       "they measured (recorded before programs were kept)")
    path = program_path(baseline_dir, sha256)
    if not path.is_file():
        return BaseProgram(None, sha256, f"{FOLDER}/{sha256[:12]}….pte is not in "
                                         f"{baseline_dir}")
    return BaseProgram(path, sha256)
