"""The benchmark matrix: models x dtypes x threads (x devices, when a session has several),
with readable ids (``mobilenet_v3_small-fp16-t1``, ``...-t1-android:R5CX``) that ``-k`` can
filter. Configured by --sme2-models, --sme2-dtypes, --sme2-threads, --device or their ini
keys. The generation matrix (LLMs) adds context depths (--sme2-context-depth): a case at depth
512 is ``tiny_llama-8da8w-t1-d512``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from pytest_sme2._util.text import split_list
from pytest_sme2.devices.kinds import kind_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import DTYPES
from pytest_sme2.programs.registry import get_model, registered_models
from pytest_sme2.programs.spec import AS_EXPORTED, LibrarySpec, is_library, is_pte, model_label

DEFAULT_MODELS = ("toy_cnn", "mobilenet_v3_small", "vit_tiny")
DEFAULT_DTYPES = ("fp32", "fp16", "int8")
DEFAULT_THREADS = (1, 2)
# --sme2-llm-models auto: the zoo's LLM in ExecuTorch's production form (custom SDPA) where our
# runners can load its operators (the host), its plain-attention twin elsewhere (QEMU, phones).
AUTO = "auto"
AUTO_LLMS = {True: "tiny_llama", False: "tiny_llama_plain"}


@dataclass(frozen=True)
class Case:
    model: str
    dtype: str
    threads: int
    device: str | None = None       # the --device spec it runs on (set by with_devices)
    depth: int = 0                  # an LLM's context depth (tokens in its KV cache first)

    @property
    def id(self) -> str:
        """The id without the device: a session on one device keeps the ids it always had. A
        .pte has no dtype axis: ``m.pte-t1``."""
        at = f"-d{self.depth}" if self.depth else ""
        if self.dtype == AS_EXPORTED:
            return f"{model_label(self.model)}-t{self.threads}{at}"
        return f"{model_label(self.model)}-{self.dtype}-t{self.threads}{at}"

    @property
    def device_id(self) -> str:
        return f"{self.id}-{self.device}" if self.device else self.id


def with_devices(cases: list[Case], devices: Sequence[str]) -> list[Case]:
    """Every case on every device, device by device (without xdist they run in this order:
    one device after another)."""
    return [replace(c, device=d) for d in devices for c in cases]


def _counts(text: str, flag: str, unit: str, least: int) -> tuple[int, ...]:
    """A list of whole numbers of ``unit``, each ``least`` or more: ``1, 2,2`` -> (1, 2), in
    the order given, once each. A bad item stops the session naming ``flag``."""
    out = []
    for item in split_list(text):
        try:
            n = int(item)
        except ValueError:
            raise Sme2Error(f"{flag}: {item!r} is not a whole number of {unit}") from None
        if n < least:
            raise Sme2Error(f"{flag}: {n} {unit}; give {least} or more")
        out.append(n)
    return tuple(dict.fromkeys(out))


def parse_threads(text: str) -> tuple[int, ...]:
    return _counts(text, "--sme2-threads", "threads", 1)


def parse_depths(text: str) -> tuple[int, ...]:
    """--sme2-context-depth: ``0,512`` -> (0, 512); at least one depth."""
    depths = _counts(text, "--sme2-context-depth", "tokens", 0)
    if not depths:
        raise Sme2Error("--sme2-context-depth: no depth given; 0 is a generation from an "
                        "empty KV cache")
    return depths


def build_matrix(models: list[str], dtypes: list[str], threads: tuple[int, ...]) -> list[Case]:
    """Validate names up front: a typo should stop the session with one line, not fail every
    benchmark. A .pte is not opened here: a missing or bad file fails its own benchmarks (one
    line each) and the others go on."""
    for m in models:
        if is_library(m):
            LibrarySpec.parse(m)
        elif not is_pte(m):
            get_model(m)  # raises UnknownModelError listing registered names
    for d in dtypes:
        if d not in DTYPES:
            raise Sme2Error(f"--sme2-dtypes: unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    if not models or not dtypes or not threads:
        raise Sme2Error("the benchmark matrix is empty: give at least one model, dtype and "
                        "thread count")
    return [Case(m, d, t) for m in dict.fromkeys(models)
            for d in ((AS_EXPORTED,) if is_pte(m) else dict.fromkeys(dtypes)) for t in threads]


def llm_models_on(models: Sequence[str], device: str) -> list[str]:
    """``models`` with ``auto`` made :data:`AUTO_LLMS`' choice for ``device`` (a --device spec),
    each once."""
    kind = kind_of(device)
    auto = AUTO_LLMS[bool(kind and kind.host_operators)]
    return list(dict.fromkeys(auto if m == AUTO else m for m in models))


def build_llm_matrix(models: list[str], schemes: tuple[str, ...], threads: tuple[int, ...],
                     depths: tuple[int, ...] = (0,)) -> list[Case]:
    """The generation matrix (``sme2_llm_case``): LLMs x schemes x threads x context depths
    (``--sme2-context-depth``; whether a depth fits a program is checked once it is
    exported, before its first process). A registered
    model that is not an LLM stops the session with one line; a .pte is taken as exported
    (its own benchmarks say if it is not an LLM)."""
    for m in models:
        if not is_library(m) and not is_pte(m) and not get_model(m).llm:
            raise Sme2Error(f"--sme2-llm-models: {m} is not an LLM (registered without "
                            "llm=True); LLMs: " + ", ".join(
                                n for n in registered_models() if get_model(n).llm))
    return [Case(m, s, t, depth=d) for m in dict.fromkeys(models)
            for s in ((AS_EXPORTED,) if is_pte(m) else schemes) for t in threads
            for d in depths]
