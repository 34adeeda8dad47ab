"""The repository side of bisect: pins read from pin files, and bad input as one line with
nothing left behind (git only: no export, no measuring)."""

import subprocess

import pytest

from pytest_sme2.bisect.git import pin_changes, read_pins
from pytest_sme2.cli import main


def test_pins_from_requirements_pyproject_and_a_lock():
    assert read_pins("torch==2.13.0\nexecutorch>=1.5.1\nnumpy==2\n") == {
        "torch": "2.13.0", "executorch": "1.5.1"}
    assert read_pins('dependencies = ["torchao>=0.18,<0.19", "executorch==1.5.1"]\n') == {
        "torchao": "0.18", "executorch": "1.5.1"}
    assert read_pins('[[package]]\nname = "executorch"\nversion = "1.5.2"\n') == {
        "executorch": "1.5.2"}
    assert pin_changes({"r.txt: executorch": "1.5.0"}, {"r.txt: executorch": "1.5.1"}) == [
        "r.txt: executorch 1.5.0 -> 1.5.1"]


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.email", "d@e.com")
    _git(tmp_path, "config", "user.name", "d")
    for i in range(3):
        (tmp_path / "f.txt").write_text(str(i))
        _git(tmp_path, "add", "f.txt")
        _git(tmp_path, "commit", "-qm", f"c{i}")
    _git(tmp_path, "branch", "side", "HEAD~1")
    _git(tmp_path, "checkout", "-q", "side")
    (tmp_path / "g.txt").write_text("x")
    _git(tmp_path, "add", "g.txt")
    _git(tmp_path, "commit", "-qm", "side")
    _git(tmp_path, "checkout", "-q", "main")
    return tmp_path


@pytest.mark.parametrize("args,msg", [
    (["nope", "HEAD"], "unknown ref 'nope'"),
    (["HEAD", "HEAD~2"], "is not an ancestor of BAD"),
    (["side", "main"], "is not an ancestor of BAD"),
    (["HEAD", "HEAD"], "no commit between"),
])
def test_bad_ranges_say_one_line_and_leave_nothing(repo, monkeypatch, capsys, args, msg):
    monkeypatch.chdir(repo)
    assert main(["bisect", *args]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1
    assert not (repo / ".git" / "sme2-bisect").exists()
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"],
                               capture_output=True, text=True).stdout.splitlines()
    assert len(worktrees) == 1


def test_not_a_git_repository(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert main(["bisect", "HEAD~1", "HEAD"]) == 2
    assert "is not a git repository" in capsys.readouterr().err
