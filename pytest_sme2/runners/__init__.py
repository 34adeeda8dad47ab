"""Runners: what executes a .pte — the ExecuTorch Python runtime (``python``), our C++ runner
(``native``) or a user's ``executor_runner`` build (a path) — chosen by a spec string
(:mod:`pytest_sme2.runners.spec`)."""

from __future__ import annotations

from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.runners.spec import RunnerSpec, parse_runner_spec, runner_kinds, runner_specs


def runner_from_spec(text: str, progress=None, hook=None) -> Runner:
    """Make the runner a ``[NAME=]SPEC`` string describes (see runners.spec); ``hook``: the
    plugins' hooks, for kinds they make (:func:`runner_kinds`)."""
    return parse_runner_spec(text, runner_kinds(hook)).make(progress, hook=hook)


__all__ = ["Runner", "RunnerError", "RunnerInfo", "RunOutcome", "RunRequest", "RunnerSpec",
           "parse_runner_spec", "runner_from_spec", "runner_kinds", "runner_specs"]
