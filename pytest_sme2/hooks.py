"""Calling the hooks of :mod:`pytest_sme2.hookspec` from the library: helpers that ask a hook
relay, used by the layers below the plugin (runners, configuration). They take ``hook``: a
pluggy hook relay — pytest's ``config.hook`` in a pytest session, or
:func:`pytest_sme2.hookspec.plugin_manager` ``(...).hook`` without pytest — or None for the
built-in kinds and rules only. This module imports no hook specification: the specs sit above
the records they name (devices, runners, results), these helpers below them.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_sme2.analysis.categories import CategoryRule


def __getattr__(name: str) -> Any:
    """``plugin_manager`` moved to :mod:`pytest_sme2.hookspec`, beside the hooks it knows;
    importing it from here still works, with a DeprecationWarning."""
    if name == "plugin_manager":
        warnings.warn("pytest_sme2.hooks.plugin_manager moved: import it from "
                      "pytest_sme2.hookspec", DeprecationWarning, stacklevel=2)
        from pytest_sme2.hookspec import plugin_manager

        return plugin_manager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
