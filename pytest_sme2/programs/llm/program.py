"""An LLM program for the generation loop, in one call: the cached, verified export of a model
in a scheme (or a user's ``.pte`` as it is) and the facts its methods give.

    from pytest_sme2.programs.llm.program import llm_program

    program = llm_program("tiny_llama", "8da8w")      # exports once, then a cache hit
    program.pte, program.facts.max_seq_len, program.facts.vocab_size

A model that is not an LLM is one line saying why (nothing measured is lost).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import export_model, is_llm_model
from pytest_sme2.programs.exported import ExportedModel
from pytest_sme2.programs.llm.facts import LLM_MARKERS, LlmFacts, llm_facts
from pytest_sme2.programs.llm.schemes import parse_scheme
from pytest_sme2.programs.spec import is_pte, model_label


class NotAnLlmError(Sme2Error):
    pass


@dataclass(frozen=True)
class LlmProgram:
    exported: ExportedModel
    facts: LlmFacts

    @property
    def pte(self) -> Path:
        return self.exported.pte

    @property
    def scheme(self) -> str:
        """The scheme it was exported in; ``pte`` for a user's program (as exported)."""
        return self.exported.dtype


def llm_program(model: str, scheme: str = "8da8w", cache_dir: Path | None = None,
                progress: Callable[[str], None] | None = None) -> LlmProgram:
    """``model`` (a zoo name, ``executorch:llama?…``, ``transformers:…ForCausalLM`` or a
    ``.pte``) as an LLM program in ``scheme`` (ignored for a ``.pte``)."""
    if not is_pte(model):
        scheme = parse_scheme(scheme).name
        if not is_llm_model(model):
            raise NotAnLlmError(f"{model_label(model)} is not an LLM (its zoo or library entry "
                                "does not say llm); a generation needs one, e.g. tiny_llama")
    exported = export_model(model, scheme, cache_dir, progress=progress)
    facts = llm_facts(exported.pte)
    if facts is None:
        raise NotAnLlmError(f"{model_label(model)} is not an LLM program: it lacks the methods "
                            f"{' and '.join(LLM_MARKERS)} (export it with export_llama -kv, or "
                            "pass its zoo name)")
    return LlmProgram(exported, facts)
