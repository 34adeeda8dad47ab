"""The two attention forms of one ExecuTorch Llama, by name: ``tiny_llama`` (ExecuTorch's
custom SDPA, the default) and ``tiny_llama_plain``; ``executorch:llama?…`` and the same spec
with ``attention=plain``. Both hold the same seeded weights (:mod:`.llama` draws them before it
swaps the attention), so two rows of a session that differ only in form differ only in the
attention. Pure names: no torch, no export."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl

ZOO_PLAIN = {"tiny_llama": "tiny_llama_plain"}   # a zoo LLM -> its plain-attention twin
LLAMA = "executorch:llama"
ATTENTION_NOTE = ("attention: {custom} runs ExecuTorch's custom SDPA and KV-cache operators "
                  "(llama::custom_sdpa, llama::update_cache: a decode step attends to the "
                  "filled positions), {plain} plain attention (aten SDPA over its whole "
                  "static KV cache at every step); the same weights, so the difference "
                  "between their rows is the attention implementation")


def _llama_params(model: str) -> dict[str, str] | None:
    if model != LLAMA and not model.startswith(LLAMA + "?"):
        return None
    return dict(parse_qsl(model.partition("?")[2], keep_blank_values=True))


def attention_of(model: str) -> str | None:
    """``custom_sdpa`` or ``plain`` for a zoo or ``executorch:llama`` name; None: not one."""
    if model in ZOO_PLAIN:
        return "custom_sdpa"
    if model in ZOO_PLAIN.values():
        return "plain"
    params = _llama_params(model)
    return None if params is None else params.get("attention", "custom_sdpa")


def same_weights(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one model in two forms (or one form twice)."""
    if {a, b} <= {*ZOO_PLAIN, *ZOO_PLAIN.values()}:
        return ZOO_PLAIN.get(a, a) == ZOO_PLAIN.get(b, b)
    pa, pb = _llama_params(a), _llama_params(b)
    if pa is None or pb is None:
        return False
    pa.pop("attention", None)
    pb.pop("attention", None)
    return pa == pb


def pairs_of_forms(models: Iterable[str]) -> list[tuple[str, str]]:
    """(custom-SDPA name, plain name) for each model among ``models`` present in both forms."""
    names = sorted(set(models))
    custom = [m for m in names if attention_of(m) == "custom_sdpa"]
    plain = [m for m in names if attention_of(m) == "plain"]
    return [(c, p) for c in custom for p in plain if same_weights(c, p)]
