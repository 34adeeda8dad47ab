"""Models pytest-sme2 can export and benchmark (see :mod:`models.registry`)."""

from models.registry import (ModelDef, ModelEntry, UnknownModelError, get_model, register_model,
                             registered_models)

register_model("toy_cnn", "models.toy_cnn:build",
               description="small conv/bn/relu/linear net with a residual add and a transpose")

__all__ = ["ModelDef", "ModelEntry", "UnknownModelError", "get_model", "register_model",
           "registered_models"]
