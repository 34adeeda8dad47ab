"""``transformers:XForCausalLM?k=v``: a transformers causal LM as an LLM program, built from a
small config (seeded random weights, nothing fetched), with transformers' own static KV cache
(``transformers.integrations.executorch.TorchExportableModuleWithStaticCache``, the recipe
optimum-executorch uses) behind the same ``forward(tokens[1, n] int64, input_pos[1] int64)``
-> last position's logits ``[1, vocab]`` as ExecuTorch's Llama, and the same constant methods.

Measured with transformers 5.24 (2026-11-27): ``LlamaForCausalLM`` and ``Qwen3ForCausalLM``
export (strict ``torch.export``, dynamic sequence length), lower to XNNPACK and match eager
within 1e-6 over a prefill and a decode step.

A config's defaults are a full-size model (Llama's: 4096 wide, 32 layers): unless overridden,
the settings below make it tiny_llama's size. ``max_seq_len`` (the KV cache length),
``prompt_tokens`` (the verification's prefill) and ``seed`` are ours, not the config's.
"""

from __future__ import annotations

from typing import Any

from pytest_sme2.programs.llm.llama import constant_methods, reset_kv_cache
from pytest_sme2.programs.registry import LlmDef, ModelDef

SMALL = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16}
OURS = {"max_seq_len": 128, "prompt_tokens": 16, "seed": 0}


def is_causal_lm(class_name: str) -> bool:
    return class_name.endswith("ForCausalLM")


def _adapter_class():
    import torch  # torch: only building the model needs it
    from transformers.integrations.executorch import (  # transformers: building only
        TorchExportableModuleWithStaticCache)

    class TokensAndPos(torch.nn.Module):
        """``forward(tokens, input_pos)`` over transformers' static-cache module: it sets the
        cache's write position from ``input_pos[0]`` on every call (so a new generation starts
        over at 0), and the last position's logits are returned, like ExecuTorch's Llama."""

        def __init__(self, model, max_cache_len: int):
            super().__init__()
            self.inner = TorchExportableModuleWithStaticCache(model, batch_size=1,
                                                              max_cache_len=max_cache_len)

        def forward(self, tokens, input_pos):
            return self.inner(input_ids=tokens, cache_position=input_pos)[:, -1, :]

    return TokensAndPos


def build(cls, config_class, overrides: dict[str, Any], ours: dict[str, Any], text: str):
    """The :class:`~pytest_sme2_models.ModelDef` of ``cls`` (a ``...ForCausalLM``)."""
    import torch  # torch: only building the model needs it

    settings = {k: v for k, v in SMALL.items() if hasattr(config_class(), k)}
    settings.update(overrides)
    params = {**OURS, **ours}
    max_seq_len, prompt_tokens = int(params["max_seq_len"]), int(params["prompt_tokens"])
    settings.setdefault("max_position_embeddings", max_seq_len)
    config = config_class(**settings)
    config.use_cache = True
    torch.manual_seed(int(params["seed"]))
    model = cls(config).eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    module = _adapter_class()(model, max_seq_len).eval()

    vocab = config.vocab_size
    gen = torch.Generator().manual_seed(int(params["seed"]))
    prefill = (torch.randint(0, vocab, (1, prompt_tokens), generator=gen),
               torch.tensor([0], dtype=torch.long))
    decode = (torch.randint(0, vocab, (1, 1), generator=gen),
              torch.tensor([prompt_tokens], dtype=torch.long))
    llm = LlmDef(constant_methods=constant_methods(max_seq_len, max_seq_len, vocab,
                                                   config.num_hidden_layers),
                 dynamic_shapes=({1: torch.export.Dim("token_dim", max=max_seq_len - 1)},
                                 {0: 1}),
                 verify_inputs=[prefill, decode], reset=lambda: reset_kv_cache(module))
    return ModelDef(module=module, example_inputs=prefill, llm=llm)
