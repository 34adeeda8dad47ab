"""The export cache key: what must make a new export (no export runs here)."""

from __future__ import annotations

import shutil
import sys

import pytest

from pytest_sme2.programs import export


@pytest.fixture
def recipe_copies(tmp_path, monkeypatch):
    """The recipe's source files copied to tmp_path, and the key computed from the copies."""
    copies = []
    for path in export.RECIPE_SOURCES:
        copies.append(tmp_path / path.name)
        shutil.copyfile(path, copies[-1])
    monkeypatch.setattr(export, "RECIPE_SOURCES", tuple(copies))
    return {p.name: p for p in copies}


def test_the_recipe_is_export_py_and_recipes_py():
    assert {p.name for p in export.RECIPE_SOURCES} == {"export.py", "recipes.py"}
    assert all(p.is_file() for p in export.RECIPE_SOURCES)


def test_an_llm_key_also_holds_the_llm_recipe(monkeypatch, tmp_path):
    assert {p.name for p in export.LLM_RECIPE_SOURCES} == {"llama.py", "schemes.py"}
    llm, cnn = export.cache_key("tiny_llama", "8da4w"), export.cache_key("toy_cnn", "fp32")
    copies = []
    for path in export.LLM_RECIPE_SOURCES:
        copies.append(tmp_path / path.name)
        copies[-1].write_bytes(path.read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(export, "LLM_RECIPE_SOURCES", tuple(copies))
    assert export.cache_key("tiny_llama", "8da4w") != llm
    assert export.cache_key("toy_cnn", "fp32") == cnn


def test_the_key_depends_on_the_model_and_the_dtype():
    keys = {export.cache_key(m, d) for m in ("toy_cnn", "vit_tiny") for d in ("fp32", "int8")}
    assert len(keys) == 4
    assert export.cache_key("toy_cnn", "fp32") == export.cache_key("toy_cnn", "fp32")


@pytest.mark.parametrize("name", ["recipes.py", "export.py"])
def test_editing_a_recipe_file_changes_the_key(recipe_copies, name):
    before = export.cache_key("toy_cnn", "fp32")
    assert before == export.cache_key("toy_cnn", "fp32")
    path = recipe_copies[name]
    path.write_bytes(path.read_bytes() + b"\n# a changed recipe\n")
    assert export.cache_key("toy_cnn", "fp32") != before


def test_a_cache_hit_does_not_import_the_recipe(recipe_copies, monkeypatch):
    """The key is read from the sources' bytes: importing recipes would import torch."""
    monkeypatch.delitem(sys.modules, "pytest_sme2.programs.recipes", raising=False)
    export.cache_key("toy_cnn", "fp32")
    assert "pytest_sme2.programs.recipes" not in sys.modules
