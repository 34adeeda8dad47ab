"""A session's ``artifacts/`` holds its own files only: what earlier sessions left there (the
blocks of a comparison that took more pairs, a benchmark this session did not run) is removed
when the session writes its report, as report.md and its pages are replaced; otherwise a user
browsing for an ETDump picks a stale one."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = "artifacts"      # the report folder's subfolder of per-benchmark files

# File times come from the kernel's coarse clock, a few milliseconds behind time.time(): a
# file this session wrote right after it started must not read as older than the session.
CLOCK_MARGIN_S = 1.0


def remove_earlier_artifacts(folder: Path, started: float) -> int:
    """Files under ``folder`` last written before ``started`` (the session's start, seconds
    since the epoch), and the folders that leaves empty, removed; returns the files removed.
    Files this session wrote (pulled from a phone too: a pull writes a new file) stay."""
    if not folder.is_dir():
        return 0
    removed = 0
    before = started - CLOCK_MARGIN_S
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        try:
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif path.lstat().st_mtime < before:
                path.unlink()
                removed += 1
        except OSError:         # gone meanwhile, or not ours to remove: left as it is
            continue
    return removed
