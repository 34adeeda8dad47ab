"""A user project with a `models` package of its own (common): the plugin benchmarks the zoo's
toy_cnn, and the project's tests import their own `models`, neither shadowing the other."""

import json
import shutil


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


WARNING_MODEL = """
import warnings

from pytest_sme2_models import register_model
from pytest_sme2_models.toy_cnn import build as build_toy


@register_model("warned_cnn")
def build():
    warnings.warn("the user's own model warns", UserWarning)
    return build_toy()
"""

EXPORTS_HERE = """
def test_exports_in_process(sme2_model, sme2_case):
    assert sme2_model.pte.is_file()
"""


def test_an_export_charges_the_users_test_with_its_own_warnings_only(pytester, run_pytest):
    """A project without this project's warning filters: the export in the test (in-process)
    keeps torch's and executorch's warnings (treespec, torch.jit.script_method, read_text, ...)
    out of its warnings summary, which holds the user's model's own warning; -v shows them,
    after the export's line."""
    pytester.makeconftest(WARNING_MODEL)
    pytester.makepyfile(test_export=EXPORTS_HERE)
    cache = pytester.path / "exports"
    args = (f"--sme2-cache-dir={cache}", "--sme2-models=warned_cnn", "--sme2-dtypes=fp32",
            "--sme2-threads=1")
    res = run_pytest(*args)
    res.assert_outcomes(passed=1, warnings=1)
    out = res.stdout.str()
    assert "UserWarning: the user's own model warns" in out
    for noise in ("FutureWarning", "DeprecationWarning", "script_method", "treespec",
                  "third-party warnings"):
        assert noise not in out, out
    (cache_entry,) = (cache / "warned_cnn").glob("fp32-*")
    shutil.rmtree(cache_entry)      # exported again, with -v
    res = run_pytest(*args, "-v")
    res.assert_outcomes(passed=1, warnings=1)
    res.stdout.fnmatch_lines(["sme2: exported warned_cnn fp32 in *",
                              "sme2: warned_cnn fp32: the export's third-party warnings:",
                              "  *: *Warning: *"])
    assert "warnings summary" in res.stdout.str()
