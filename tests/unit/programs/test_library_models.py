"""Library architectures by name: built from their config's defaults with seeded weights, one
line for an unknown name or a library that is missing or does not import."""

from __future__ import annotations

import importlib

import pytest

from pytest_sme2.programs.library import LibraryModel, LibraryModelError, import_library


def test_missing_library_names_what_to_install(monkeypatch):
    real = importlib.import_module

    def no_timm(name, *a, **k):
        if name == "timm":
            raise ModuleNotFoundError("No module named 'timm'", name="timm")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", no_timm)
    with pytest.raises(LibraryModelError, match=r"^timm: not installed; pip install timm"):
        import_library("timm")


def test_a_library_that_does_not_import_is_one_line(monkeypatch):
    def broken(name, *a, **k):
        raise RuntimeError("operator torchvision::nms does not exist\nmore")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(LibraryModelError) as e:
        import_library("torchvision")
    assert "operator torchvision::nms does not exist" in str(e.value)
    assert "will not replace yours" in str(e.value) and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def transformers():
    try:
        return importlib.import_module("transformers")
    except ImportError:
        from tests.needs import missing

        missing("transformers", "pip install -e '.[transformers]'")


def test_builds_from_config_defaults_with_overrides(transformers, monkeypatch):
    import torch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = LibraryModel("transformers:MobileViTModel?image_size=64&num_channels=3")
    a, b = model.build(), model.build()
    assert a.example_inputs[0].shape == (1, 3, 64, 64)
    with torch.no_grad():
        out_a, out_b = a.module(*a.example_inputs), b.module(*b.example_inputs)
    assert all(isinstance(t, torch.Tensor) for t in out_a)
    assert torch.equal(out_a[0], out_b[0])          # seeded weights and inputs
    # Not transformers' training init, whose output here is ~1e-39 (denormals).
    assert float(out_a[0].abs().max()) > 1e-3


@pytest.mark.parametrize("spec, line", [
    ("transformers:NoSuchModel", "has no model class 'NoSuchModel'"),
    ("transformers:MobileViTModel?no_such=1", "MobileViTConfig has no setting 'no_such'"),
    ("transformers:MobileViTModel?image_size=big", "image_size='big' is not a int"),
    ("transformers:BertModel", "only image models"),
])
def test_bad_specs_are_one_line(transformers, spec, line):
    with pytest.raises(LibraryModelError, match=line):
        LibraryModel(spec).build()


def test_source_digest_follows_the_spec():
    assert LibraryModel("transformers:A?x=1").source_digest() != \
        LibraryModel("transformers:A?x=2").source_digest()


def test_the_zoo_mobilevit_is_the_library_model(transformers, monkeypatch):
    from pytest_sme2_models import get_model
    from pytest_sme2_models.mobilevit import SPEC

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert SPEC == "transformers:MobileViTModel?image_size=128"
    built = get_model("mobilevit_small").build()
    assert built.example_inputs[0].shape == (1, 3, 128, 128)
    assert sum(p.numel() for p in built.module.parameters()) == 4_937_632
