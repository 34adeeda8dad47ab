"""The one way git is asked: a repository's HEAD and branch, None outside one; and the
reports' commit fields read from the session's identity where it has them."""

import subprocess

from pytest_sme2._util.checkout import git, head_branch, head_commit, run_git
from pytest_sme2.report.benchmark_json import commit_info
from pytest_sme2.report.llama_bench import build_info
from tests.needs import tool


def _repo(path):
    tool("git", "apt-get install git")
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    subprocess.run(["git", *env, "commit", "-q", "--allow-empty", "-m", "x"], cwd=path,
                   check=True)
    return git(["rev-parse", "HEAD"], path)


def test_head_commit_and_branch_inside_a_repo_and_none_outside(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert head_commit(tmp_path) is None and head_branch(tmp_path) is None
    assert git(["rev-parse", "HEAD"], tmp_path) is None
    assert run_git(["rev-parse", "HEAD"], tmp_path).returncode != 0
    sha = _repo(tmp_path)
    assert head_commit(tmp_path) == sha and len(sha) == 40
    assert head_branch(tmp_path) == "main"
    subprocess.run(["git", "checkout", "-q", "--detach"], cwd=tmp_path, check=True)
    assert head_branch(tmp_path) is None


def test_the_reports_read_the_sessions_identity_first(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    sha = _repo(tmp_path)
    info = commit_info(tmp_path)
    assert (info["id"], info["branch"], info["dirty"]) == (sha, "main", False)
    said = commit_info(tmp_path, {"commit": "f" * 40, "branch": "pr-7"})
    assert (said["id"], said["branch"]) == ("f" * 40, "pr-7")
    assert build_info(tmp_path, sha) == build_info(tmp_path) == (sha[:len(build_info(
        tmp_path)[0])], 1)
