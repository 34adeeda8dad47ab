"""The model registry: a model is a name -> a builder returning a :class:`ModelDef`.

Built-in models are registered by ``"module:function"`` target so that looking a name up (and
hashing its source for the export cache) does not import torch. Users register their own from a
``conftest.py`` or their package::

    from pytest_sme2_models import ModelDef, register_model

    @register_model("my_net")
    def build():
        import torch
        return ModelDef(module=MyNet().eval(), example_inputs=(torch.randn(1, 3, 64, 64),))

or through the ``pytest_sme2.models`` entry point group (``name = "pkg.module:build"``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.llm.schemes import DEFAULT_SCHEMES
from pytest_sme2.programs.spec import split_weights

ENTRY_POINT_GROUP = "pytest_sme2.models"


@dataclass
class LlmDef:
    """What makes a built model an LLM program: the constant methods the program carries
    (``get_max_seq_len``, ``use_kv_cache``, ...), the dynamic shapes of ``forward``'s inputs
    (``torch.export``'s ``dynamic_shapes``), the steps the export's verification runs in one
    loaded program (a prefill then a decode step: the KV cache is state carried between them),
    and how to reset that state (zero the KV cache) between eager runs."""

    constant_methods: dict[str, Any]
    dynamic_shapes: Any = None
    verify_inputs: list[tuple] = field(default_factory=list)
    reset: Callable[[], None] | None = None


@dataclass
class ModelDef:
    """What a builder returns: the eager module (eval mode, seeded weights), the example inputs
    used for export and correctness checks, and calibration batches for static int8. ``llm``:
    set for a language model (its dtype axis is then the LLM schemes,
    :mod:`pytest_sme2.programs.llm.schemes`)."""

    module: Any
    example_inputs: tuple
    calibration_inputs: list[tuple] | None = None
    llm: LlmDef | None = None


@dataclass(frozen=True)
class ModelEntry:
    name: str
    target: str | Callable[..., ModelDef]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # A language model: measured as a generation, its dtype axis the LLM schemes. Known
    # without building it (no torch import).
    llm: bool = False
    # The dtypes (for an LLM: schemes) the matrix uses for it when none are asked for; empty:
    # the session's default dtypes.
    dtypes: tuple[str, ...] = ()
    # Costly to export or run (minutes): never in a default matrix, asked for by name.
    heavy: bool = False

    def builder(self) -> Callable[..., ModelDef]:
        if callable(self.target):
            return self.target
        module_name, _, func = self.target.partition(":")
        try:
            return getattr(importlib.import_module(module_name), func)
        except (ImportError, AttributeError) as e:
            raise Sme2Error(f"model {self.name!r}: cannot load builder {self.target!r} "
                            f"({e})") from None

    def build(self) -> ModelDef:
        return self.builder()(**self.kwargs)

    def source_file(self) -> Path | None:
        """The file defining the builder, found without importing it when given by name."""
        if callable(self.target):
            src = inspect.getsourcefile(self.target)
            return Path(src) if src else None
        spec = importlib.util.find_spec(self.target.partition(":")[0])
        return Path(spec.origin) if spec and spec.origin else None

    def source_digest(self) -> str:
        """Hash of the builder's source file and arguments: part of the export cache key."""
        h = hashlib.sha256(repr(sorted(self.kwargs.items())).encode())
        src = self.source_file()
        h.update(src.read_bytes() if src and src.exists() else repr(self.target).encode())
        return h.hexdigest()


class UnknownModelError(Sme2Error):
    pass


_REGISTRY: dict[str, ModelEntry] = {}
_entry_points_loaded = False


def register_model(name: str, target: str | Callable[..., ModelDef] | None = None, *,
                   description: str = "", llm: bool = False, dtypes: tuple[str, ...] = (),
                   heavy: bool = False, **kwargs: Any):
    """Register ``name``. Use as ``register_model(name, "pkg.mod:build")``, as
    ``register_model(name, build_fn)`` or as a decorator ``@register_model(name)``.
    Re-registering a name replaces it (a user may override a built-in). ``llm=True``: a
    language model (its builder sets ``ModelDef.llm``); ``dtypes``: its default dtype axis."""

    def add(t: str | Callable[..., ModelDef]):
        _REGISTRY[name] = ModelEntry(name, t, dict(kwargs), description, llm, tuple(dtypes),
                                     heavy)
        return t

    if target is None:
        return add
    add(target)
    return target


# The built-in models (this repository's models/, installed as pytest_sme2_models), by name:
# the zoo is imported only when one is built, so the core never imports it.
register_model("toy_cnn", "pytest_sme2_models.toy_cnn:build",
               description="small conv/bn/relu/linear net with a residual add and a transpose")
register_model("mobilenet_v3_small", "pytest_sme2_models.mobilenet_v3_small:build",
               description="MobileNetV3-small, torchvision's architecture, 224x224, 2.54M params")
register_model("vit_tiny", "pytest_sme2_models.vit_tiny:build",
               description="small ViT (dim 192, depth 4, 3 heads), 112x112, explicit attention")
register_model("mobilevit_small", "pytest_sme2_models.mobilevit:build",
               description="MobileViT-small from transformers (config defaults, 4.9M params), "
               "128x128; needs pytest-sme2[transformers]")
# Timed around every block to tell the machine's speed (pytest_sme2.analysis.machine_state).
register_model("machine_probe", "pytest_sme2_models.machine_probe:build",
               description="the machine-state probe's workload (a fixed 16x128x128 fp32 GEMM), "
               "timed around every block; not a benchmark")
register_model("tiny_llama", "pytest_sme2_models.tiny_llama:build", llm=True,
               dtypes=DEFAULT_SCHEMES,
               description="ExecuTorch's Llama (dim 64, 2 layers, 4 heads / 2 KV heads, vocab "
               "512, max_seq_len 128), static KV cache, seeded random weights, ExecuTorch's "
               "custom SDPA and KV-cache ops (export_llama --use_sdpa_with_kv_cache): an LLM")
register_model("tiny_llama_plain", "pytest_sme2_models.tiny_llama:build", llm=True,
               dtypes=DEFAULT_SCHEMES, attention="plain",
               description="tiny_llama's weights with plain attention (aten SDPA over the "
               "whole static KV cache; export_llama -kv alone): runs on every device")


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _REGISTRY.setdefault(ep.name, ModelEntry(ep.name, ep.value))


def registered_models() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)


def get_model(name: str) -> ModelEntry:
    """The registered model ``name`` (a ``?weights=`` choice after it is the export's)."""
    _load_entry_points()
    try:
        return _REGISTRY[split_weights(name)[0]]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; registered models: {', '.join(registered_models())} "
            "(register your own with pytest_sme2_models.register_model)") from None
