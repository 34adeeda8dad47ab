"""What the evaluation scripts share. Importing it puts the repository root on ``sys.path``,
so a script run as ``python evaluations/NAME.py`` reaches ``tests/`` (fakes, the tiny Llama
export) beside the installed package; and the toy model's deeper variant, a change of a size
chosen in advance (:func:`deeper_toy_source`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import pytest_sme2_models

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def comma_list(text: str) -> list[str]:
    """``--models a,b`` and the like: the names between the commas."""
    return text.split(",")


def generation_parser(prompt: int, new: int, warmup: int, several: bool = False,
                      **counts: int) -> argparse.ArgumentParser:
    """The options the LLM evaluations share: ``--pte`` (one, or with ``several`` any number;
    none: the tiny Llama, :func:`tiny_llama_pte`), the generation's ``--prompt`` and ``--new``
    tokens, its ``--warmup`` generations, and each whole number in ``counts`` (``runs=20``:
    ``--runs``, default 20)."""
    p = argparse.ArgumentParser()
    p.add_argument("--pte", type=Path, nargs="*" if several else None)
    p.add_argument("--prompt", type=int, default=prompt)
    p.add_argument("--new", type=int, default=new)
    p.add_argument("--warmup", type=int, default=warmup)
    for name, default in counts.items():
        p.add_argument(f"--{name}", type=int, default=default)
    return p


def tiny_llama_pte(pte: Path | None) -> Path:
    """``pte``, or when none is given the tiny 8da4w Llama from ExecuTorch's export_llama
    (cached: tests/llm_export.py)."""
    if pte is not None:
        return pte
    # torch and executorch's export_llama: only when no .pte is given.
    from tests.llm_export import export_tiny_llama

    return export_tiny_llama("8da4w")


_DEEPER = textwrap.dedent('''


    # --- added by evaluations/_common.py ----------------------------------------------------
    class _Deeper(ToyCNN):
        """ToyCNN with extra (kernel, depthwise) convolutions after the residual block."""

        def __init__(self, channels=16, classes=10, extra=()):
            super().__init__(channels, classes)
            self.extra = nn.Sequential(*[nn.Conv2d(channels, channels, k, padding=k // 2,
                                                   groups=channels if dw else 1)
                                         for k, dw in extra])

        def forward(self, x):
            y = self.stem(x)
            y = torch.relu(y + self.block(y))
            y = self.extra(y)
            y = self.pool(y)
            y = y.transpose(1, 3).flatten(1)
            return self.head(y)


    def build_variant(extra=(), channels=16, size=32, seed=0):
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        model = _Deeper(channels, extra=extra).eval()
        example = (torch.randn(1, 3, size, size, generator=gen),)
        calibration = [(torch.randn(1, 3, size, size, generator=gen),) for _ in range(8)]
        return ModelDef(model, example, calibration)
''')


def toy_source() -> str:
    """The built-in toy model's source file (``models/toy_cnn.py``), as text."""
    return pytest_sme2_models.get_model("toy_cnn").source_file().read_text()


def deeper_toy_source() -> str:
    """The toy model's file with ``build_variant(extra=((kernel, depthwise), ...), channels,
    size, seed)`` appended: ToyCNN with those convolutions after its residual block. Written to
    a module of its own and registered under a name, it is a model whose graph grows by what
    ``extra`` names, for evaluations that need a change of known size."""
    return toy_source() + _DEEPER
