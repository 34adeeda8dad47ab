"""What a benchmarking session costs beside its runner processes, and the measures that keep it
small, in one place (README, "What a session costs"; ``evaluations/costs_session.py``
measures them):

- :func:`settling`: the session's imports made without the garbage collector, and the objects
  they made then left out of its full walks (gc freeze), given back by :func:`unfreeze`;
- :func:`warm_imports`: what the session imports anyway (report plotting, templates, the
  collected exports) imported while the python runner's fork server starts beside us;
- :func:`fork_server_paused`: that server stopped around each measured process, so nothing of
  ours shares the CPU with a measurement;
- :func:`skip_exit_collection` and :func:`skip_idle_hypothesis_summary`: two collections and
  an import at the very end that do nothing for a benchmark session.

Nothing here imports the measuring stack (pandas) at module level: the plugin imports this in
every pytest run.
"""

from __future__ import annotations

import atexit
import gc
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pytest_sme2.programs.export import cached_export
from pytest_sme2.readers.etrecord import read_etrecord
from pytest_sme2.runners.fork_server import shared_server

_EXIT_HOOKS: set[str] = set()


@contextmanager
def settling() -> Iterator[list[bool]]:
    """Import the session's libraries without the garbage collector (imports make objects that
    live as long as the process, and full collections amid them walked the heap twice, ~0.15 s),
    then leave every object that exists (modules, classes, the collected tests) out of its full
    walks from then on: the session makes hundreds of collections, and pytest collects twice
    more at its end. Objects made later are collected as before. Yields ``[froze]``: nothing is
    frozen when something froze objects already (their owner unfreezes them)."""
    froze = [False]
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield froze
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            froze[0] = True
        if enabled:
            gc.enable()


def unfreeze() -> None:
    """Give what :func:`settling` froze back to the garbage collector, so a process that goes
    on after the session (pytest run from Python) collects the session's garbage as usual."""
    gc.unfreeze()


def warm_imports(prefetch: Iterable[tuple[str, str]], cache_dir: Path | None,
                 warm_ups: Iterable[Callable[[], None]] = ()) -> None:
    """While the fork server imports torch beside us: what the layers above give (the report's
    plotting library and templates: ``pytest_sme2.report.outputs.warm_up``), and each collected
    export (``prefetch``: model, dtype) verified and its .etrecord read once, here rather than
    per block."""
    for warm in warm_ups:
        warm()
    for model, dtype in prefetch:
        try:
            hit = cached_export(model, dtype, cache_dir)
            if hit is not None:
                read_etrecord(hit.etrecord)
        except Exception:  # noqa: BLE001 - the benchmark itself says what is wrong
            pass


@contextmanager
def fork_server_paused() -> Iterator[None]:
    """Around each measured process (on any device: the host runs the adb server and the
    emulator too): a fork server still importing is stopped, and goes on importing after."""
    server = shared_server()
    server.pause()
    try:
        yield
    finally:
        server.resume()


def skip_exit_collection() -> None:
    """At exit, Python's final garbage collections walk every object a benchmark session made
    (pandas, matplotlib, results): ~0.4 s for nothing. Freezing them first skips that walk;
    done at exit only, so a pytest run inside a longer-lived process is not affected. Once,
    however many sessions this process runs."""
    if "freeze" not in _EXIT_HOOKS:
        _EXIT_HOOKS.add("freeze")
        atexit.register(gc.freeze)


def skip_idle_hypothesis_summary(config: Any) -> None:
    """hypothesis, installed with executorch, imports itself in its terminal summary (~1 s at
    the end of every session) to look for output only a session that ran it can have: when
    nothing imported it, its plugin sits the summary out (call this before that summary).
    ``config``: pytest's Config (its plugin manager and options)."""
    plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None and "hypothesis" not in sys.modules and \
            not config.getoption("--hypothesis-show-statistics", False):
        config.pluginmanager.unregister(plugin)
