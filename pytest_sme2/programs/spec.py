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

PTE_SUFFIX = ".pte"
# The dtype of a .pte case: the file is what it is, the dtype axis does not apply.
AS_EXPORTED = "pte"
LIBRARIES = ("transformers", "torchvision", "timm", "executorch")


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
        from pytest_sme2.errors import Sme2Error

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


def model_label(model: str) -> str:
    """How ids and tables name a model: a .pte by its file name (``m.pte``), a library
    model by its spec as given, a registered model by its name."""
    return Path(model).name if is_pte(model) else model


def matrix_models(names: list[str], pte_globs: list[str], base: Path,
                  glob_base: Path) -> tuple[str, ...]:
    """The matrix's models: ``names`` (a .pte among them made absolute from ``base``) then
    every file each ``--sme2-pte`` glob matches (from ``glob_base``), in order, once each. A
    glob that matches nothing stops the session with one line: it is a typo, not a model."""
    from pytest_sme2.errors import Sme2Error

    out = [str((base / n).resolve()) if is_pte(n) else n for n in names]
    for pattern in pte_globs:
        anchor = Path(pattern) if Path(pattern).is_absolute() else glob_base / pattern
        root = Path(anchor.anchor)
        found = sorted(p for p in root.glob(str(anchor.relative_to(root))) if p.is_file())
        if not found:
            raise Sme2Error(f"--sme2-pte: {pattern!r} matches no file (from {glob_base})")
        out += [str(p.resolve()) for p in found]
    return tuple(dict.fromkeys(out))
