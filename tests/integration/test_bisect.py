"""``pytest-sme2 bisect`` on a user project built in the test (tests/bisect_repo.py): ten
commits with a slowdown planted at one, a comment-only commit (reused, never measured), an
unbuildable commit (skipped), a device lost mid-bisect (resumed), and a flat range (not
reproducible)."""

import json
import subprocess

import pytest

from pytest_sme2.bisect import measures
from pytest_sme2.cli import main
from pytest_sme2.errors import Sme2Error
from tests.bisect_repo import (BENCH, CONFTEST, COMMENT_ONLY, MODEL, SLOWDOWN, UNBUILDABLE,
                               build_repo, dtype_history)
from tests.needs import emulated_sme2

FAST = ["--runs", "10", "--warmup", "2"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    repo = tmp_path_factory.mktemp("project")
    return repo, build_repo(repo), tmp_path_factory.mktemp("bisect-exports")


def _selection(cache):
    return ["test_bench.py", f"--sme2-cache-dir={cache}"]


def _left_behind(repo):
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"],
                               capture_output=True, text=True).stdout.splitlines()
    return len(worktrees) - 1


def test_a_lost_device_keeps_the_state_and_resume_finds_the_culprit(project, monkeypatch,
                                                                      capsys, tmp_path):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    real = measures.Bench.compare
    calls = []

    def lose_the_device(self, base, candidate, label):
        calls.append(label)
        if len(calls) == 2:
            raise Sme2Error("adb: device 'R5C' not found")
        return real(self, base, candidate, label)

    monkeypatch.setattr(measures.Bench, "compare", lose_the_device)
    assert main(["bisect", *FAST, shas[0], shas[-1], *_selection(cache)]) == 2
    err = capsys.readouterr().err
    assert "device 'R5C' not found" in err and "--resume" in err and err.count("\n") == 1
    assert (repo / ".git" / "sme2-bisect").is_dir() and _left_behind(repo) == 0

    monkeypatch.setattr(measures.Bench, "compare", real)
    out_json = tmp_path / "bisect.json"
    assert main(["bisect", *FAST, "--resume", "--json", str(out_json), "--md",
                 str(tmp_path / "bisect.md"), shas[0], shas[-1], *_selection(cache)]) == 0
    out = capsys.readouterr().out
    print(out)
    doc = json.loads(out_json.read_text())
    assert doc["verdict"] == "found"
    (culprit,) = doc["culprits"]
    assert culprit["commit"] == shas[SLOWDOWN] and culprit["subject"].startswith("widen")
    assert culprit["interval"][0] > 1.05 and culprit["pairs"] >= 3
    assert "requirements.txt: executorch 1.5.0 -> 1.5.1" in culprit["dependency_pins"]
    assert shas[UNBUILDABLE] in doc["skipped"] and shas[UNBUILDABLE] != culprit["commit"]
    assert shas[COMMENT_ONLY] in doc["reused"]
    assert {p["commit"] for p in doc["probes"]} >= {shas[SLOWDOWN], shas[COMMENT_ONLY]}
    assert f"culprit {shas[SLOWDOWN][:10]}" in out and "byte-identical" in out
    assert not (repo / ".git" / "sme2-bisect").exists() and _left_behind(repo) == 0


def test_ctrl_c_says_the_state_is_kept_and_resume_continues(project, monkeypatch, capsys):
    """Issue 49, item 14: Ctrl-C printed `pytest-sme2: interrupted` alone."""
    repo, shas, cache = project
    monkeypatch.chdir(repo)

    def ctrl_c(self, base, candidate, label):
        raise KeyboardInterrupt

    monkeypatch.setattr(measures.Bench, "compare", ctrl_c)
    assert main(["bisect", *FAST, shas[0], shas[-1], *_selection(cache)]) == 130
    err = capsys.readouterr().err
    folder = repo / ".git" / "sme2-bisect" / f"{shas[0][:12]}..{shas[-1][:12]}"
    assert err == (f"pytest-sme2: interrupted; the bisect's state is kept in {folder}: the "
                   "same command with --resume continues\n")
    assert (folder / "state.json").is_file() and _left_behind(repo) == 0
    state = json.loads((folder / "state.json").read_text())
    assert set(state["exported"]) >= {shas[0], shas[-1]}       # the ends' exports are kept
    subprocess.run(["rm", "-rf", str(folder.parent)], check=True)


def test_a_flat_range_is_not_reproducible_and_spends_nothing_more(project, monkeypatch,
                                                                  capsys):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    assert main(["bisect", *FAST, shas[SLOWDOWN], shas[-1], *_selection(cache)]) == 0
    out = capsys.readouterr().out
    assert "bisect: not reproducible" in out and "1 probe(s)" in out


@pytest.mark.parametrize("good,bad,args,msg", [
    (COMMENT_ONLY, UNBUILDABLE, [], "BAD * cannot be exported"),
    (0, 1, ["-k", "nothing_matches"], "no benchmark selected at both GOOD and BAD*"),
    # Issue 49, item 17: pytest's usage error read as "every commit tried is unbuildable".
    (0, 1, ["--sme2-runs-typo=3"], "pytest refused the arguments (exit 4, a usage error): "
                                   "pytest.main(): error: unrecognized arguments: "
                                   "--sme2-runs-typo=3*, at GOOD and BAD alike: the selection "
                                   "is wrong, not the commits; check that `pytest test_bench.py"),
    (0, 1, ["--json", "b.json"], "bisect's own option(s) --json come after BAD, where every "
                                 "argument is pytest's selection: put them before GOOD "
                                 "(pytest-sme2 bisect --json b.json *"),
])
def test_unbuildable_ends_and_no_benchmark_say_one_line(project, monkeypatch, capsys, good,
                                                       bad, args, msg):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    assert main(["bisect", shas[good], shas[bad], *_selection(cache), *args]) == 2
    err = capsys.readouterr().err.strip()
    head, tail = msg.split("*")
    assert err.count("\n") == 0 and head in err and tail in err
    assert not (repo / ".git" / "sme2-bisect").exists() and _left_behind(repo) == 0


def test_by_instructions_finds_the_culprit_then_confirms_it_in_time(project, monkeypatch,
                                                                    capsys, tmp_path):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    out_json = tmp_path / "bisect.json"
    assert main(["bisect", *FAST, "--measure", "instructions", "--json", str(out_json),
                 shas[COMMENT_ONLY], shas[SLOWDOWN + 1], *_selection(cache)]) == 0
    out = capsys.readouterr().out
    print(out)
    (culprit,) = json.loads(out_json.read_text())["culprits"]
    assert culprit["commit"] == shas[SLOWDOWN] and culprit["pairs"] == 0
    assert culprit["in_time"]["verdict"] == "regression" and culprit["in_time"]["pairs"] >= 2
    assert "instructions counted" in out and "vs its parent in time: regression" in out


def test_a_not_deterministic_enough_benchmark_says_one_line(project, monkeypatch, capsys):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    # A flat range at a 0.5% threshold with 4 pairs at most: GOOD against itself cannot tell.
    assert main(["bisect", *FAST, "--threshold", "0.5", "--max-pairs", "4", "--budget", "1",
                 shas[SLOWDOWN], shas[-1], *_selection(cache)]) == 2
    err = capsys.readouterr().err.strip()
    print(err)
    assert err.count("\n") == 0 and "is not deterministic enough to bisect at 0.5%" in err
    assert not (repo / ".git" / "sme2-bisect").exists() and _left_behind(repo) == 0


TWO_STEPS = [("the MLP benchmark", {"conftest.py": CONFTEST, "test_bench.py": BENCH,
                                    "mlp_model.py": MODEL.format(width=64, seed=0)}),
             ("docs", {"README.md": "an MLP\n"}),
             ("wider", {"mlp_model.py": MODEL.format(width=384, seed=0)}),
             ("docs again", {"README.md": "a wider MLP\n"}),
             ("widest", {"mlp_model.py": MODEL.format(width=2048, seed=0)}),
             ("docs, done", {"README.md": "the widest MLP\n"})]


def test_two_steps_in_two_ranges_are_both_found(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "two-steps"
    shas = build_repo(repo, TWO_STEPS)
    monkeypatch.chdir(repo)
    out_json = tmp_path / "bisect.json"
    assert main(["bisect", *FAST, "--json", str(out_json), shas[0], shas[-1], "test_bench.py",
                 f"--sme2-cache-dir={tmp_path / 'cache'}"]) == 0
    print(capsys.readouterr().out)
    doc = json.loads(out_json.read_text())
    assert doc["verdict"] == "found"
    assert [c["commit"] for c in doc["culprits"]] == [shas[2], shas[4]]


@pytest.fixture(scope="module")
def qemu_ready():
    emulated_sme2()


def test_by_kernels_on_qemu_finds_where_the_sme2_kernels_changed(qemu_ready, tmp_path,
                                                                 monkeypatch, capsys):
    repo = tmp_path / "dtype"
    shas = build_repo(repo, dtype_history(change_at=2, commits=4))
    monkeypatch.chdir(repo)
    out_json = tmp_path / "bisect.json"
    assert main(["bisect", "--runs", "3", "--warmup", "1", "--measure", "kernels", "--json",
                 str(out_json), shas[0], shas[-1], "test_bench.py", "--device", "qemu",
                 f"--sme2-cache-dir={tmp_path / 'cache'}"]) == 0
    out = capsys.readouterr().out
    print(out)
    doc = json.loads(out_json.read_text())
    (culprit,) = doc["culprits"]
    assert culprit["commit"] == shas[2] and culprit["pairs"] == 0 and not culprit["in_time"]
    assert "SME2 kernels changed" in out and "_sme2_" in out and doc["pairs_measured"] == 0


def test_kernels_off_qemu_says_one_line(project, monkeypatch, capsys):
    repo, shas, cache = project
    monkeypatch.chdir(repo)
    assert main(["bisect", "--measure", "kernels", shas[0], shas[1],
                 *_selection(cache)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--measure kernels traces kernels on --device qemu only" in err
    assert not (repo / ".git" / "sme2-bisect").exists() and _left_behind(repo) == 0
