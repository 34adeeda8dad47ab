"""A real `pytest benchmarks` session with --sme2-history: recorded at its end (the gate taking
its baselines from the store with --sme2-history-baseline), and with an unreachable store the
session still writes results.json and report.md, passes, and says in one line the history was
not recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


from tests.needs import missing

for _package in ("sqlalchemy",):
    try:
        __import__(_package)
    except ImportError:     # the [test] extra brings it; CI installs it, so there this fails
        missing(f"the Python package {_package!r}", "pip install -e '.[test]'")


ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--sme2-models", "toy_cnn", "--sme2-dtypes", "fp32", "--sme2-threads", "1",
         "--runs", "5", "--sme2-loads", "1", "-p", "no:cacheprovider"]


# The branch as CI systems name it, so the test does not depend on how the checkout was made
# (a detached HEAD has no branch to take baselines from).
BRANCH = "history-test-branch"


def _session(tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GITHUB_REF_NAME": BRANCH}
    env.pop("GITHUB_HEAD_REF", None)
    return subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks" /
                                                             "test_latency.py"), *SMALL,
                           "--report-dir", str(tmp_path / name), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)


def test_sessions_are_recorded_and_the_gate_reads_the_store(tmp_path):
    store = str(tmp_path / "h.sqlite")
    first = _session(tmp_path, "one", "--sme2-history", store)
    assert first.returncode == 0, first.stdout[-3000:]
    assert f"recorded 1 benchmark(s) in sqlite:///{store}" in first.stdout
    branch = json.loads((tmp_path / "one" / "results.json").read_text()
                        )["session"]["identity"]["branch"]
    assert branch == BRANCH
    # Only time is enforced: one cold load each side is too few to gate load time on a loaded
    # machine (a 34% slower load failed this test once), and this test is about the store.
    second = _session(tmp_path, "two", "--sme2-history", store, "--sme2-history-baseline",
                      branch, "--fail-on-regression", "50", "--sme2-load-threshold", "off",
                      "--sme2-memory-threshold", "off")
    assert second.returncode == 0, second.stdout[-3000:]
    assert f"gate baselines: the last 10 session(s) on {branch} of 1 key(s)" in second.stdout
    judged = json.loads((tmp_path / "two" / "results.json").read_text())["benchmarks"][0]
    assert judged["baseline"]["baseline_sessions"] == 1


def test_an_unreachable_store_loses_nothing(tmp_path):
    proc = _session(tmp_path, "r", "--sme2-history", "postgresql://x@127.0.0.1:1/db")
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if "history not recorded" in ln]
    assert len(lines) == 1 and "report.md are written" in lines[0]
    assert (tmp_path / "r" / "results.json").exists() and (tmp_path / "r" / "report.md").exists()
