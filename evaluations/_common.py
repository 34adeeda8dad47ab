"""What the evaluation scripts share. Importing it puts the repository root on ``sys.path``,
so a script run as ``python evaluations/NAME.py`` reaches ``tests/`` (fakes, the tiny Llama
export) beside the installed package."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def comma_list(text: str) -> list[str]:
    """``--models a,b`` and the like: the names between the commas."""
    return text.split(",")


def tiny_llama_pte(pte: Path | None) -> Path:
    """``pte``, or when none is given the tiny 8da4w Llama from ExecuTorch's export_llama
    (cached: tests/llm_export.py)."""
    if pte is not None:
        return pte
    # torch and executorch's export_llama: only when no .pte is given.
    from tests.llm_export import export_tiny_llama

    return export_tiny_llama("8da4w")
