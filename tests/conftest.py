"""Shared fixtures: one export cache per test session, so each model/dtype exports once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.android import adb_server, fake_android  # noqa: F401  (fixtures)


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="session")
def toy_export(export_cache):
    from pytest_sme2.export import export_model

    return export_model("toy_cnn", "fp32", export_cache)


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
