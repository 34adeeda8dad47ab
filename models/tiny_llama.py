"""tiny_llama: ExecuTorch's own Llama (``executorch.examples.models.llama``) far smaller than
stories15M (dim 64, 2 layers, 4 heads with 2 KV heads, vocab 512, max_seq_len 128; ~0.1M
parameters), seeded random weights: an LLM that exports in each scheme in CI time. The same
model is ``executorch:llama`` (its defaults); ``executorch:llama?dim=288&n_layers=6&n_heads=6&
vocab_size=32000`` is stories15M's shape."""

from __future__ import annotations


def build(**params):
    from pytest_sme2.programs.llm.llama import LlamaShape, build_llama

    return build_llama(LlamaShape(**params))
