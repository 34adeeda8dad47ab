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
