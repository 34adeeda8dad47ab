"""Calling the hooks of :mod:`pytest_sme2.hookspec` from the library.

Library functions that can be extended take ``hook``: a pluggy hook relay — pytest's
``config.hook`` in a pytest session, or ``plugin_manager(...).hook`` without pytest — or None
for the built-in kinds and rules only::

    from pytest_sme2.devices import open_device
    from pytest_sme2.hooks import plugin_manager

    import my_lab_plugin                 # a module with pytest_sme2_open_device
    device = open_device("lab:board3", hook=plugin_manager(my_lab_plugin).hook)
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import pluggy

from pytest_sme2 import hookspec

if TYPE_CHECKING:
    from pytest_sme2.analysis.categories import CategoryRule


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
    pm.add_hookspecs(hookspec)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def category_rules(hook: Any | None) -> tuple[CategoryRule, ...] | None:
    """The category rule table: every plugin's rules in front of the built-in ones; None (the
    built-in table, on its fast path) when no plugin adds a rule."""
    if hook is None:
        return None
    from pytest_sme2.analysis.categories import with_rules

    extra = [rule for rules in hook.pytest_sme2_category_rules() for rule in rules or ()]
    return with_rules(extra) if extra else None


def runner_kinds(hook: Any | None) -> tuple[str, ...]:
    """The runner kinds plugins make (for ``--runner NAME=KIND``), each once."""
    if hook is None:
        return ()
    return tuple(dict.fromkeys(kind for kinds in hook.pytest_sme2_runner_kinds()
                               for kind in kinds or ()))
