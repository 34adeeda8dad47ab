"""Unit tests for the model registry and the built-in model definitions (no export here)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pytest_sme2_models as models
from pytest_sme2_models import (ModelDef, UnknownModelError, get_model, register_model,
                                registered_models)
from pytest_sme2.programs import registry

BUILTINS = ("toy_cnn", "mobilenet_v3_small", "vit_tiny")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Eager PyTorch with 2 intra-op threads on a busy 2-core machine (or under xdist) spins:
    a 7 ms forward took ~1 s. These tests are tiny; one thread keeps them fast everywhere."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def clean_registry():
    """Let a test register models; drop whatever it added afterwards."""
    before = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before)


@pytest.fixture(scope="module")
def mobilenet() -> ModelDef:
    return get_model("mobilenet_v3_small").build()


def _run(d: ModelDef) -> torch.Tensor:
    with torch.no_grad():
        return d.module(*d.example_inputs)


# --- registry ---------------------------------------------------------------------------------

def test_builtins_registered_by_target_string():
    names = registered_models()
    for name in BUILTINS:
        assert name in names
        entry = get_model(name)
        assert entry.target == f"pytest_sme2_models.{name}:build"
        assert entry.description
        assert callable(entry.builder())
        assert entry.source_file().name == f"{name}.py"
    assert len(get_model("vit_tiny").source_digest()) == 64


def test_unknown_model_lists_registered_names():
    with pytest.raises(UnknownModelError) as info:
        get_model("no_such_net")
    msg = str(info.value)
    assert "'no_such_net'" in msg
    for name in BUILTINS:
        assert name in msg
    assert "register_model" in msg


def test_user_model_via_decorator(clean_registry):
    @register_model("user_linear", description="a user's model", features=4)
    def build(features: int = 2) -> ModelDef:
        torch.manual_seed(0)
        return ModelDef(nn.Linear(features, 3).eval(), (torch.ones(1, features),))

    assert build.__name__ == "build"              # the decorator returns the function unchanged
    entry = get_model("user_linear")
    assert entry.description == "a user's model"
    assert entry.source_file().name == "test_models.py"
    assert _run(entry.build()).shape == (1, 3)    # registered kwargs reach the builder
    assert "user_linear" in registered_models()


def test_user_model_via_callable_and_override(clean_registry):
    def build() -> ModelDef:
        return ModelDef(nn.Identity(), (torch.zeros(2, 2),))

    assert register_model("user_identity", build) is build
    assert get_model("user_identity").build().example_inputs[0].shape == (2, 2)
    register_model("toy_cnn", build)              # a user may replace a built-in
    assert get_model("toy_cnn").target is build


def test_registry_cleanup_restored_builtins():
    assert "user_linear" not in registered_models()
    assert "user_identity" not in registered_models()
    assert get_model("toy_cnn").target == "pytest_sme2_models.toy_cnn:build"


# --- mobilenet_v3_small -----------------------------------------------------------------------

def test_mobilenet_parameter_count(mobilenet):
    assert sum(p.numel() for p in mobilenet.module.parameters()) == 2_542_856


def test_mobilenet_module_tree(mobilenet):
    from pytest_sme2_models.mobilenet_v3_small import InvertedResidual, SqueezeExcitation

    m = mobilenet.module
    assert [name for name, _ in m.named_children()] == ["features", "avgpool", "classifier"]
    assert len(m.features) == 13
    assert sum(isinstance(x, InvertedResidual) for x in m.features) == 11
    assert sum(isinstance(x, SqueezeExcitation) for x in m.modules()) == 9
    assert sum(isinstance(x, nn.Hardsigmoid) for x in m.modules()) == 9
    # stem, expand + depthwise in the 8 HS blocks, last conv, classifier
    assert sum(isinstance(x, nn.Hardswish) for x in m.modules()) == 19
    bn = m.features[0][1]
    assert (bn.eps, bn.momentum) == (0.001, 0.01)
    assert m.classifier[2].p == 0.2
    assert m.classifier[3].out_features == 1000
    assert not m.training
    # torchvision's state-dict naming
    keys = m.state_dict().keys()
    for key in ("features.0.0.weight", "features.1.block.1.fc1.weight",
                "features.4.block.2.fc2.bias", "features.12.1.running_var",
                "classifier.0.weight", "classifier.3.bias"):
        assert key in keys


def test_mobilenet_shapes_and_inputs(mobilenet):
    (x,) = mobilenet.example_inputs
    assert x.shape == (1, 3, 224, 224)
    assert len(mobilenet.calibration_inputs) == 8
    assert all(c[0].shape == (1, 3, 224, 224) for c in mobilenet.calibration_inputs)
    assert not torch.equal(mobilenet.calibration_inputs[0][0], x)
    y = _run(mobilenet)
    assert y.shape == (1, 1000)
    # BatchNorm statistics are calibrated: logits have a usable scale (not ~1e-9)
    assert y.abs().max() > 1e-3
    assert torch.isfinite(y).all()


def test_mobilenet_deterministic():
    from pytest_sme2_models.mobilenet_v3_small import build

    a, b = build(size=64), build(size=64)       # small input: BN calibration is the build cost
    assert torch.equal(a.example_inputs[0], b.example_inputs[0])
    assert all(torch.equal(x[0], y[0]) for x, y in zip(a.calibration_inputs, b.calibration_inputs))
    for (ka, va), (kb, vb) in zip(a.module.state_dict().items(), b.module.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert torch.equal(_run(a), _run(b))
    other = build(seed=1, size=64, calibrate_bn=False)
    assert not torch.equal(other.example_inputs[0], a.example_inputs[0])
    assert not torch.equal(other.module.features[0][0].weight, a.module.features[0][0].weight)


def test_mobilenet_export_friendly_matches_faithful(mobilenet):
    from pytest_sme2_models.mobilenet_v3_small import ClampHardsigmoid, build

    friendly = build(export_friendly=True)
    assert sum(isinstance(x, nn.Hardsigmoid) for x in friendly.module.modules()) == 0
    assert sum(isinstance(x, ClampHardsigmoid) for x in friendly.module.modules()) == 9
    assert friendly.module.state_dict().keys() == mobilenet.module.state_dict().keys()
    assert sum(p.numel() for p in friendly.module.parameters()) == 2_542_856
    assert torch.equal(friendly.example_inputs[0], mobilenet.example_inputs[0])
    torch.testing.assert_close(_run(friendly), _run(mobilenet), rtol=0, atol=1e-6)


def test_clamp_hardsigmoid_equals_hardsigmoid():
    from pytest_sme2_models.mobilenet_v3_small import ClampHardsigmoid

    x = torch.linspace(-8, 8, 4001)
    assert torch.equal(ClampHardsigmoid()(x), nn.Hardsigmoid()(x))
    assert ClampHardsigmoid().state_dict() == {}


def test_mobilenet_size_and_raw_init():
    from pytest_sme2_models.mobilenet_v3_small import build

    d = build(size=96, calibrate_bn=False)
    assert d.example_inputs[0].shape == (1, 3, 96, 96)
    y = _run(d)
    assert y.shape == (1, 1000)
    # torchvision's init with fresh BN buffers: activations vanish (why build calibrates BN)
    assert y.abs().max() < 1e-5


# --- vit_tiny ---------------------------------------------------------------------------------

def test_vit_default_shapes():
    d = get_model("vit_tiny").build()
    assert d.example_inputs[0].shape == (1, 3, 112, 112)
    assert len(d.calibration_inputs) == 8
    assert d.module.pos_embed.shape == (1, 50, 192)
    assert len(d.module.blocks) == 4
    assert d.module.blocks[0].mlp.fc1.out_features == 768
    assert not any(isinstance(m, nn.MultiheadAttention) for m in d.module.modules())
    y = _run(d)
    assert y.shape == (1, 1000)
    assert torch.isfinite(y).all()


def test_vit_configurable_and_deterministic():
    from pytest_sme2_models.vit_tiny import build

    a = build(seed=3, image=32, patch=8, dim=64, depth=2, heads=4, mlp_ratio=2)
    b = build(seed=3, image=32, patch=8, dim=64, depth=2, heads=4, mlp_ratio=2)
    assert a.example_inputs[0].shape == (1, 3, 32, 32)
    assert a.module.pos_embed.shape == (1, 17, 64)
    assert torch.equal(_run(a), _run(b))
    assert _run(a).shape == (1, 1000)
    with torch.no_grad():                          # other batch sizes work in eager
        y2 = a.module(torch.cat([a.example_inputs[0]] * 2))
    assert y2.shape == (2, 1000)
    torch.testing.assert_close(y2[:1], _run(a), rtol=0, atol=1e-5)
    with pytest.raises(ValueError):
        build(image=30, patch=8)
    with pytest.raises(ValueError):
        build(dim=64, heads=3)


def test_vit_attention_matches_sdpa():
    from pytest_sme2_models.vit_tiny import Attention

    torch.manual_seed(0)
    attn = Attention(48, 3).eval()
    x = torch.randn(2, 10, 48)
    with torch.no_grad():
        qkv = attn.qkv(x).reshape(2, 10, 3, 3, 16).permute(2, 0, 3, 1, 4)
        ref = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        ref = attn.proj(ref.transpose(1, 2).reshape(2, 10, 48))
        torch.testing.assert_close(attn(x), ref, rtol=1e-5, atol=1e-6)


def test_models_package_exports():
    assert set(models.__all__) >= {"ModelDef", "register_model", "get_model", "registered_models"}
