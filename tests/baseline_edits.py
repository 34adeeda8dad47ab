"""Edits the plugin tests make to a recorded baseline file."""

from __future__ import annotations

OTHER_PROGRAM = "0" * 64


def as_other_code(doc: dict) -> None:
    """Every session of the baseline document ``doc`` recorded as another program's (its
    sha256), as after a code change: the stored rule then judges by time. A byte-identical
    program, runner and runtime would be "no change" by identity, whatever the times say."""
    for s in doc["sessions"]:
        s.setdefault("under_test", {})["program"] = OTHER_PROGRAM
