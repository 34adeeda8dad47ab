"""A user project with a `models` package of its own (common): the plugin benchmarks the zoo's
toy_cnn, and the project's tests import their own `models`, neither shadowing the other."""

import json


OWN_MODELS = {
    "models/__init__.py": "OWNER = 'the user'\nfrom models.registry import NETS\n",
    "models/registry.py": "NETS = {'my_net': 'models.my_net:build'}\n",
    "models/my_net.py": "def build():\n    return 'my_net'\n",
}

CONFTEST = """
import models                       # the project's own, imported before any test runs
from pytest_sme2_models import register_model

assert models.OWNER == "the user", models.__file__
register_model("my_net", "models.my_net:build")     # a builder in the project's own package
"""

TESTS = """
import models
from models.registry import NETS


def test_toy(sme2_bench):
    r = sme2_bench("toy_cnn", dtype="fp32", threads=1)
    assert r.e2e.n == r.runs


def test_own_models_package():
    from pathlib import Path

    import pytest_sme2_models

    assert models.OWNER == "the user" and NETS == {"my_net": "models.my_net:build"}
    zoo = pytest_sme2_models.get_model("toy_cnn").source_file().parent
    assert zoo == Path(pytest_sme2_models.__file__).parent != Path(models.__file__).parent
    assert pytest_sme2_models.get_model("my_net").build() == "my_net"
"""


def test_a_project_with_its_own_models_package(pytester, run_pytest, export_cache, toy_export):
    for path, text in OWN_MODELS.items():
        (pytester.path / path).parent.mkdir(exist_ok=True)
        (pytester.path / path).write_text(text)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_project=TESTS)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1", "-v")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines(["sme2: toy_cnn fp32 t1 *: Method::execute median * ms*n=3*"])
    (b,) = json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]
    assert b["model"] == "toy_cnn" and b["export_key"] == toy_export.key
