"""Is a program an LLM, and what does it say about itself: read from its methods alone.

A program is an LLM when it has the constant methods ``use_kv_cache`` and ``get_max_seq_len``
(what ExecuTorch's ``export_llama``/``export_llm`` and our own LLM export write). Their values
are stored in the program flatbuffer (a constant method is a plan with no inputs and one
Int/Bool output), so the limits come without loading the program; a value the file does not
give is None, and the runner asks the method itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from pytest_sme2.readers.pte_program import MethodSignature, read_signatures

LLM_MARKERS = ("use_kv_cache", "get_max_seq_len")


@dataclass(frozen=True)
class LlmFacts:
    """What an LLM program's methods say. ``max_seq_len``: the longest ``tokens`` one
    ``forward`` takes is ``max_seq_len - 1`` where the shape is dynamic (export's bound);
    ``max_context_len``: the KV cache's length (prompt plus generated tokens)."""

    methods: tuple[str, ...]
    max_seq_len: int | None = None
    max_context_len: int | None = None
    vocab_size: int | None = None
    n_layers: int | None = None
    use_kv_cache: bool | None = None
    enable_dynamic_shape: bool | None = None
    use_sdpa_with_kv_cache: bool | None = None
    # forward's inputs as (dtype, shape, dynamic): (int64 [1, n] dynamic, int64 [1]) for the
    # (tokens, input_pos) programs the generation loop drives.
    forward_inputs: tuple[tuple[str | None, tuple[int, ...], bool], ...] = ()

    @property
    def takes_tokens_and_pos(self) -> bool:
        """forward(tokens[1, n] int64, input_pos[1] int64)."""
        if len(self.forward_inputs) != 2:
            return False
        (t_dtype, t_shape, _), (p_dtype, p_shape, _) = self.forward_inputs
        return (t_dtype == "int64" and len(t_shape) == 2 and t_shape[0] == 1
                and p_dtype == "int64" and tuple(p_shape) == (1,))


def is_llm_methods(names) -> bool:
    """The rule: an LLM has ``use_kv_cache`` and ``get_max_seq_len``."""
    return all(m in set(names) for m in LLM_MARKERS)


def _int(sig: MethodSignature | None) -> int | None:
    value = sig.constant if sig is not None else None
    return int(value) if isinstance(value, (int, bool)) and not isinstance(value, bool) else None


def _bool(sig: MethodSignature | None) -> bool | None:
    value = sig.constant if sig is not None else None
    return bool(value) if isinstance(value, (bool, int)) else None


def facts_from_methods(methods: Mapping[str, MethodSignature]) -> LlmFacts | None:
    """The facts of a program given its methods (:func:`read_signatures`); None: not an LLM."""
    if not is_llm_methods(methods):
        return None
    forward = methods.get("forward")
    inputs = tuple((i.dtype, tuple(i.shape), i.dynamic) for i in forward.inputs) \
        if forward is not None else ()
    return LlmFacts(
        methods=tuple(sorted(methods)),
        max_seq_len=_int(methods.get("get_max_seq_len")),
        max_context_len=_int(methods.get("get_max_context_len")),
        vocab_size=_int(methods.get("get_vocab_size")),
        n_layers=_int(methods.get("get_n_layers")),
        use_kv_cache=_bool(methods.get("use_kv_cache")),
        enable_dynamic_shape=_bool(methods.get("enable_dynamic_shape")),
        use_sdpa_with_kv_cache=_bool(methods.get("use_sdpa_with_kv_cache")),
        forward_inputs=inputs)


def llm_facts(pte: Path) -> LlmFacts | None:
    """The LLM facts of ``pte``, or None when its methods do not make it an LLM. Reads the
    flatbuffer only (no torch, no executorch): milliseconds."""
    return facts_from_methods(read_signatures(Path(pte)))


def is_llm_program(pte: Path) -> bool:
    return llm_facts(pte) is not None
