"""Runners: what executes a .pte. Chosen by a spec string: ``python`` for now; ``native`` and
user ``executor_runner`` binaries arrive with issue 5."""

from __future__ import annotations

from pytest_sme2.runners.base import Runner, RunnerError, RunnerInfo, RunOutcome, RunRequest

KINDS = ("python",)


def runner_from_spec(spec: str) -> Runner:
    if spec == "python":
        from pytest_sme2.runners.python import PythonRunner

        return PythonRunner()
    raise RunnerError(f"unknown runner {spec!r}; available: {', '.join(KINDS)}")


__all__ = ["Runner", "RunnerError", "RunnerInfo", "RunOutcome", "RunRequest", "runner_from_spec"]
