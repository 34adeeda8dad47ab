"""Models pytest-sme2 can export and benchmark (see :mod:`models.registry`)."""

from models.registry import (ModelDef, ModelEntry, UnknownModelError, get_model, register_model,
                             registered_models)

register_model("toy_cnn", "models.toy_cnn:build",
               description="small conv/bn/relu/linear net with a residual add and a transpose")
register_model("mobilenet_v3_small", "models.mobilenet_v3_small:build",
               description="MobileNetV3-small, torchvision's architecture, 224x224, 2.54M params")
register_model("vit_tiny", "models.vit_tiny:build",
               description="small ViT (dim 192, depth 4, 3 heads), 112x112, explicit attention")

__all__ = ["ModelDef", "ModelEntry", "UnknownModelError", "get_model", "register_model",
           "registered_models"]
