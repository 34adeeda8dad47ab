"""``executorch:NAME?k=v``: models from ExecuTorch's own examples (``executorch.examples.models``)
as a model library, like ``transformers:``. Random seeded weights, nothing downloaded:

- ``executorch:llama?dim=…&n_layers=…``: ExecuTorch's Llama from its params
  (:mod:`pytest_sme2.programs.llm.llama`; the keys of ``export_llama``'s ``params.json`` plus
  ``max_seq_len``, ``seed``, ``prompt_tokens``). An LLM: its dtypes are the LLM schemes.
- ``executorch:efficient_sam``: the EfficientSAM ViT-T of the examples registry
  (``build_efficient_sam(encoder_patch_embed_dim=192, encoder_num_heads=3, checkpoint=None)``:
  the example's own builder downloads a checkpoint). 10.2M parameters, 1024x1024 input; fp32
  export ~38 s and 41 MB, one run ~2.5 s on a 2-core x86 host: heavy, never in a default
  matrix.

- ``executorch:NAME`` for the registry's entries that build with no download
  (:data:`REGISTRY_MODELS`: the toy modules and the MLPerf Tiny models).

Which other entries of ExecuTorch's registry import beside this torch, and why the rest are
not offered: docs/model-libraries.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.llm.llama import LlamaShape, build_llama, typed_params
from pytest_sme2.programs.registry import ModelDef

SEED = 0


class ExecutorchModelError(Sme2Error):
    pass


@dataclass(frozen=True)
class ExecutorchModel:
    name: str
    build: Callable[[list[tuple[str, str]], str], Any]   # (overrides, spec text) -> ModelDef
    description: str
    llm: bool = False
    heavy: bool = False


def _llama(overrides: list[tuple[str, str]], text: str):
    params = typed_params(overrides, text)
    try:
        return build_llama(LlamaShape(**params))
    except ValueError as e:
        raise ExecutorchModelError(f"{text}: {e}") from None


def _efficient_sam(overrides: list[tuple[str, str]], text: str):
    import torch  # torch: only building the model needs it
    from executorch.examples.models.efficient_sam.efficient_sam_core.efficient_sam import \
        build_efficient_sam  # executorch: only building the model needs it

    if overrides:
        raise ExecutorchModelError(f"{text}: efficient_sam takes no settings (it is the "
                                   "examples registry's ViT-T: patch dim 192, 3 heads)")
    torch.manual_seed(SEED)
    module = build_efficient_sam(encoder_patch_embed_dim=192, encoder_num_heads=3,
                                 checkpoint=None).eval()
    gen = torch.Generator().manual_seed(SEED)

    def inputs():
        # The example's own inputs (EfficientSAM.get_example_inputs): an image, one point.
        return (torch.randn((1, 3, 1024, 1024), generator=gen),
                torch.rand((1, 1, 1, 2), generator=gen) * torch.tensor([1024, 1024]),
                torch.ones((1, 1, 1)))

    return ModelDef(module=module, example_inputs=inputs(), calibration_inputs=[inputs()])


# Entries of ExecuTorch's examples registry (``MODEL_NAME_TO_MODEL``) that import beside this
# torch and build with random weights and no download: their own class, ``get_eager_model()``
# and ``get_example_inputs()``, seeded. (lstm is left out: its inputs hold a tuple (h, c), and
# the runners feed flat tensors.)
REGISTRY_MODELS = ("mul", "linear", "add", "add_mul", "softmax", "conv1d", "sdpa",
                   "deep_autoencoder", "ds_cnn", "mobilenet_v1_025", "resnet8")


def _registry_model(name: str):
    def build(overrides: list[tuple[str, str]], text: str):
        import torch  # torch: only building the model needs it
        from executorch.examples.models import MODEL_NAME_TO_MODEL  # executorch: building only

        if overrides:
            raise ExecutorchModelError(f"{text}: {name} takes no settings")
        module_name, class_name = MODEL_NAME_TO_MODEL[name]
        torch.manual_seed(SEED)
        example = getattr(importlib.import_module(f"executorch.examples.models.{module_name}"),
                          class_name)()
        module = example.get_eager_model().eval()
        inputs = tuple(example.get_example_inputs())
        return ModelDef(module=module, example_inputs=inputs, calibration_inputs=[inputs])

    return build


MODELS: dict[str, ExecutorchModel] = {m.name: m for m in (
    ExecutorchModel("llama", _llama, "ExecuTorch's Llama from params, static KV cache (an LLM)",
                    llm=True),
    ExecutorchModel("efficient_sam", _efficient_sam,
                    "EfficientSAM ViT-T, 10.2M params, 1024x1024 (heavy: ~40 s export, "
                    "~2.5 s a run on the host)", heavy=True),
    *(ExecutorchModel(name, _registry_model(name), f"examples registry: {name}")
      for name in REGISTRY_MODELS),
)}


def executorch_model(name: str, text: str | None = None) -> ExecutorchModel:
    """The entry for ``executorch:NAME``; an unknown name is one line listing the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise ExecutorchModelError(
            f"{text or 'executorch:' + name}: unknown ExecuTorch example {name!r}; known: "
            f"{', '.join(MODELS)} (others of executorch.examples.models: see "
            "docs/model-libraries.md)") from None


def build(name: str, overrides: list[tuple[str, str]], text: str):
    """The :class:`~pytest_sme2_models.ModelDef` of ``executorch:NAME?overrides`` (executorch
    is pytest-sme2's own requirement: always there)."""
    return executorch_model(name, text).build(list(overrides), text)
