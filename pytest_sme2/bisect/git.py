"""The user's git repository, read and never changed: refs, the commits of a range, a commit's
subject, date and dependency pins, and one detached worktree per commit (:class:`Worktrees`)
that goes away at the end and on Ctrl-C."""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.checkout import run_git

# Files that pin the runtime, and the packages whose pins a culprit's report names.
PIN_FILES = re.compile(r"(^|/)(pyproject\.toml|requirements[^/]*\.txt|[^/]*\.lock|"
                       r"constraints[^/]*\.txt|setup\.cfg)$")
PINNED = ("executorch", "torchao", "torch")
_PIN = re.compile(r"""["']?\b(executorch|torchao|torch)\b["']?\s*(?:=\s*["']|[=<>~!]=?\s*["']?)"""
                  r"""([0-9][\w.+!*-]*)""")
_LOCK_NAME = re.compile(r'^name\s*=\s*"(executorch|torchao|torch)"\s*$')
_LOCK_VERSION = re.compile(r'^version\s*=\s*"([^"]+)"')


def git(repo: Path, *args: str, check: bool = True) -> str:
    """``git -C repo args``' stdout, stripped; a failure raises one line."""
    done = run_git(["-C", str(repo), *args], timeout_s=None)
    if done is None:
        raise Sme2Error("bisect needs git on PATH")
    if check and done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise Sme2Error(f"git {' '.join(args)}: {why}")
    return done.stdout.strip() if done.returncode == 0 else ""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    date: str           # committer date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:10]


class Repo:
    """A git repository at ``root`` (the user's checkout; only read)."""

    def __init__(self, root: Path):
        root = Path(root).resolve()
        top = git(root, "rev-parse", "--show-toplevel", check=False)
        if not top:
            raise Sme2Error(f"{root} is not a git repository (run bisect from its root)")
        self.root = Path(top)
        self.git_dir = Path(git(self.root, "rev-parse", "--path-format=absolute",
                                "--git-common-dir"))

    def resolve(self, ref: str) -> str:
        sha = git(self.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                  check=False)
        if not sha:
            raise Sme2Error(f"unknown ref {ref!r}: not a commit in {self.root}")
        return sha

    def commits(self, good: str, bad: str, first_parent: bool = True) -> list[str]:
        """The commits after ``good`` up to ``bad``, oldest first (``good`` not included)."""
        ancestor = run_git(["-C", str(self.root), "merge-base", "--is-ancestor", good, bad],
                           timeout_s=None)
        if ancestor is None or ancestor.returncode != 0:
            raise Sme2Error(f"GOOD {good[:10]} is not an ancestor of BAD {bad[:10]}: "
                            "give the older commit first")
        args = ["rev-list", "--reverse"] + (["--first-parent"] if first_parent else [])
        listed = git(self.root, *args, f"{good}..{bad}").split()
        if not listed:
            raise Sme2Error(f"no commit between {good[:10]} and {bad[:10]}: nothing to bisect")
        return listed

    def commit(self, sha: str) -> Commit:
        subject, date = git(self.root, "show", "-s", "--format=%s%x00%cI", sha).split("\0")
        return Commit(sha, subject, date)

    def pins(self, sha: str) -> dict[str, str]:
        """``{"pyproject.toml: torch": "2.13.0", ...}``: the runtime's pins in ``sha``'s pin
        files (requirements lines, pyproject dependencies, uv/poetry lock entries)."""
        found: dict[str, str] = {}
        for path in git(self.root, "ls-tree", "-r", "--name-only", sha).splitlines():
            if PIN_FILES.search(path):
                text = git(self.root, "show", f"{sha}:{path}", check=False)
                for package, version in read_pins(text).items():
                    found[f"{path}: {package}"] = version
        return found


def read_pins(text: str) -> dict[str, str]:
    """The executorch, torch and torchao versions a pin file names (the first of each)."""
    found: dict[str, str] = {}
    lock_name = None
    for line in text.splitlines():
        line = line.strip()
        if (m := _LOCK_NAME.match(line)):
            lock_name = m.group(1)
            continue
        if lock_name and (m := _LOCK_VERSION.match(line)):
            found.setdefault(lock_name, m.group(1))
            lock_name = None
            continue
        for m in _PIN.finditer(line):
            found.setdefault(m.group(1), m.group(2))
    return found


def pin_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """``["pyproject.toml: executorch 1.5.1 -> 1.5.2"]``: the pins that differ."""
    return [f"{k} {before.get(k, '(none)')} -> {after.get(k, '(none)')}"
            for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]


class Worktrees:
    """Detached worktrees of ``repo`` under a temporary folder, one per commit, removed by
    :meth:`close` (a ``with`` block's end, and SIGTERM turned into KeyboardInterrupt so that
    the same ``finally`` runs)."""

    def __init__(self, repo: Repo):
        self.repo = repo
        self.base = Path(tempfile.mkdtemp(prefix="sme2-bisect-"))
        self.made: list[Path] = []
        self._old_term = None

    def __enter__(self) -> Worktrees:
        self._old_term = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        signal.signal(signal.SIGTERM, self._old_term or signal.SIG_DFL)

    def add(self, sha: str) -> Path:
        path = self.base / sha[:12]
        if path in self.made:
            return path
        git(self.repo.root, "worktree", "add", "--detach", "--quiet", str(path), sha)
        self.made.append(path)
        return path

    def remove(self, path: Path) -> None:
        git(self.repo.root, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(path, ignore_errors=True)
        if path in self.made:
            self.made.remove(path)

    def close(self) -> None:
        for path in list(self.made):
            self.remove(path)
        git(self.repo.root, "worktree", "prune", check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
