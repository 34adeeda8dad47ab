"""What a model name means. Three kinds, told apart by their shape alone (no import, no file
access), so the matrix, ids and caches can branch on them early:

- ``path/to/m.pte``: a program someone else exported (:mod:`pytest_sme2.programs.pte`);
- ``transformers:MobileViTModel?image_size=128``: a library architecture built from its
  config's defaults (:mod:`pytest_sme2.programs.library`); ``executorch:llama?dim=128`` one of
  ExecuTorch's own examples (:mod:`pytest_sme2.programs.executorch_models`);
- anything else: a name in the model registry (:mod:`pytest_sme2.programs.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.errors import Sme2Error

PTE_SUFFIX = ".pte"
# The dtype of a .pte case: the file is what it is, the dtype axis does not apply.
AS_EXPORTED = "pte"
LIBRARIES = ("transformers", "torchvision", "timm", "executorch")
# Where an export keeps its weights, chosen per model by ``?weights=ptd`` after a registered
# or library model's name (``toy_cnn?weights=ptd``, ``transformers:X?a=1&weights=ptd``).
WEIGHTS = {"pte": "in the program (the default)",
           "ptd": "in a model.ptd beside the .pte (ExecuTorch's program-data separation)"}
WEIGHTS_KEY = "weights"


def is_pte(model: str) -> bool:
    return model.lower().endswith(PTE_SUFFIX)


def is_library(model: str) -> bool:
    return model.partition(":")[0] in LIBRARIES and ":" in model


@dataclass(frozen=True)
class LibrarySpec:
    """``library:Name?key=value&key=value``: overrides are kept as text and typed by the
    library adapter against the config's own defaults."""

    library: str
    name: str
    overrides: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> LibrarySpec:
        library, _, rest = text.partition(":")
        name, _, query = rest.partition("?")
        if library not in LIBRARIES or not name:
            raise Sme2Error(f"model {text!r}: write library:ClassName, library one of "
                            f"{', '.join(LIBRARIES)} (e.g. transformers:MobileViTModel)")
        pairs = []
        for item in filter(None, query.split("&")):
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise Sme2Error(f"model {text!r}: override {item!r} is not key=value")
            pairs.append((key, value))
        return cls(library, name, tuple(pairs))


def split_weights(model: str) -> tuple[str, str]:
    """``(the model without its weights choice, where its export keeps its weights)``:
    ``toy_cnn?weights=ptd`` -> ``("toy_cnn", "ptd")``; a name without one -> ``(name, "pte")``;
    an unknown choice is one line."""
    name, mark, query = model.partition("?")
    if not mark or is_pte(model):
        return model, "pte"
    items = query.split("&")
    chosen = [v for k, _, v in (i.partition("=") for i in items) if k == WEIGHTS_KEY]
    if not chosen:
        return model, "pte"
    if len(chosen) > 1 or chosen[0] not in WEIGHTS:
        raise Sme2Error(f"model {model!r}: {WEIGHTS_KEY}= takes one of "
                        + "; ".join(f"{k} ({v})" for k, v in WEIGHTS.items()))
    rest = "&".join(i for i in items if i.partition("=")[0] != WEIGHTS_KEY)
    return name + (f"?{rest}" if rest else ""), chosen[0]


def model_label(model: str) -> str:
    """How ids and tables name a model: a .pte by its file name (``m.pte``), a library
    model by its spec as given, a registered model by its name."""
    return Path(model).name if is_pte(model) else model


def matrix_models(names: list[str], pte_globs: list[str], base: Path,
                  glob_base: Path) -> tuple[str, ...]:
    """The matrix's models: ``names`` (a .pte among them made absolute from ``base``) then
    every file each ``--sme2-pte`` glob matches (from ``glob_base``), in order, once each. A
    glob that matches nothing stops the session with one line: it is a typo, not a model."""
    out = [str((base / n).resolve()) if is_pte(n) else n for n in names]
    for pattern in pte_globs:
        anchor = Path(pattern) if Path(pattern).is_absolute() else glob_base / pattern
        root = Path(anchor.anchor)
        found = sorted(p for p in root.glob(str(anchor.relative_to(root))) if p.is_file())
        if not found:
            raise Sme2Error(f"--sme2-pte: {pattern!r} matches no file (from {glob_base})")
        out += [str(p.resolve()) for p in found]
    return tuple(dict.fromkeys(out))
