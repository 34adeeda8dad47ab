"""Models pytest-sme2 can export and benchmark (registered in :mod:`pytest_sme2.programs.registry`;
the registry's names are re-exported here).

This folder (``models/`` in the repository) installs as ``pytest_sme2_models``: a top-level
``models`` would collide with the ``models`` package of many user projects."""

if __name__ != "pytest_sme2_models":
    # Imported from the repository's root by its folder name: the built-in models are
    # registered as pytest_sme2_models.*, and a user's own `models` package would be shadowed.
    raise ImportError(f"{__file__} is the source of pytest_sme2_models: import it as "
                      f"pytest_sme2_models, not as {__name__} (install the project: pip install "
                      "-e .)")

from pytest_sme2.programs.registry import (LlmDef, ModelDef, ModelEntry, UnknownModelError,
                                           get_model, register_model, registered_models)

__all__ = ["LlmDef", "ModelDef", "ModelEntry", "UnknownModelError", "get_model", "register_model",
           "registered_models"]
