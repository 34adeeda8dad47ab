"""A model library's architecture as a model, without a builder: ``transformers:MobileViTModel``
is the library's own class built from its config class's defaults (``?image_size=128``
overrides one), with seeded random weights and nothing fetched from a hub.

transformers is the library that installs beside ``torch==2.13.0`` here (extra
``pytest-sme2[transformers]``). torchvision and timm are accepted where they import; PyPI's
torchvision is a CUDA build whose ``import`` fails beside the CPU torch, and timm needs it: one
line says so, and nothing is changed in the user's torch.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs import executorch_models
from pytest_sme2.programs.llm import causal_lm
from pytest_sme2.programs.llm.schemes import DEFAULT_SCHEMES
from pytest_sme2.programs.registry import ModelDef, get_model
from pytest_sme2.programs.spec import LibrarySpec, is_library, split_weights
from pytest_sme2._util.versions import package_version

SEED = 0
EXTRA = {"transformers": "pip install 'pytest-sme2[transformers]'",
         "torchvision": "pip install torchvision (a CPU build matching your torch)",
         "timm": "pip install timm (it needs torchvision for your torch)",
         "executorch": "pip install executorch"}


class LibraryModelError(Sme2Error):
    pass


def import_library(library: str) -> Any:
    """The library module, or one line naming what to install (or why it cannot import)."""
    try:
        return importlib.import_module(library)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == library:
            raise LibraryModelError(f"{library}: not installed; {EXTRA[library]}") from None
        raise LibraryModelError(f"{library} does not import: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. torchvision's CUDA build beside a CPU torch
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise LibraryModelError(f"{library} is installed but does not import beside torch "
                                f"{package_version('torch')}: {first} (it needs a build "
                                "made for this torch; pytest-sme2 will not replace yours)"
                                ) from None


def _typed(default: Any, key: str, text: str, spec: str) -> Any:
    """An override's text as the type of the config's default (JSON for lists and numbers)."""
    if isinstance(default, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise LibraryModelError(f"{spec}: {key}={text!r} must be true or false")
        return text.lower() in ("true", "1")
    if isinstance(default, str) or default is None:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        raise LibraryModelError(f"{spec}: {key}={text!r} is not a {type(default).__name__} "
                                f"like the default {default!r}") from None
    return float(value) if isinstance(default, float) and isinstance(value, int) else value


def _tensor_outputs_class():
    import torch  # torch: only building the model needs it

    class TensorOutputs(torch.nn.Module):
        """The library model with plain tensor outputs (its ModelOutput as a tuple):
        ExecuTorch programs return tensors."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values, return_dict=False)
            return tuple(t for t in out if isinstance(t, torch.Tensor))

    return TensorOutputs


def _TensorOutputs(model):  # noqa: N802 - the class is made on first use (it imports torch)
    return _tensor_outputs_class()(model)


def _reset_parameters(model) -> None:
    """PyTorch's own default initialisation for every layer that has one (seeded by the
    caller). transformers' ``_init_weights`` draws BatchNorm scales from N(0, 0.02) (made for
    training from a checkpoint): MobileViT's activations then shrink ~50x per block and its
    output is ~1e-39, all denormals, against which no output comparison means anything."""
    for module in model.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()


def _transformers_model(spec: LibrarySpec, text: str):
    import torch  # torch: only building the model needs it

    lib = import_library("transformers")
    cls = getattr(lib, spec.name, None)
    config_class = getattr(cls, "config_class", None)
    if cls is None or config_class is None:
        raise LibraryModelError(f"{text}: transformers {package_version('transformers')} has no "
                                f"model class {spec.name!r} (e.g. MobileViTModel, "
                                "EfficientNetModel, LevitModel, SwiftFormerModel)")
    defaults = config_class()
    overrides, ours = {}, {}
    is_lm = causal_lm.is_causal_lm(spec.name)
    for key, value in spec.overrides:
        if is_lm and key in causal_lm.OURS:
            ours[key] = _typed(causal_lm.OURS[key], key, value, text)
            continue
        if not hasattr(defaults, key):
            raise LibraryModelError(f"{text}: {config_class.__name__} has no setting {key!r}")
        overrides[key] = _typed(getattr(defaults, key), key, value, text)
    if is_lm:
        return causal_lm.build(cls, config_class, overrides, ours, text), None
    config = config_class(**overrides)
    if not hasattr(config, "image_size") or not hasattr(config, "num_channels"):
        raise LibraryModelError(f"{text}: only image models (a config with image_size and "
                                "num_channels) and causal LMs (...ForCausalLM) can be built by "
                                "name; register a builder for others "
                                "(pytest_sme2_models.register_model)")
    torch.manual_seed(SEED)
    model = cls(config)
    _reset_parameters(model)
    model.eval()
    size = config.image_size if isinstance(config.image_size, (list, tuple)) else \
        (config.image_size, config.image_size)
    return _TensorOutputs(model), (1, config.num_channels, *size)


def _vision_factory_model(spec: LibrarySpec, text: str):
    """torchvision.models / timm: the factory's own defaults, no weights."""
    lib = import_library(spec.library)
    kwargs = {k: _typed(0, k, v, text) if v.lstrip("-").isdigit() else v
              for k, v in spec.overrides}
    if spec.library == "timm":
        model = lib.create_model(spec.name, pretrained=False, **kwargs)
    else:
        factory = getattr(lib.models, spec.name, None)
        if factory is None:
            raise LibraryModelError(f"{text}: torchvision.models has no {spec.name!r}")
        model = factory(weights=None, **kwargs)
    return model.eval(), (1, 3, 224, 224)


@dataclass(frozen=True)
class LibraryModel:
    """What the export needs of a model (:meth:`build`, :meth:`source_digest`), for a
    ``library:Name?key=value`` spec."""

    name: str

    @property
    def spec(self) -> LibrarySpec:
        return LibrarySpec.parse(self.name)

    @property
    def llm(self) -> bool:
        """A language model (``executorch:llama``, ``transformers:...ForCausalLM``): known from
        the spec, nothing built."""
        spec = self.spec
        if spec.library == "transformers":
            return causal_lm.is_causal_lm(spec.name)
        if spec.library != "executorch":
            return False
        return executorch_models.executorch_model(spec.name, self.name).llm

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Its default dtype axis: an LLM's schemes; empty: the session's dtypes."""
        return DEFAULT_SCHEMES if self.llm else ()

    @property
    def heavy(self) -> bool:
        spec = self.spec
        if spec.library != "executorch":
            return False
        return executorch_models.executorch_model(spec.name, self.name).heavy

    def build(self):
        import torch  # torch: only building the model needs it

        spec = self.spec
        if spec.library == "executorch":
            return executorch_models.build(spec.name, list(spec.overrides), self.name)
        make = _transformers_model if spec.library == "transformers" else _vision_factory_model
        module, shape = make(spec, self.name)
        if shape is None:           # a causal LM: its ModelDef, with its LLM program facts
            return module
        generator = torch.Generator().manual_seed(SEED)
        example = (torch.randn(*shape, generator=generator),)
        calibration = [(torch.randn(*shape, generator=generator),) for _ in range(4)]
        return ModelDef(module=module, example_inputs=example, calibration_inputs=calibration)

    def source_digest(self) -> str:
        """The spec, the library's version and this file: what makes the model (export key)."""
        h = hashlib.sha256(self.name.encode())
        h.update(package_version(self.spec.library).encode())
        h.update(Path(__file__).read_bytes())
        if self.spec.library == "executorch":
            h.update(Path(executorch_models.__file__).read_bytes())
        if self.llm and self.spec.library == "transformers":
            h.update(Path(causal_lm.__file__).read_bytes())
        return h.hexdigest()


def model_entry(model: str):
    """The registry entry of ``model``, or a :class:`LibraryModel` for a library spec (its
    ``weights=`` choice is the export's, not the model's: :func:`~.spec.split_weights`)."""
    model = split_weights(model)[0]
    if is_library(model):
        return LibraryModel(model)
    return get_model(model)
