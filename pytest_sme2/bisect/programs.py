"""A commit's programs: its ``--setup`` command, then the user's pytest selection in that
commit's worktree, with a session as short as the plugin allows (one timed run, one traced
run, one load), read back from its results.json: each benchmark's exported ``.pte``, its
sha256, its runner and device. The ``.pte`` is copied into the bisect's store under its hash,
so that the worktree can go and a resumed bisect still has it.

A commit whose setup, export or run fails is skipped (``git bisect``'s exit 125), with the
last line that says why."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.codec import decode, encode
from pytest_sme2.results.document import load_results
from pytest_sme2.bisect.exporter import FreshSessions, SessionTimeout, WarmExporter

# The shortest session that still exports and records each selected benchmark; it exports in
# its own process (--sme2-export-jobs=1: no pool of fresh interpreters importing torch again).
SHORT_SESSION = ("--sme2-export-jobs=1", "--runs=1", "--warmup=0", "--sme2-trace-runs=1",
                 "--sme2-loads=1",
                 "--sme2-confirm-blocks=0", "--sme2-progress=off", "-p", "no:cacheprovider",
                 "-q")


NOTHING_SELECTED = "no benchmark selected"
# pytest's exit 4: it refused the arguments, whatever the commit holds.
USAGE_ERROR = "pytest refused the arguments after BAD (exit 4, a usage error)"


@dataclass(frozen=True)
class Program:
    """One benchmark's program at one commit, and where it is measured."""

    benchmark: str          # the pytest node id
    sha256: str
    pte: str                # the copy in the bisect's store
    runner: str             # the runner's name in results.json
    runner_kind: str
    device: str             # the --device spec it ran on
    threads: int

    @property
    def where(self) -> str:
        """What a measurement is keyed by besides the program's bytes."""
        return f"{self.runner}@{self.device}/t{self.threads}"

    to_json = encode
    from_json = classmethod(decode)


@dataclass(frozen=True)
class Exported:
    """A commit's programs by benchmark, or why it was skipped (``skipped`` non-empty)."""

    programs: dict[str, Program]
    skipped: str = ""
    seconds: float = 0.0

    to_json = encode
    from_json = classmethod(decode)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _last_line(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip() and not set(x.strip()) <= set("=-_")]
    failed = [x for x in lines if x.startswith(("E ", "ERROR", "FAILED")) or "Error" in x]
    return (failed or lines or ["no output"])[-1][:300]


def export_commit(worktree: Path, pytest_args: list[str], setup: str | None, store: Path,
                  timeout_s: float, sessions: FreshSessions | WarmExporter) -> Exported:
    """Run ``setup`` then the user's pytest selection in ``worktree`` (a session of
    ``sessions``); the programs it exported, copied into ``store``, or a skip saying why."""
    report = worktree / ".sme2-bisect-report"
    log = worktree / ".sme2-bisect-log"
    try:
        if setup:
            done = subprocess.run(setup, shell=True, cwd=worktree, capture_output=True,
                                  text=True, timeout=timeout_s)
            if done.returncode != 0:
                return Exported({}, f"--setup failed (exit {done.returncode}): "
                                    f"{_last_line(done.stderr + done.stdout)}")
        rc = sessions.session([*pytest_args, *SHORT_SESSION, f"--report-dir={report}"],
                              worktree, log, timeout_s)
    except (subprocess.TimeoutExpired, SessionTimeout):
        return Exported({}, f"timed out after {timeout_s:g} s")
    output = log.read_text(errors="replace") if log.is_file() else ""
    results = report / "results.json"
    if rc == 5:
        return Exported({}, f"{NOTHING_SELECTED} (pytest exit 5)")
    if rc == 4:     # argparse's "error: unrecognized arguments: ..." says what, not "usage:"
        said = [x.strip() for x in output.splitlines() if ": error: " in x]
        return Exported({}, f"{USAGE_ERROR}: {(said or [_last_line(output)])[-1][:300]}")
    if not results.is_file():
        return Exported({}, f"pytest exit {rc}: {_last_line(output)}")
    try:
        doc = load_results(results)
    except Sme2Error as e:
        return Exported({}, str(e))
    programs = {}
    for b in doc.benchmarks:
        pte = Path(b.pte)
        if b.nodeid in programs or not pte.is_file():   # a comparison's later blocks
            continue
        sha = sha256_of(pte)
        copy = store / f"{sha}.pte"
        if not copy.is_file():
            store.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pte, copy)
        programs[b.nodeid] = Program(b.nodeid, sha, str(copy), b.runner_name,
                                     b.runner.kind, b.device.spec, int(b.threads))
    if not programs:
        return Exported({}, f"no program recorded (pytest exit {rc}: {_last_line(output)})")
    if rc not in (0, 1):
        return Exported({}, f"pytest exit {rc}: {_last_line(output)}")
    return Exported(programs)
