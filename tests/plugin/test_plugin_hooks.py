"""The hooks of pytest_sme2.hookspec from a user's conftest.py, in an inner session: a lab board
as a device kind, a runner kind, an extra operator category and a field added to every result."""

import json

import pytest


CONFTEST = """
import dataclasses

from pytest_sme2.analysis.categories import CategoryRule
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.runners.spec import RunnerSpec


class LabBoard(HostDevice):
    def facts(self):
        return dataclasses.replace(super().facts(), kind="lab", serial=self.spec)


def pytest_sme2_open_device(spec):
    if spec.startswith("lab:"):
        return LabBoard(spec=spec)


def pytest_sme2_runner_kinds():
    return ["lab"]


def pytest_sme2_make_runner(spec, target):
    if spec.kind == "lab":   # the lab's runner: here our native one, labelled as the lab's
        return RunnerSpec(spec.name, "native", labels={**spec.labels, "made_by": "lab"}).make(
            target=target)


def pytest_sme2_category_rules():
    return [CategoryRule("Convs", r"^Convolution", "every XNNPACK convolution")]


def pytest_sme2_amend_result(result):
    result.extra["lab_build"] = "b42"
"""

TESTS = """
def test_on_the_lab_board(sme2_bench, sme2_device):
    assert sme2_device.facts().kind == "lab"
    r = sme2_bench("toy_cnn", runner="fast")
    assert r.runner.labels["board"] == "rk3588" and r.runner.labels["made_by"] == "lab"
    assert r.extra["lab_build"] == "b42"           # amended before the test gets it
    assert r.categories_ms["Convs"] > 0 and r.categories_ms["Convolution"] == 0
"""


@pytest.fixture
def lab_project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_lab=TESTS)
    return pytester


def test_a_conftest_adds_a_device_a_runner_a_category_and_a_result_field(
        lab_project, run_pytest, export_cache, toy_export):
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
                     "--device=lab:bench1", "--runner=fast=lab,board=rk3588",
                     "--sme2-gate-categories=Convs")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["sme2: toy_cnn fp32 t1 fast: Method::execute median *n=3*",
                              "*pytest-sme2 summary*",
                              "test_on_the_lab_board*toy_cnn*fp32*fast*Convs *%*"])
    (b,) = json.loads((lab_project.path / "sme2-report" / "results.json").read_text())[
        "benchmarks"]
    assert b["device"]["kind"] == "lab" and b["device"]["serial"] == "lab:bench1"
    assert b["runner_info"]["labels"]["made_by"] == "lab" and b["lab_build"] == "b42"
    assert b["categories_ms"]["Convs"] > 0
    assert "Convs" in (lab_project.path / "sme2-report" / "report.md").read_text()


def test_a_runner_kind_no_plugin_makes_is_a_usage_error(lab_project, run_pytest):
    (lab_project.path / "conftest.py").unlink()
    res = run_pytest("--runner=fast=lab,board=rk3588")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert ("'lab' is neither a built-in runner (python, native, text_llm_runner) nor a path"
            in res.stderr.str())


def test_a_device_kind_no_plugin_opens_is_one_usage_error(lab_project, run_pytest):
    """Before anything runs, like a bad --sme2-threads: not one error per benchmark."""
    (lab_project.path / "conftest.py").unlink()
    res = run_pytest("--device=lab:bench1")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert res.stderr.str().count("ERROR: --device 'lab:bench1': unknown device kind 'lab'") == 1
    assert "collected" not in res.stdout.str() and "error" not in res.stdout.str().lower()
