"""The tiers, and shared fixtures: one export cache per test session, so each model/dtype
exports once.

The folder is the tier: every test under a slow folder is marked ``slow`` here, once, so
``pytest tests -m "not slow"`` runs the fast folders only. Nothing is marked ``slow`` by hand
(tests/unit/test_tiers.py checks both)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.fakes.android import (  # noqa: F401 (fixtures)
    adb_server, arm64_phone, fake_android, fake_arm64_android)

TESTS = Path(__file__).parent
# plugin/: inner pytest sessions; integration/: real exports, builds, runs, valgrind, adb;
# long/: in-process checks with budgets too large for the fast tier (fuzzing, simulated gates).
SLOW_FOLDERS = frozenset({"plugin", "integration", "long"})
FAST_FOLDERS = frozenset({"unit", "faults"})
# Markers whose tests run only when -m names them (deselected otherwise, never skipped): the
# 0.6B-class LLM end to end exports for minutes in GBs (tests/long/test_llm_0_6b.py), beyond
# the suite's ~20 minutes on 2 cores that CI's `pytest tests` keeps to.
ON_REQUEST = frozenset({"llm_large"})


def folder_of(path: Path) -> str | None:
    """The folder under tests/ that holds ``path`` (None outside tests/ or directly in it)."""
    try:
        parts = Path(path).relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


@pytest.hookimpl(tryfirst=True)      # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if folder_of(item.path) in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
    asked = config.option.markexpr or ""
    left = [item for item in items
            if any(item.get_closest_marker(m) and m not in asked for m in ON_REQUEST)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item not in left]


# MobileViT with every width small and 32x32 images: the same 40-delegate graph as the zoo's
# mobilevit_small (its depth is fixed by the architecture), a 0.3 MB program. The tests' library
# model, and the one the sme2-benchmark-own-model skill tries first.
SMALL_LIBRARY_MODEL = ("transformers:MobileViTModel?image_size=32&hidden_sizes=[16,16,16]"
                       "&neck_hidden_sizes=[8,8,8,16,16,16,32]&num_attention_heads=2"
                       "&expand_ratio=2")
# What the session fixtures below export into the session's cache (a test module's
# FIXTURE_EXPORTS names its own fixtures'); a test's own exports are named by its ``exports``
# mark (``@pytest.mark.exports((model, dtype), ...)``).
FIXTURE_EXPORTS: dict[str, tuple[tuple[str, str], ...]] = {
    "toy_export": (("toy_cnn", "fp32"),),
    "small_library_export": ((SMALL_LIBRARY_MODEL, "fp32"),),
    "tiny_llama_exports": (("tiny_llama_plain", "8da8w"),),
}


def planned_exports(items: list[pytest.Item]) -> list[tuple[str, str]]:
    """The (model, dtype) points the selected tests export into the session's cache: the
    machine-state probe's, the ``exports`` marks' and those of the fixtures they use."""
    points = [("machine_probe", "fp32")]
    for item in items:
        for mark in item.iter_markers("exports"):
            points += [tuple(p) for p in mark.args]
        fixtures = {**FIXTURE_EXPORTS, **getattr(getattr(item, "module", None),
                                                 "FIXTURE_EXPORTS", {})}
        for name in getattr(item, "fixturenames", ()):
            points += fixtures.get(name, ())
    return list(dict.fromkeys(points))


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory, request) -> Path:
    """The session's export cache, holding the machine-state probe's program already: every
    host session times it around its blocks (and must not be seen exporting it).

    What the selected tests will export into it (:func:`planned_exports`) is exported first,
    side by side, by the plugin's own ahead-of-time pool (one process per core): the same
    exports, each once, in about half the wall time on 2 cores (the LLM schemes and the zoo
    are minutes of single-threaded lowering). Each test then finds its export in the cache."""
    from pytest_sme2.programs.ahead import default_jobs, export_ahead
    from pytest_sme2.programs.export import export_model

    cache = tmp_path_factory.mktemp("exports")
    export_ahead(planned_exports(request.session.items), cache, default_jobs())
    export_model("machine_probe", "fp32", cache)
    return cache


@pytest.fixture(scope="session")
def toy_export(export_cache):
    from pytest_sme2.programs.export import export_model

    return export_model("toy_cnn", "fp32", export_cache)


@pytest.fixture(scope="session")
def small_library_export(export_cache):
    """SMALL_LIBRARY_MODEL in fp32, exported once per session (~40 s of CPU): the sessions of
    the tests that use it find it in the cache."""
    from pytest_sme2.programs.export import export_model

    return export_model(SMALL_LIBRARY_MODEL, "fp32", export_cache)


# The export_llama programs below: fixture -> (scheme, export_llama's extra flags).
EXPORT_LLAMA_PROGRAMS: dict[str, tuple[str, list[str]]] = {
    "tiny_llama_8da4w": ("8da4w", []),
    "tiny_llama_8da4w_sdpa": ("8da4w", ["--use_sdpa_with_kv_cache"]),
}


@pytest.fixture(scope="session")
def export_llama_programs(request) -> dict[str, Path]:
    """The export_llama programs the selected tests use, those not cached on disk exported at
    once (two single-threaded processes side by side), when the first of them is needed."""
    from tests.llm_export import export_tiny_llamas

    wanted = sorted({name for item in request.session.items
                     for name in getattr(item, "fixturenames", ())
                     if name in EXPORT_LLAMA_PROGRAMS})
    return dict(zip(wanted, export_tiny_llamas([EXPORT_LLAMA_PROGRAMS[n] for n in wanted])))


def _export_llama_program(name: str, programs: dict[str, Path]) -> Path:
    from tests.llm_export import export_tiny_llama

    return programs.get(name) or export_tiny_llama(*EXPORT_LLAMA_PROGRAMS[name])


@pytest.fixture(scope="session")
def tiny_llama_8da4w(export_llama_programs) -> Path:
    """ExecuTorch's own export_llama .pte of a tiny seeded Llama (8da4w, plain attention),
    cached on disk across sessions (tests/llm_export.py): minutes cold on 2 cores, then free."""
    return _export_llama_program("tiny_llama_8da4w", export_llama_programs)


@pytest.fixture(scope="session")
def tiny_llama_8da4w_sdpa(export_llama_programs) -> Path:
    """The same checkpoint as :func:`tiny_llama_8da4w` exported as ExecuTorch's guides export
    it (``export_llama -kv --use_sdpa_with_kv_cache``): ``llama::custom_sdpa`` and
    ``llama::update_cache`` outside the delegate."""
    return _export_llama_program("tiny_llama_8da4w_sdpa", export_llama_programs)


@pytest.fixture(scope="session")
def tiny_llama_exports(export_cache) -> Path:
    """The session's export cache holding the zoo's ``tiny_llama_plain`` 8da8w (the plugin's
    own export, about a minute cold on 2 cores, shared with every other test that exports it;
    plain attention: it runs on QEMU and phones): pass it as an inner session's
    ``--sme2-cache-dir``."""
    from pytest_sme2.programs.export import export_model

    export_model("tiny_llama_plain", "8da8w", export_cache)
    return export_cache


@pytest.fixture(scope="session")
def user_caches(tmp_path_factory) -> dict[str, str]:
    """Cache folders shared by every inner pytest session of this run. pytester points HOME at
    each test's own folder, which would otherwise build the native runner (and matplotlib's
    font cache) again in every inner session."""
    return {"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg-cache")),
            "MPLCONFIGDIR": str(tmp_path_factory.mktemp("matplotlib"))}


@pytest.fixture(scope="session")
def provisioned_qemu() -> dict[str, str]:
    """The emulator `pytest-sme2 setup qemu` installed, named for inner sessions: their fresh
    cache folder would not hold it."""
    from pytest_sme2.emulation.tools import QEMU_ENV, find_qemu_binary
    from pytest_sme2.errors import Sme2Error

    try:
        return {QEMU_ENV: str(find_qemu_binary()[0])}
    except Sme2Error:
        return {}


@pytest.fixture
def inner_session_env(user_caches, provisioned_qemu, monkeypatch) -> None:
    for key, value in {**user_caches, **provisioned_qemu}.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def run_pytest(pytester, inner_session_env) -> Callable[..., pytest.RunResult]:
    """``run_pytest(*args)``: pytest on pytester's folder in a fresh process, as a user runs it
    (the plugin from its entry point, no cache provider, the session's shared caches)."""

    def run(*args: str) -> pytest.RunResult:
        # Without the plugins of hydra-core and anyio (executorch's requirements, unused here):
        # ~0.16 s of every inner session.
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hydra_pytest",
                                             "-p", "no:anyio", *args)

    return run
