"""What each quantization scheme of an LLM ran in each phase, from the kernel evidence the
session collected (a phase-only process's trace, sampling, or XNNPACK's selection log): one
finding per scheme, never from a table of what a scheme is expected to run."""

from __future__ import annotations

from pytest_sme2.report.digest import Unit
from pytest_sme2.report.generation import kernel_sentences, scheme_kernels
from pytest_sme2.report.recommend.wording import Recommendation


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
