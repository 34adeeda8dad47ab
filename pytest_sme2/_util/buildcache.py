"""What the caches share: one root (:func:`cache_root`, ``~/.cache/pytest-sme2``: the exports,
the native runner, the target helpers and wheels, QEMU, the copy bandwidths), and for the
on-demand builds (the native runner, the target helpers, the aarch64 wheel) a cache key over
their package-data sources, so an edited source or a broken installation is noticed, and one
way to fill a cache entry so that nobody ever sees half of one."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Callable, TypeVar

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.locking import file_lock

T = TypeVar("T")
B = TypeVar("B")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/pytest-sme2`` (``~/.cache/pytest-sme2`` when it is not set): every
    cache of the package is a folder in it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-sme2"


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


def cached_build(entry: Path, lookup: Callable[[Path], T | None],
                 build: Callable[[Path], B], force: bool = False) -> tuple[T, B | None]:
    """``(lookup(entry), None)`` when the cache holds a complete entry; else build it:
    under a lock beside the entry (concurrent pytest-xdist workers build once), ``build`` fills
    a temporary folder next to it, which replaces the entry by a rename, so no process ever
    sees a half-built entry. Returns the entry's lookup and what ``build`` returned.
    ``lookup`` returns None for an absent or incomplete entry; ``force`` builds regardless."""
    if not force and (hit := lookup(entry)) is not None:
        return hit, None
    entry.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(entry.parent / f".{entry.name}.lock"):
        if not force and (hit := lookup(entry)) is not None:  # built while we waited
            return hit, None
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
        try:
            made = build(tmp)
            shutil.rmtree(entry, ignore_errors=True)
            os.rename(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    hit = lookup(entry)
    if hit is None:   # a build that returns without what its lookup checks for
        raise Sme2Error(f"{entry}: built, but incomplete; remove it and try again")
    return hit, made
