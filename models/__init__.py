"""Models pytest-sme2 can export and benchmark (see :mod:`pytest_sme2_models.registry`).

This folder (``models/`` in the repository) installs as ``pytest_sme2_models``: a top-level
``models`` would collide with the ``models`` package of many user projects."""

if __name__ != "pytest_sme2_models":
    # Imported from the repository's root by its folder name: a second registry would be made,
    # and models registered in one would be unknown to the other.
    raise ImportError(f"{__file__} is the source of pytest_sme2_models: import it as "
                      f"pytest_sme2_models, not as {__name__} (install the project: pip install "
                      "-e .)")

from pytest_sme2.programs.llm_schemes import DEFAULT_SCHEMES
from pytest_sme2_models.registry import (LlmDef, ModelDef, ModelEntry, UnknownModelError,
                                         get_model, register_model, registered_models)

register_model("toy_cnn", "pytest_sme2_models.toy_cnn:build",
               description="small conv/bn/relu/linear net with a residual add and a transpose")
register_model("mobilenet_v3_small", "pytest_sme2_models.mobilenet_v3_small:build",
               description="MobileNetV3-small, torchvision's architecture, 224x224, 2.54M params")
register_model("vit_tiny", "pytest_sme2_models.vit_tiny:build",
               description="small ViT (dim 192, depth 4, 3 heads), 112x112, explicit attention")
register_model("mobilevit_small", "pytest_sme2_models.mobilevit:build",
               description="MobileViT-small from transformers (config defaults, 4.9M params), "
               "128x128; needs pytest-sme2[transformers]")
register_model("tiny_llama", "pytest_sme2_models.tiny_llama:build", llm=True,
               dtypes=DEFAULT_SCHEMES,
               description="ExecuTorch's Llama (dim 64, 2 layers, 4 heads / 2 KV heads, vocab "
               "512, max_seq_len 128), static KV cache, seeded random weights: an LLM")

__all__ = ["LlmDef", "ModelDef", "ModelEntry", "UnknownModelError", "get_model", "register_model",
           "registered_models"]
