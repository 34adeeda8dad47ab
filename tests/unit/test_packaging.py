"""What a wheel of this project holds, and the model zoo's import name."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_of_the_tree_is_listed_for_the_wheel():
    """The zoo installs under another name than its folder, so packages are listed by hand in
    pyproject.toml (`packages.find` cannot rename): a package missing there is missing from
    every non-editable install, while editable ones work."""
    tree = {".".join(init.parent.relative_to(ROOT).parts)
            for init in (ROOT / "pytest_sme2").rglob("__init__.py")}
    listed = set(_setuptools()["packages"])
    assert listed - {"pytest_sme2_models"} == tree, (
        f"add to [tool.setuptools] packages in pyproject.toml: {sorted(tree - listed)}; "
        f"remove: {sorted(listed - tree - {'pytest_sme2_models'})}")


def test_the_zoo_installs_as_pytest_sme2_models_from_models():
    config = _setuptools()
    assert "pytest_sme2_models" in config["packages"]
    assert config["package-dir"] == {"pytest_sme2_models": "models"}
    assert (ROOT / "models" / "__init__.py").is_file()


def test_the_library_never_imports_a_top_level_models(tmp_path):
    """A user's own `models` package must stay theirs: the plugin, the export cache key and the
    matrix use pytest_sme2_models (run where no `models` folder is in reach)."""
    code = ("import sys; import pytest_sme2.plugin; "
            "from pytest_sme2.programs.export import cache_key; "
            "from pytest_sme2.measure.matrix import build_matrix; cache_key('toy_cnn', 'fp32'); "
            "build_matrix(['toy_cnn'], ['fp32'], (1,)); print('models' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_requires_python_is_what_is_tested():
    """torch's CPU build here is cp311 only: a wider range promises versions nothing tests."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11,<3.12"
    assert sys.version_info[:2] == (3, 11)
    assert "Python 3.11, the one version tested" in (ROOT / "README.md").read_text()


def test_torch_comes_from_the_cpu_index_for_uv_and_the_readme_says_so_for_pip():
    """PyPI's torch for Linux is the CUDA build: uv is pinned to PyTorch's CPU index for torch
    alone (explicit), pip users are told to install torch from it first."""
    uv = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    index = uv["sources"]["torch"]["index"]
    assert [i for i in uv["index"] if i["name"] == index] == [
        {"name": index, "url": CPU_INDEX, "explicit": True}]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"pip install torch==2.13.0 --index-url {CPU_INDEX}" in readme
