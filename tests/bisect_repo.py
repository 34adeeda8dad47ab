"""A user's project as a git repository, built commit by commit for the bisect tests: a model of
its own (an MLP registered in its conftest), one benchmark, and a history with one planted
slowdown (a wider hidden layer), a comment-only commit, an unbuildable commit and a commit that
changes the weights' bytes but not the speed.

    python -m tests.bisect_repo DIR      # build it by hand, to try `pytest-sme2 bisect`
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = """from pytest_sme2_models import register_model

register_model("mlp", "mlp_model:build")
"""

MODEL = """import torch
from torch import nn

from pytest_sme2_models import ModelDef

WIDTH = {width}
SEED = {seed}


def build():
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(256, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 256)).eval()
    x = (torch.randn(8, 256),)
    return ModelDef(model, x, [x])
"""

BENCH = """def test_mlp(sme2_bench):
    sme2_bench("mlp", dtype="fp32", threads=1)
"""

# (subject, files written) per commit after the first; the first is GOOD.
HISTORY: list[tuple[str, dict[str, str]]] = [
    ("the MLP benchmark", {"conftest.py": CONFTEST, "test_bench.py": BENCH,
                           "mlp_model.py": MODEL.format(width=64, seed=0),
                           "requirements.txt": "torch==2.13.0\nexecutorch==1.5.0\n",
                           "README.md": "# a user project\n"}),
    ("docs: say what it is", {"README.md": "# a user project\n\nAn MLP.\n"}),
    ("add a helper nobody imports", {"helper.py": "def helper():\n    return 1\n"}),
    ("docs: how to run", {"README.md": "# a user project\n\nAn MLP. Run pytest.\n"}),
    ("comment the model", {"mlp_model.py": "# the hidden layer's width sets its cost\n"
                           + MODEL.format(width=64, seed=0)}),
    ("break the model file", {"mlp_model.py": "def build(:\n"}),
    ("fix the model file", {"mlp_model.py": MODEL.format(width=64, seed=0)}),
    ("widen the hidden layer, bump executorch",
     {"mlp_model.py": MODEL.format(width=1024, seed=0),
      "requirements.txt": "torch==2.13.0\nexecutorch==1.5.1\n"}),
    ("docs: mention the width", {"README.md": "# a user project\n\nA wide MLP.\n"}),
    ("other weights, same shape", {"mlp_model.py": MODEL.format(width=1024, seed=1)}),
    ("docs: done", {"README.md": "# a user project\n\nA wide MLP. Done.\n"}),
]
SLOWDOWN = 7            # the index (0: GOOD) of the planted slowdown
UNBUILDABLE = 5
COMMENT_ONLY = 4


def long_history(commits: int = 64, slowdown: int = 40) -> list[tuple[str, dict[str, str]]]:
    """``commits`` commits after GOOD, each with other weights (its seed: every program's
    bytes differ, so every probe measures), the hidden layer widened at ``slowdown``."""
    out = HISTORY[:1]
    for i in range(1, commits + 1):
        width = 1024 if i >= slowdown else 64
        subject = "widen the hidden layer" if i == slowdown else f"retrain ({i})"
        out.append((subject, {"mlp_model.py": MODEL.format(width=width, seed=i)}))
    return out


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def build_repo(repo: Path, history: list[tuple[str, dict[str, str]]] = HISTORY) -> list[str]:
    """The repository at ``repo``; its commits' shas, oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "dev")
    shas = []
    for subject, files in history:
        for name, text in files.items():
            (repo / name).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
    (repo / ".gitignore").write_text("sme2-report/\n")      # uncommitted: never used
    return shas


if __name__ == "__main__":
    for i, sha in enumerate(build_repo(Path(sys.argv[1]))):
        print(i, sha)


def dtype_history(change_at: int = 2, commits: int = 4) -> list[tuple[str, dict[str, str]]]:
    """The MLP benchmarked in fp32, then in fp16 from commit ``change_at`` on (on an SME2 CPU,
    other SME2 kernels run); the other commits are docs."""
    out = [(s, {**f, "requirements.txt": f["requirements.txt"]}) for s, f in HISTORY[:1]]
    for i in range(1, commits + 1):
        if i == change_at:
            out.append(("benchmark it in fp16", {"test_bench.py": BENCH.replace("fp32", "fp16")}))
        else:
            out.append((f"docs ({i})", {"README.md": f"# a user project ({i})\n"}))
    return out
