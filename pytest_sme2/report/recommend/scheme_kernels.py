"""What each quantization scheme of an LLM ran in each phase, from the kernel evidence the
session collected (a phase-only process's trace, sampling, or XNNPACK's selection log): one
finding per scheme, never from a table of what a scheme is expected to run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_sme2.analysis.isa import kernel_phrase
from pytest_sme2.report.digest import Unit
from pytest_sme2.report.recommend.wording import Recommendation
from pytest_sme2.results import BlockResult
from pytest_sme2.results.generation import DECODE, PHASES, PREFILL
from pytest_sme2.results.pooling import generation_blocks, pool_generation


@dataclass(frozen=True)
class SchemeKernels:
    """What one scheme's generation ran per phase, on one side (runner)."""

    scheme: str
    model: str
    runner: str
    device: str
    phrases: dict[str, str | None]     # phase -> kernel_phrase
    verdicts: dict[str, str]           # phase -> SME2 verdict

    def sentence(self, name_runner: bool = False, name_model: bool = False) -> str:
        who = self.scheme
        if name_model:
            who = f"{self.model} {who}"
        if name_runner:
            who = f"{who} on {self.runner}"
        pre, dec = self.phrases.get(PREFILL), self.phrases.get(DECODE)
        if pre and dec and pre == dec:
            ran = f"ran {pre} in prefill and decode"
        else:
            parts = [f"{p} in {ph}" for ph, p in ((PREFILL, pre), (DECODE, dec)) if p]
            ran = "ran " + " and ".join(parts) if parts else "named no kernels"
            missing = [ph for ph, p in ((PREFILL, pre), (DECODE, dec)) if not p]
            if parts and missing:
                ran += f" (no kernels named for {' or '.join(missing)})"
        return f"{who} {ran}"


def scheme_kernels(results: Iterable[BlockResult]) -> list[SchemeKernels]:
    """One record per (model, scheme, runner, device) generation, in the order they ran."""
    seen: dict[tuple[str, str, str, str], list[BlockResult]] = {}
    for r in generation_blocks(results):
        seen.setdefault((r.model, r.dtype, r.runner_name, r.device_label), []).append(r)
    out = []
    for (model, scheme, runner, device), blocks in seen.items():
        f = pool_generation(blocks)
        assert f is not None
        out.append(SchemeKernels(scheme, model, runner, device,
                                 {p: kernel_phrase(f.phase(p).evidence) for p in PHASES},
                                 {p: f.phase(p).sme2 for p in PHASES}))
    return out


def kernel_sentences(results: Iterable[BlockResult]) -> list[str]:
    """One sentence per scheme (and runner, model, where several) on what each phase ran,
    only where a phase's evidence names kernels."""
    found = [s for s in scheme_kernels(results) if any(s.phrases.values())]
    runners = len({s.runner for s in found}) > 1
    models = len({s.model for s in found}) > 1
    devices = len({s.device for s in found}) > 1
    out = []
    for s in found:
        text = s.sentence(name_runner=runners, name_model=models)
        out.append(text + (f" ({s.device})" if devices else ""))
    return out


def find_generation_kernels(us: list[Unit]) -> list[Recommendation]:
    blocks = [b for u in us for s in u.sides for b in s.blocks]
    found = [s for s in scheme_kernels(blocks) if any(s.phrases.values())]
    sentences = kernel_sentences(blocks)
    out = []
    for s, text in zip(found, sentences):
        reached = [p for p, v in s.verdicts.items() if v == "proven"]
        if reached:
            tail = (f" SME2 is proven in {' and '.join(reached)}"
                    + ("" if len(reached) == 2 else
                       f", not in {' or '.join(p for p in s.verdicts if p not in reached)}")
                    + ".")
        else:
            others = [o.scheme for o in found if o.scheme != s.scheme
                      and "proven" in o.verdicts.values()]
            tail = " No SME2 kernel was proven in either phase" + (
                f"; {', '.join(dict.fromkeys(others))} reached SME2 in this session." if others
                else ".")
        verdicts = ", ".join(f"{p} {v}" for p, v in s.verdicts.items())
        out.append(Recommendation(f"{text[0].upper()}{text[1:]}.{tail}",
                                  f"kernel evidence per phase ({verdicts})",
                                  "generation-kernels"))
    return out
