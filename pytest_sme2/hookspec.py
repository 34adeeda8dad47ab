"""The hooks a plugin or a ``conftest.py`` implements to extend pytest-sme2: stable API.

Implement them as ordinary pytest hooks (a function of that name in ``conftest.py`` or in a
plugin module); an implementation may take any subset of a hook's arguments, and arguments may
be added to a hook later without breaking it. The library used without pytest calls the same
hooks through :func:`plugin_manager`::

    from pytest_sme2.devices import open_device
    from pytest_sme2.hookspec import plugin_manager

    import my_lab_plugin                 # a module with pytest_sme2_open_device
    device = open_device("lab:board3", hook=plugin_manager(my_lab_plugin).hook)

A lab board as a device kind and a runner kind, an extra category and a build id on every
result, from one ``conftest.py``::

    from pytest_sme2.analysis.categories import CategoryRule

    def pytest_sme2_open_device(spec):
        if spec.startswith("lab:"):
            return LabBoard(spec)                  # a pytest_sme2.devices.Device

    def pytest_sme2_runner_kinds():
        return ["lab"]                             # --runner fast=lab,board=rk3588

    def pytest_sme2_make_runner(spec, target):
        if spec.kind == "lab":
            return LabRunner(spec.name, spec.labels)   # a pytest_sme2.runners.Runner

    def pytest_sme2_category_rules():
        return [CategoryRule("Attention", r"^Scaled Dot Product Attention", "fused SDPA")]

    def pytest_sme2_amend_result(result):
        result.extra["build_id"] = os.environ.get("CI_BUILD_ID")
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING, Any, Sequence

import pluggy

from pytest_sme2.analysis.categories import with_rules

if TYPE_CHECKING:
    from pytest_sme2.analysis.categories import CategoryRule
    from pytest_sme2.devices.base import Device
    from pytest_sme2.results import BlockResult
    from pytest_sme2.runners.base import Runner
    from pytest_sme2.runners.spec import RunnerSpec

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_sme2_category_rules() -> Sequence[CategoryRule]:
    """Operator category rules tried before the built-in table
    (:data:`pytest_sme2.analysis.categories.DEFAULT_RULES`); the first rule whose pattern
    matches an operator's name gives its category, which may be a new one (it then has its own
    column in results and reports, and ``--sme2-gate-categories`` accepts it). Rules of
    plugins registered later (``conftest.py`` files) come first."""


@hookspec
def pytest_sme2_runner_kinds() -> Sequence[str]:
    """Names of the runner kinds this plugin makes in :func:`pytest_sme2_make_runner`: a
    ``--runner NAME=KIND[,key=value...]`` spec accepts them as KIND (any other word that is not
    ``python``, ``native`` or a path is a usage error)."""


@hookspec(firstresult=True)
def pytest_sme2_make_runner(spec: RunnerSpec, target: str) -> Runner | None:
    """Make the runner ``spec`` describes (``spec.name``, ``spec.kind``, ``spec.labels``,
    ``spec.path``, ...) for the device target ``target`` (``host``, ``aarch64-linux-gnu``,
    ...), or return None to leave it to the next plugin and then to the built-in kinds. Asked
    for every spec, built-in kinds included, once per session when a benchmark first uses it."""


@hookspec(firstresult=True)
def pytest_sme2_open_device(spec: str) -> Device | None:
    """Open the device the ``--device`` spec names (e.g. ``lab:board3``), or return None to leave
    it to the next plugin and then to the built-in kinds (``host``, ``android``, ``qemu``).
    A kind that is not built in is asked for when the session is configured (a kind no plugin
    opens is a usage error then; the device opened is the session's); a built-in kind, once
    per process when a benchmark first needs the device."""


@hookspec
def pytest_sme2_amend_result(result: BlockResult) -> None:
    """Amend a measured :class:`~pytest_sme2.results.BlockResult` in place (e.g. add to
    ``result.extra``, which ``results.json`` carries) before it is recorded: called in the
    process that measured it, before the test gets it and before it is written."""


class _PluginManager(pluggy.PluginManager):
    """As pytest's: a ``pytest_sme2_*`` function implements that hook without a marker."""

    def parse_hookimpl_opts(self, plugin: Any, name: str):
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("pytest_sme2_") and \
                inspect.isroutine(getattr(plugin, name, None)):
            return {}
        return opts


def plugin_manager(*plugins: Any) -> pluggy.PluginManager:
    """A plugin manager that knows the pytest-sme2 hooks, with ``plugins`` (modules or objects
    whose ``pytest_sme2_*`` functions implement them, as in a conftest.py) registered: for the
    library used without pytest."""
    pm = _PluginManager("pytest")
    pm.add_hookspecs(sys.modules[__name__])
    for plugin in plugins:
        pm.register(plugin)
    return pm


def category_rules(hook: Any | None) -> tuple[CategoryRule, ...] | None:
    """Asked through ``hook`` (a pluggy hook relay: pytest's ``config.hook``, or
    :func:`pytest_sme2.hookspec.plugin_manager` ``(...).hook``; None: built-in rules only),
    the category rule table: every plugin's rules in front of the built-in ones; None (the
    built-in table, on its fast path) when no plugin adds a rule."""
    if hook is None:
        return None
    extra = [rule for rules in hook.pytest_sme2_category_rules() for rule in rules or ()]
    return with_rules(extra) if extra else None
