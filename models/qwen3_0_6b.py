"""Qwen3-0.6B's shape as ExecuTorch's own Llama (``executorch:llama``) with seeded random
weights: dim 1024, 28 layers, 16 heads of 128 with 8 KV heads, FFN 3072, vocab 151936, RMSNorm
on q and k (ExecuTorch's ``examples/models/qwen3`` config, without its HF RoPE layout and with
the output projection untied: 0.75B parameters, about 3 GB in float32). One execute takes up
to 639 tokens (``max_seq_len`` 640); the KV cache holds 2,176 positions (``max_context_len``):
a depth of 2,048 before a 64-token prompt and 32 new tokens.

:data:`SPEC` is ExecuTorch's production attention (custom SDPA and KV-cache operators,
``export_llama --use_sdpa_with_kv_cache``), :data:`PLAIN_SPEC` the same weights with plain
attention (aten SDPA over the whole cache): the difference between the two is the attention.

Not registered and in no default matrix: one export takes minutes and GBs of memory
(docs/measurements/llm-0.6b.md). Ask for it by its spec, :data:`SPEC`, in
``--sme2-llm-models`` (tests/long/test_llm_0_6b.py and evaluations/llm_0_6b.py do).
"""

from __future__ import annotations

PARAMS = {"dim": 1024, "n_layers": 28, "n_heads": 16, "n_kv_heads": 8, "head_dim": 128,
          "hidden_dim": 3072, "vocab_size": 151936, "norm_eps": 1e-6, "use_qk_norm": 1,
          "max_seq_len": 640, "max_context_len": 2176}
SPEC = "executorch:llama?" + "&".join(f"{k}={v}" for k, v in PARAMS.items())
PLAIN_SPEC = SPEC + "&attention=plain"
# The schemes measured (ExecuTorch's Qwen3 recipe is 8da4w; 8da8w runs SME2 kernels).
SCHEMES = ("8da8w", "8da4w")
