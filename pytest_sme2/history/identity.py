"""Who a session is: commit, branch, time and CI run, recorded in results.json's session
(``identity``; read as ``SessionInfo.identity``) so the history can place it. Git is asked
once; CI systems' own variables win (a CI checkout is often a detached HEAD)."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone

from pytest_sme2._util.checkout import head_branch, head_commit


def ci_run() -> str | None:
    env = os.environ
    if env.get("GITHUB_RUN_ID"):
        return (f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/"
                f"{env.get('GITHUB_REPOSITORY', '')}/actions/runs/{env['GITHUB_RUN_ID']}")
    return env.get("CI_JOB_URL") or env.get("BUILD_URL") or env.get("CI_RUN") or None


def session_identity(now: datetime | None = None) -> dict[str, str | None]:
    env = os.environ
    branch = (env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME")
              or env.get("CI_COMMIT_REF_NAME") or head_branch())
    return {"commit": env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA") or head_commit(),
            "branch": branch,
            "time": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
            "ci_run": ci_run(), "host": socket.gethostname()}
