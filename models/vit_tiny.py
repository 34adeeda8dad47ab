"""vit_tiny: a small vision transformer (ViT-Ti widths: dim 192, 3 heads, MLP ratio 4) on a
reduced image and depth so that one fp32 inference takes a few milliseconds on one core.

Conv2d patch embedding, class token and learned position embedding, pre-norm blocks (LayerNorm,
multi-head self-attention, LayerNorm, GELU MLP), final LayerNorm and a linear head on the class
token. Attention is written out with explicit q/k/v slices, reshapes and transposes, two batched
matmuls and a softmax (no ``nn.MultiheadAttention``, no ``scaled_dot_product_attention``), so the
exported graph is GEMM- and transpose-heavy: XNNPACK reports ``Batch Matrix Multiply`` and
``Transpose`` events next to the ``Fully Connected`` ones.
"""

from __future__ import annotations

import torch
from torch import nn

from pytest_sme2.programs.registry import ModelDef


class Attention(nn.Module):
    """Multi-head self-attention spelled out: one qkv projection sliced into q, k, v; per-head
    reshapes and transposes to (batch * heads, tokens, head_dim); two ``torch.bmm`` and a softmax.

    Written so every op has an XNNPACK lowering: 3-D ``bmm`` (a 4-D ``matmul`` decomposes with
    ``expand_copy`` ops that stay portable), slices rather than ``qkv[0]`` indexing
    (``select_copy`` stays portable), and the 1/sqrt(head_dim) scale as a non-persistent buffer (a
    Python scalar becomes an fp32 constant whose cast stays outside the delegate in fp16)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.head_dim = dim // heads
        self.register_buffer("scale", torch.tensor(self.head_dim ** -0.5), persistent=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _split_heads(self, t: torch.Tensor, b: int, n: int) -> torch.Tensor:
        # (b, n, dim) -> (b, n, heads, head_dim) -> (b, heads, n, head_dim) -> (b*heads, n, hd)
        t = t.reshape(b, n, self.heads, self.head_dim).transpose(1, 2)
        return t.reshape(b * self.heads, n, self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x)                                        # (b, n, 3 * dim)
        q = self._split_heads(qkv[:, :, :c], b, n)
        k = self._split_heads(qkv[:, :, c:2 * c], b, n)
        v = self._split_heads(qkv[:, :, 2 * c:], b, n)
        attn = torch.bmm(q * self.scale, k.transpose(1, 2))     # (b*heads, n, n)
        attn = attn.softmax(dim=-1)
        out = torch.bmm(attn, v)                                 # (b*heads, n, head_dim)
        out = out.reshape(b, self.heads, n, self.head_dim).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, image: int, patch: int, dim: int, channels: int = 3):
        super().__init__()
        if image % patch:
            raise ValueError(f"image size {image} is not a multiple of patch size {patch}")
        self.num_patches = (image // patch) ** 2
        self.proj = nn.Conv2d(channels, dim, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)          # (b, patches, dim)


class VisionTransformer(nn.Module):
    def __init__(self, image: int = 112, patch: int = 16, dim: int = 192, depth: int = 4,
                 heads: int = 3, mlp_ratio: float = 4.0, num_classes: int = 1000):
        super().__init__()
        self.patch_embed = PatchEmbed(image, patch, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads, mlp_ratio) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        b = x.shape[0]
        # expand_copy has no XNNPACK lowering; at batch 1 (the exported shape) it is a no-op.
        cls = self.cls_token if b == 1 else self.cls_token.expand(b, -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.blocks(x)
        x = self.norm(x)
        return self.head(x[:, :1].reshape(b, -1))               # the class token (a slice)


def build(seed: int = 0, image: int = 112, patch: int = 16, dim: int = 192, depth: int = 4,
          heads: int = 3, mlp_ratio: float = 4.0) -> ModelDef:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = VisionTransformer(image, patch, dim, depth, heads, mlp_ratio).eval()
    example = (torch.randn(1, 3, image, image, generator=gen),)
    calibration = [(torch.randn(1, 3, image, image, generator=gen),) for _ in range(8)]
    return ModelDef(model, example, calibration)
