"""The git checkout around a folder, asked one way: :func:`run_git` (``git ARGS`` in a folder;
None where git is not on PATH or took too long), :func:`git` (its output, or None where it
failed), and HEAD's commit and branch. The session's identity (history/identity.py), the
baselines, the reports' commit fields (they read the session's identity first) and bisect ask
git through it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_SHA = re.compile(r"[0-9a-f]{40,64}")


def run_git(args: list[str], cwd: Path | None = None,
            timeout_s: float | None = 10.0) -> subprocess.CompletedProcess[str] | None:
    """``git ARGS`` run in ``cwd`` (text, captured); None: no git on PATH, or it ran past
    ``timeout_s`` (None: no limit)."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None


def git(args: list[str], cwd: Path | None = None, timeout_s: float | None = 10.0) -> str | None:
    """``git ARGS``' output, stripped; None where it failed, is missing or was too slow."""
    done = run_git(args, cwd, timeout_s)
    return done.stdout.strip() if done is not None and done.returncode == 0 else None


def head_commit(cwd: Path | None = None, timeout_s: float = 5.0) -> str | None:
    """HEAD of the repository around ``cwd``, or None (not a repo, no git, too slow)."""
    sha = git(["rev-parse", "HEAD"], cwd, timeout_s)
    return sha if sha and _SHA.fullmatch(sha) else None


def head_branch(cwd: Path | None = None, timeout_s: float = 5.0) -> str | None:
    """The branch checked out around ``cwd``; None on a detached HEAD or outside a repo."""
    name = git(["rev-parse", "--abbrev-ref", "HEAD"], cwd, timeout_s)
    return name if name and name != "HEAD" else None
