"""The hooks of pytest_sme2.hookspec as the library calls them, without pytest: a device kind, a
runner kind, category rules (tests/plugin/test_plugin_hooks.py: the same from a conftest.py)."""

from __future__ import annotations

import inspect

import pytest

from pytest_sme2 import hookspec
from pytest_sme2.analysis.categories import CONVOLUTION, DEFAULT_RULES, CategoryRule, classify
from pytest_sme2.devices import DeviceError, open_device
from pytest_sme2.devices.registry import open_plugin_devices
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.hookspec import category_rules
from pytest_sme2.runners.spec import runner_kinds
from pytest_sme2.hookspec import plugin_manager
from pytest_sme2.runners import RunnerError, runner_from_spec
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.runners.spec import RunnerSpec, parse_runner_spec, runner_specs


class LabRunner:
    hwcap_mask = None

    def __init__(self, spec: RunnerSpec, target: str):
        self.info = RunnerInfo(spec.name, spec.kind, dict(spec.labels))
        self.target = target


class Lab:
    """A plugin: the lab's boards as a device kind, its runner as a runner kind."""

    def __init__(self):
        self.asked: list[str] = []

    def pytest_sme2_open_device(self, spec):
        self.asked.append(spec)
        return HostDevice(spec=spec) if spec.startswith("lab:") else None

    def pytest_sme2_runner_kinds(self):
        return ["lab"]

    def pytest_sme2_make_runner(self, spec, target):
        return LabRunner(spec, target) if spec.kind == "lab" else None


class Rules:
    def __init__(self, *rules):
        self.rules = list(rules)

    def pytest_sme2_category_rules(self):
        return self.rules


def test_every_hook_is_documented_and_named_for_the_plugin():
    hooks = {n: f for n, f in vars(hookspec).items() if n.startswith("pytest_")}
    assert set(hooks) == {"pytest_sme2_category_rules", "pytest_sme2_runner_kinds",
                          "pytest_sme2_make_runner", "pytest_sme2_open_device",
                          "pytest_sme2_amend_result"}
    assert all(inspect.getdoc(f) for f in hooks.values())
    pm = plugin_manager()
    for name in hooks:
        assert hasattr(pm.hook, name)
    firstresult = {n for n in hooks if getattr(pm.hook, n).spec.opts.get("firstresult")}
    assert firstresult == {"pytest_sme2_make_runner", "pytest_sme2_open_device"}


def test_a_plugin_opens_its_device_kind_and_leaves_the_others():
    lab = Lab()
    hook = plugin_manager(lab).hook
    assert open_device("lab:bench1", hook=hook).spec == "lab:bench1"
    assert isinstance(open_device("host", hook=hook), HostDevice)
    assert lab.asked == ["lab:bench1", "host"]


def test_without_the_plugin_a_device_kind_is_unknown():
    with pytest.raises(DeviceError, match=r"unknown device kind 'lab'.*pytest_sme2_open_device"):
        open_device("lab:bench1")
    with pytest.raises(DeviceError, match="unknown device kind 'lab'"):
        open_device("lab:bench1", hook=plugin_manager().hook)


def test_at_configure_time_a_plugin_is_asked_only_for_kinds_not_built_in():
    """--device specs are checked before anything runs: a plugin's kind is opened then (and
    kept), a built-in kind is left for its first benchmark, a kind nobody opens is an error."""
    lab = Lab()
    opened = open_plugin_devices(["host", "qemu", "android:*", "lab:bench1"],
                                 plugin_manager(lab).hook)
    assert list(opened) == ["lab:bench1"] and opened["lab:bench1"].spec == "lab:bench1"
    assert lab.asked == ["lab:bench1"]
    with pytest.raises(DeviceError, match=r"--device 'phone': unknown device kind 'phone'"):
        open_plugin_devices(["host", "phone"], plugin_manager(lab).hook)


def test_a_runner_kind_a_plugin_declares_parses_with_its_labels():
    spec = parse_runner_spec("fast=lab,board=rk3588", kinds=("lab",))
    assert (spec.name, spec.kind, spec.labels) == ("fast", "lab", {"board": "rk3588"})
    assert runner_specs(["fast=lab"], kinds=("lab",))["fast"].kind == "lab"
    with pytest.raises(RunnerError, match=r"'lab' is neither a built-in runner \(python, "
                                          r"native, text_llm_runner\) nor a path"):
        parse_runner_spec("fast=lab")
    with pytest.raises(RunnerError, match=r"'lob' is neither a built-in runner \(python, "
                                          r"native, text_llm_runner\), a kind a plugin makes "
                                          r"\(lab\) nor a path"):
        parse_runner_spec("fast=lob", kinds=("lab",))


def test_a_plugin_makes_its_runner_kind_for_the_device_target():
    hook = plugin_manager(Lab()).hook
    runner = RunnerSpec("fast", "lab", labels={"board": "rk3588"}).make(
        target="aarch64-linux-gnu", hook=hook)
    assert isinstance(runner, LabRunner) and runner.target == "aarch64-linux-gnu"
    assert runner.info.to_dict() == {"name": "fast", "kind": "lab",
                                     "labels": {"board": "rk3588"}}
    made = runner_from_spec("fast=lab,board=x", hook=hook)
    assert isinstance(made, LabRunner) and made.info.labels == {"board": "x"}
    with pytest.raises(RunnerError, match="no plugin made a runner of kind 'lab'"):
        RunnerSpec("fast", "lab").make()


def test_a_plugin_may_make_a_built_in_kind_too():
    class Prebuilt:
        def pytest_sme2_make_runner(self, spec, target):
            if spec.kind == "native" and target == "aarch64-linux-android":
                return LabRunner(spec, target)

    runner = RunnerSpec("native", "native").make(target="aarch64-linux-android",
                                                 hook=plugin_manager(Prebuilt()).hook)
    assert isinstance(runner, LabRunner)


def test_runner_kinds_of_all_plugins_each_once():
    class More:
        def pytest_sme2_runner_kinds(self):
            return ("lab", "farm")

    assert runner_kinds(None) == ()
    assert sorted(runner_kinds(plugin_manager(Lab(), More()).hook)) == ["farm", "lab"]


def test_category_rules_go_in_front_of_the_built_in_table():
    convs = CategoryRule("Convs", r"^Convolution", "every XNNPACK convolution")
    late = CategoryRule("Late", r"^Convolution", "registered last: asked first")
    assert category_rules(None) is None
    assert category_rules(plugin_manager(Rules()).hook) is None   # the built-in fast path
    table = category_rules(plugin_manager(Rules(convs)).hook)
    assert table == (convs, *DEFAULT_RULES)
    name = "Convolution (NHWC, F32) IGEMM #1"
    assert classify(name) == CONVOLUTION and classify(name, table) == "Convs"
    table = category_rules(plugin_manager(Rules(convs), Rules(late)).hook)
    assert table[:2] == (late, convs) and classify(name, table) == "Late"


def test_a_rule_that_is_not_a_category_rule_is_refused():
    with pytest.raises(TypeError, match="expected CategoryRule"):
        category_rules(plugin_manager(Rules(("Convs", "^Conv"))).hook)


def test_the_hooks_helpers_module_is_gone():
    """Its helpers live where they are used (runners.spec, analysis.categories): no shim."""
    with pytest.raises(ImportError):
        from pytest_sme2 import hooks  # noqa: F401


def test_the_helpers_import_no_hook_specification():
    """The helpers sit below the records the specs name (runners import them); hookspec
    above."""
    import ast
    import inspect

    from pytest_sme2.analysis import categories
    from pytest_sme2.runners import spec

    for module in (categories, spec):
        tree = ast.parse(inspect.getsource(module))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not any("hookspec" in ast.unparse(n) for n in top)
