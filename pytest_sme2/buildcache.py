"""What the on-demand builds (the native runner, the target helpers) share: a cache key over
their package-data sources, so an edited source or a broken installation is noticed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from pytest_sme2.errors import Sme2Error


def sources_hash(folder: Path, names: Iterable[str], what: str,
                 error: type[Sme2Error] = Sme2Error) -> "hashlib._Hash":
    """A sha256 already fed with each source's bytes; ``error`` names a missing one as part
    of ``what`` (e.g. "the native runner")."""
    h = hashlib.sha256()
    for name in names:
        try:
            h.update((folder / name).read_bytes())
        except OSError:
            raise error(f"{what}'s source {folder / name} is missing from this installation of "
                        "pytest-sme2 (reinstall it with its package data)") from None
    return h
