"""ExecuTorch's own Llama (``executorch.examples.models.llama``) as a model: model args, a
``Transformer`` with a static KV cache held in mutable buffers, seeded random weights, nothing
downloaded. The program takes ``forward(tokens[1, n] int64, input_pos[1] int64)`` with a
dynamic ``n`` (≤ ``max_seq_len - 1``: one execute prefills a prompt) and returns the last
position's logits ``[1, vocab_size]``, like ``export_llama -kv --max_seq_length L``.

Two attentions (:data:`ATTENTIONS`), the parameter ``attention``:

- ``custom_sdpa`` (the default): ``export_llama -kv --use_sdpa_with_kv_cache``, ExecuTorch's
  production recipe. The KV cache is written by ``llama::update_cache`` and attention is
  ``llama::custom_sdpa``, which attends to the positions filled so far: a step costs more the
  deeper the context. The operators run outside the delegate, from the executorch wheel's
  ``libcustom_ops_aot_lib.so`` (:mod:`pytest_sme2.programs.llm.kernel_libraries`).
- ``plain``: ``-kv`` alone. A masked SDPA of aten operators over the whole static cache at
  every step: a step costs what the cache's length costs, whatever is in it.

The parameters are the ``params.json`` keys of ``export_llama`` plus ``max_seq_len`` (which
``export_llama`` takes as ``--max_seq_length``), ``max_context_len``, ``seed`` and
``attention``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.registry import LlmDef, ModelDef


CUSTOM_SDPA = "custom_sdpa"
PLAIN = "plain"
# The attention of the exported program: its name, what it is (reports and errors say it).
ATTENTIONS: dict[str, str] = {
    CUSTOM_SDPA: "ExecuTorch's custom SDPA and KV-cache operators (llama::custom_sdpa, "
                 "llama::update_cache; export_llama --use_sdpa_with_kv_cache): attends to the "
                 "filled positions",
    PLAIN: "plain attention (aten SDPA with a mask over the whole static KV cache; "
           "export_llama -kv alone)",
}


@dataclass(frozen=True)
class LlamaShape:
    """The model's own parameters and their defaults: stories15M's shape is dim 288, 6
    layers, vocab 32000; these defaults are smaller still (tiny_llama, see
    pytest_sme2_models). ``max_context_len`` None: ``max_seq_len``; ``prompt_tokens``: the
    verification's prefill length."""

    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    vocab_size: int = 512
    multiple_of: int = 32
    norm_eps: float = 1e-5
    max_seq_len: int = 128
    max_context_len: int | None = None
    seed: int = 0
    prompt_tokens: int = 16
    # Qwen3's shape (ExecuTorch's examples/models/qwen3 configs): an FFN width and a head size
    # of their own (None: derived from dim as Llama does) and RMSNorm on q and k (1: on).
    hidden_dim: int | None = None
    head_dim: int | None = None
    use_qk_norm: int = 0
    attention: str = CUSTOM_SDPA    # a key of ATTENTIONS


PARAMS: dict[str, Any] = asdict(LlamaShape())
STR_PARAMS = {"attention": tuple(ATTENTIONS)}    # text parameters and their values
INT_PARAMS = set(PARAMS) - {"norm_eps"} - set(STR_PARAMS)


def constant_methods(max_seq_len: int, max_context_len: int, vocab_size: int,
                     n_layers: int, custom_sdpa: bool = False) -> dict[str, Any]:
    """The constant methods ``export_llama`` writes (``_load_llama_model_metadata``), for a
    KV-cache program with a dynamic sequence length."""
    return {"get_max_seq_len": max_seq_len, "get_max_context_len": max_context_len,
            "get_vocab_size": vocab_size, "get_n_layers": n_layers, "use_kv_cache": True,
            "use_sdpa_with_kv_cache": custom_sdpa, "enable_dynamic_shape": True}


def use_custom_sdpa(transformer) -> None:
    """``export_llama --use_sdpa_with_kv_cache``'s source transforms, in its order
    (``_get_source_transforms``): SDPA first, then the KV cache."""
    from executorch.examples.models.llama.source_transformation import (  # torch: building
        custom_kv_cache, sdpa)

    sdpa.replace_sdpa_with_custom_op(transformer)
    custom_kv_cache.replace_kv_cache_with_custom_kv_cache(transformer)


def _wrapper_class():
    import torch  # torch: only building the model needs it

    class TokensAndPos(torch.nn.Module):
        """``forward(tokens, input_pos)``: the Transformer takes the position in an options
        dict (``{"input_pos": ...}``); the program's flat inputs are the same either way."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, tokens, input_pos):
            return self.model(tokens, {"input_pos": input_pos})

    return TokensAndPos


# KV cache buffers: ExecuTorch's Llama (``...kv_cache.k_cache``) and transformers' static
# cache (``key_cache_0``), also once a graph module holds them (PT2E).
_KV_CACHE = re.compile(r"(^|[._])(k_cache|v_cache|key_cache_\d+|value_cache_\d+)$")


def reset_kv_cache(module) -> None:
    """Zero every KV cache buffer: torch.export takes the buffers' current values as the
    program's initial state, and an eager reference run writes them."""
    import torch  # torch: only a built model has a cache to reset

    with torch.no_grad():
        for name, buf in module.named_buffers():
            if _KV_CACHE.search(name):
                buf.zero_()


def build_llama(shape: LlamaShape = LlamaShape()):
    """A :class:`~pytest_sme2_models.ModelDef` of the Llama of ``shape``: ``example_inputs`` a
    ``prompt_tokens`` prefill at position 0; ``verify_inputs`` that prefill then one decode
    step (the KV cache carried between them, as in a generation)."""
    import torch  # torch: only building the model needs it
    from executorch.examples.models.llama.llama_transformer import (  # executorch: building only
        construct_transformer)
    from executorch.examples.models.llama.model_args import ModelArgs  # executorch: building only

    s = shape
    max_seq_len, prompt_tokens, vocab_size = s.max_seq_len, s.prompt_tokens, s.vocab_size
    max_context_len = s.max_context_len or max_seq_len
    if s.attention not in ATTENTIONS:
        raise ValueError(f"attention={s.attention!r} is none of {', '.join(ATTENTIONS)}")
    custom_sdpa = s.attention == CUSTOM_SDPA
    if not 1 <= prompt_tokens <= max_seq_len - 2:
        raise ValueError(f"prompt_tokens={prompt_tokens} must be 1..max_seq_len-2 "
                         f"({max_seq_len - 2})")
    args = ModelArgs(dim=s.dim, n_layers=s.n_layers, n_heads=s.n_heads, n_kv_heads=s.n_kv_heads,
                     vocab_size=vocab_size, multiple_of=s.multiple_of, norm_eps=s.norm_eps,
                     hidden_dim=s.hidden_dim, head_dim=s.head_dim,
                     use_qk_norm=bool(s.use_qk_norm), qk_norm_before_rope=bool(s.use_qk_norm),
                     max_seq_len=max_seq_len, max_context_len=max_context_len,
                     use_kv_cache=True, enable_dynamic_shape=True,
                     use_sdpa_with_kv_cache_op=custom_sdpa, generate_full_logits=False)
    torch.manual_seed(s.seed)
    transformer = construct_transformer(args)
    if custom_sdpa:     # after the weights are drawn: both forms hold the same weights
        use_custom_sdpa(transformer)
    module = _wrapper_class()(transformer).eval()
    gen = torch.Generator().manual_seed(s.seed)
    prefill = (torch.randint(0, vocab_size, (1, prompt_tokens), generator=gen),
               torch.tensor([0], dtype=torch.long))
    decode = (torch.randint(0, vocab_size, (1, 1), generator=gen),
              torch.tensor([prompt_tokens], dtype=torch.long))
    dynamic = ({1: torch.export.Dim("token_dim", max=max_seq_len - 1)}, {0: 1})
    llm = LlmDef(constant_methods=constant_methods(max_seq_len, max_context_len, vocab_size,
                                                   s.n_layers, custom_sdpa),
                 dynamic_shapes=dynamic, verify_inputs=[prefill, decode],
                 reset=lambda: reset_kv_cache(module))
    return ModelDef(module=module, example_inputs=prefill, llm=llm)


def typed_params(overrides: list[tuple[str, str]], where: str) -> dict[str, Any]:
    """``executorch:llama?dim=128&n_layers=4`` overrides as the builder's arguments; an unknown
    key or a value of the wrong type is one line naming the known ones."""
    out: dict[str, Any] = {}
    for key, text in overrides:
        if key not in PARAMS:
            raise Sme2Error(f"{where}: llama has no parameter {key!r}; known: "
                            f"{', '.join(PARAMS)}")
        if key in STR_PARAMS:
            if text not in STR_PARAMS[key]:
                raise Sme2Error(f"{where}: {key}={text!r} must be one of "
                                f"{', '.join(STR_PARAMS[key])}")
            out[key] = text
            continue
        try:
            out[key] = int(text) if key in INT_PARAMS else float(text)
        except ValueError:
            kind = "an integer" if key in INT_PARAMS else "a number"
            raise Sme2Error(f"{where}: {key}={text!r} must be {kind}") from None
    return out
